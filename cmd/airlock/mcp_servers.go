package main

import "context"

type mcpServersCmd struct{}

// Run is not built yet.
func (c *mcpServersCmd) Run(ctx context.Context, g *globals) error {
	return usageError("mcp servers is not built yet")
}
