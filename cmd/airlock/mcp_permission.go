package main

import "context"

type mcpPermissionServerCmd struct{}

// Run is not built yet.
func (c *mcpPermissionServerCmd) Run(ctx context.Context, g *globals) error {
	return usageError("mcp permission-server is not built yet")
}
