package main

import "context"

type mcpProxyCmd struct{}

// Run is not built yet.
func (c *mcpProxyCmd) Run(ctx context.Context, g *globals) error {
	return usageError("mcp proxy is not built yet")
}
