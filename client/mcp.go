package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// MCPServer is an MCP server registration as an admin writes it (POST and
// PUT /api/v1/mcp/servers). Fields of the other transport stay empty.
type MCPServer struct {
	Name           string            `json:"name"`
	Transport      string            `json:"transport"` // stdio | http
	Command        string            `json:"command,omitempty"`
	Args           []string          `json:"args,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	PassEnv        []string          `json:"pass_env,omitempty"`
	Sandbox        *bool             `json:"sandbox,omitempty"`
	ReadOnlyPaths  []string          `json:"read_only_paths,omitempty"`
	Network        bool              `json:"network,omitempty"`
	URL            string            `json:"url,omitempty"`
	HeadersFromEnv map[string]string `json:"headers_from_env,omitempty"`
	AllowPrivate   []string          `json:"allow_private,omitempty"`
}

// MCPRegistration is a stored version of a registration.
type MCPRegistration struct {
	MCPServer
	Version   int       `json:"version"`
	UpdatedBy string    `json:"updated_by"`
	UpdatedAt time.Time `json:"updated_at"`
	// Redacted is true when env values were withheld from the reader.
	Redacted bool `json:"redacted,omitempty"`
}

// MCPServerList is GET /api/v1/mcp/servers.
type MCPServerList struct {
	Servers []MCPRegistration `json:"servers"`
}

// CreateMCPServer registers an MCP server (admin).
func (c *Client) CreateMCPServer(ctx context.Context, s MCPServer) (*MCPRegistration, error) {
	var out MCPRegistration
	if _, err := c.Do(ctx, http.MethodPost, "/api/v1/mcp/servers", s, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateMCPServer replaces a registration (admin); version > 0 sends
// If-Match and the server refuses a stale one with 412.
func (c *Client) UpdateMCPServer(ctx context.Context, s MCPServer, version int) (*MCPRegistration, error) {
	var out MCPRegistration
	h := http.Header{}
	if version > 0 {
		h.Set("If-Match", strconv.Quote(strconv.Itoa(version)))
	}
	if _, err := c.do(ctx, http.MethodPut, "/api/v1/mcp/servers/"+url.PathEscape(s.Name), h, s, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// MCPServer returns the registration name (admin, agent: with env values;
// reviewer, auditor: redacted).
func (c *Client) MCPServer(ctx context.Context, name string) (*MCPRegistration, error) {
	var out MCPRegistration
	if _, err := c.Do(ctx, http.MethodGet, "/api/v1/mcp/servers/"+url.PathEscape(name), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// MCPServers lists the registrations.
func (c *Client) MCPServers(ctx context.Context) ([]MCPRegistration, error) {
	var out MCPServerList
	if _, err := c.Do(ctx, http.MethodGet, "/api/v1/mcp/servers", nil, &out); err != nil {
		return nil, err
	}
	return out.Servers, nil
}

// DeleteMCPServer removes a registration (admin).
func (c *Client) DeleteMCPServer(ctx context.Context, name string) error {
	_, err := c.Do(ctx, http.MethodDelete, "/api/v1/mcp/servers/"+url.PathEscape(name), nil, nil)
	return err
}
