package main

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/airlockhq/airlock/internal/mcp"
	"github.com/airlockhq/airlock/internal/mcpproxy"
)

// mcpProxyCmd is `airlock mcp proxy`: the MCP client launches it in place
// of the server, with AIRLOCK_URL and AIRLOCK_TOKEN (an agent token) in its
// environment. Everything it says of itself goes to stderr; stdout is the
// MCP session.
type mcpProxyCmd struct {
	Server         string `required:"" placeholder:"NAME" help:"The registered MCP server to launch (or connect to)."`
	Conversation   string `placeholder:"ID" help:"The conversation_id of every call (default: one random id per run)."`
	MaxResultBytes int    `default:"${max_result_bytes}" placeholder:"N" help:"Truncate a tool result given to the model beyond this many bytes (1024 to 1048576, what the injection scan reads)."`
}

// Run proxies the session on stdin/stdout until the client ends it.
func (c *mcpProxyCmd) Run(ctx context.Context, g *globals) error {
	if err := mcp.CheckMaxResultBytes(c.MaxResultBytes); err != nil {
		return &cliError{code: "usage", exit: exitUsage, message: "--max-result-bytes " + err.Error()}
	}
	cl, err := g.client()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return mcpproxy.Run(ctx, mcpproxy.Config{
		Client: cl, Server: c.Server, Conversation: c.Conversation,
		In: g.stdin, Out: g.stdout, Log: log, MaxResultBytes: c.MaxResultBytes,
	})
}

// maxResultBytesVar fills ${max_result_bytes} in the flag's default.
var maxResultBytesVar = map[string]string{"max_result_bytes": strconv.Itoa(mcp.DefaultMaxResultBytes)}
