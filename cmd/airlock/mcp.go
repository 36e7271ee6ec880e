package main

// mcpCmd groups the MCP commands. Each lives in a file of its own:
// mcp_servers.go (the registry), mcp_proxy.go (the stdio proxy),
// mcp_permission.go (Claude Code's permission-prompt tool).
type mcpCmd struct {
	Servers          mcpServersCmd          `cmd:"" help:"Register, list, show and remove MCP servers (admin)."`
	Proxy            mcpProxyCmd            `cmd:"" help:"A stdio MCP proxy an MCP client launches in place of a registered server: every tools/call is decided by Airlock first."`
	PermissionServer mcpPermissionServerCmd `cmd:"" name:"permission-server" help:"A stdio MCP server with one tool, approve, for Claude Code's --permission-prompt-tool."`
}
