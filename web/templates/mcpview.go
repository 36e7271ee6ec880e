package templates

import (
	"net/url"
	"time"
)

// MCPServerRow is one registration on the MCP servers page.
type MCPServerRow struct {
	Name      string
	Transport string
	// Target is the command line or the URL.
	Target    string
	Version   int
	UpdatedBy string
	UpdatedAt time.Time
	// JSON is the registration as the API shows it to this reader (env
	// values withheld from non-admins).
	JSON string
}

// MCPView is the MCP servers page: the registrations and, for admins,
// the form to add one (Draft keeps what was typed after a refusal).
type MCPView struct {
	Servers []MCPServerRow
	Draft   string
}

// MCPEditView edits one registration: its JSON, based on Version.
type MCPEditView struct {
	Name    string
	Version int
	JSON    string
}

// MCPURL is the console path of a registration.
func MCPURL(name string) string { return "/ui/mcp/" + url.PathEscape(name) }
