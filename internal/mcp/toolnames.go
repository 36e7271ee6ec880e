package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/jsonx"
)

// One Airlock name, one upstream tool: the rule both relays (the gateway,
// internal/mcpgateway, and the stdio proxy, internal/mcpproxy) keep with
// this file. Airlock tool names are case-insensitive (hitl.CanonicalToolName
// lower-cases them), so a server listing delete_file and Delete_File, or
// read and READ, would give both one Airlock name, mcp.<server>.read: a
// rule, a conversation grant or an "always" approval written for one
// would let the other run, and a reviewer reading mcp.<server>.read could
// not tell which tool will. So:
//
//   - a tools/list answer a relay passes on never shows two tools whose
//     Airlock names are equal: every tool of such a set is removed (and
//     the relay logs which and why), so the client's model never learns
//     them (ToolCache.ListAnswer);
//   - a tools/call for a name that shares its Airlock name with another
//     tool of the server (listed, or called under a spelling the server
//     did not list) is refused, never forwarded, whether or not the client
//     listed tools first (ToolCache.CheckCall).
//
// The relay knows the server's tool list from the lists it relayed (an
// answer to a tools/list without a cursor that has no nextCursor is the
// whole list) or reads it itself, every page (FetchToolList), and keeps it
// for ToolListTTL in a bounded ToolCache, forgetting it on
// notifications/tools/list_changed. A call whose name the known list does
// not hold exactly has the list read again first (it may have changed).
// When the list cannot be read, the call does not run (fail closed).
//
// Pagination: a page of a paginated list (a request with a cursor, or an
// answer with a nextCursor) is checked against the whole list, which the
// relay reads itself when it does not hold it fresh: a collision whose
// tools are on different pages removes each of them from its page. When
// the whole list cannot be read, the page is answered with an error in
// place of the tools.

// The methods of tool lists.
const (
	MethodToolsList              = "tools/list"
	NotificationToolsListChanged = "notifications/tools/list_changed"
)

// Bounds of the tool lists the relays read and keep.
const (
	// ToolListTTL is how long a relay trusts a tool list it read.
	ToolListTTL = time.Minute
	// MaxListedTools is the most tools a list may have: a longer one is
	// not read (the calls it was needed for do not run).
	MaxListedTools = 10000
	// MaxToolListPages is the most pages a relay reads of one list.
	MaxToolListPages = 100
	// ToolListTimeout bounds reading a whole list.
	ToolListTimeout = 30 * time.Second
	// DefaultCachedToolLists and DefaultCachedToolNames bound a ToolCache:
	// the lists it keeps, and the tool names in all of them.
	DefaultCachedToolLists = 1024
	DefaultCachedToolNames = 50000
)

// CollidingTools returns the tools among names (as server spells them)
// that share their Airlock name (hitl.CanonicalToolName of ToolName) with
// another: each set keyed by that Airlock name, sorted, of two or more
// distinct spellings. A name Airlock refuses has no Airlock name and
// collides with none (a call of it is refused anyway).
//
// The gated methods other than tools/call are Airlock tools too
// (mcp.<server>.resources.read, mcp.<server>.prompts.get): a tool whose
// Airlock name is one of those collides with the method, which stands in
// its set under the method's name (resources/read, prompts/get; no tool
// name Airlock accepts has a slash), so that a rule for reading the
// server's resources never lets a tool run.
func CollidingTools(server string, names []string) map[string][]string {
	by := map[string][]string{}
	for c, method := range reservedNames(server) {
		by[c] = []string{method}
	}
	for _, n := range names {
		c, err := hitl.CanonicalToolName(ToolName(server, n))
		if err != nil {
			continue
		}
		if !slices.Contains(by[c], n) {
			by[c] = append(by[c], n)
		}
	}
	out := map[string][]string{}
	for c, set := range by {
		if len(set) > 1 {
			slices.Sort(set)
			out[c] = set
		}
	}
	return out
}

// reservedNames are the Airlock names of server's gated methods other
// than tools/call, each with its method.
func reservedNames(server string) map[string]string {
	out := map[string]string{}
	for tool, method := range map[string]string{ToolResourcesRead: MethodResourcesRead, ToolPromptsGet: MethodPromptsGet} {
		if c, err := hitl.CanonicalToolName(ToolName(server, tool)); err == nil {
			out[c] = method
		}
	}
	return out
}

// ToolList is the tool list of a server as a relay read it.
type ToolList struct {
	server string
	listed map[string]bool
	// colliding are the listed names of CollidingTools, by Airlock name.
	colliding map[string][]string
}

// NewToolList is the list of names of server.
func NewToolList(server string, names []string) *ToolList {
	l := &ToolList{server: server, listed: make(map[string]bool, len(names)), colliding: CollidingTools(server, names)}
	for _, n := range names {
		l.listed[n] = true
	}
	return l
}

// Listed reports whether the list holds name, spelled so.
func (l *ToolList) Listed(name string) bool { return l.listed[name] }

// Colliding returns the names sharing name's Airlock name, name among
// them, when there are two or more: the listed ones, and name itself
// when the list does not hold that spelling. nil: name is the only tool
// of its Airlock name (or Airlock refuses the name).
func (l *ToolList) Colliding(name string) []string {
	c, err := hitl.CanonicalToolName(ToolName(l.server, name))
	if err != nil {
		return nil
	}
	if set, ok := l.colliding[c]; ok {
		if slices.Contains(set, name) {
			return set
		}
		return sortedWith(set, name)
	}
	if method, ok := reservedNames(l.server)[c]; ok {
		// Listed or not: the name is a gated method's.
		return sortedWith([]string{method}, name)
	}
	if l.listed[name] {
		return nil
	}
	// An unlisted spelling of a listed tool's Airlock name.
	for n := range l.listed {
		if lc, err := hitl.CanonicalToolName(ToolName(l.server, n)); err == nil && lc == c {
			return sortedWith([]string{n}, name)
		}
	}
	return nil
}

func sortedWith(set []string, name string) []string {
	return slices.Sorted(slices.Values(append(slices.Clone(set), name)))
}

// size is how many names the list holds.
func (l *ToolList) size() int { return len(l.listed) }

// CollisionError is a tools/call refused because its name shares its
// Airlock name with another tool of the server.
type CollisionError struct {
	Server, Name, AirlockName string
	// Tools are the names sharing AirlockName, Name among them.
	Tools []string
}

func (e *CollisionError) Error() string {
	for _, t := range e.Tools {
		if t == MethodResourcesRead || t == MethodPromptsGet {
			return fmt.Sprintf("Airlock: the MCP server %s's tool %s has the Airlock name of the server's %s requests, %s, so a rule or an approval for those would let the tool run; %s was not run.",
				e.Server, e.Name, t, e.AirlockName, e.Name)
		}
	}
	return fmt.Sprintf("Airlock: the MCP server %s has tools whose names differ only in case (%s): they are all the Airlock tool %s, so a rule or an approval for one would let the others run; %s was not run.",
		e.Server, strings.Join(e.Tools, ", "), e.AirlockName, e.Name)
}

// ToolListError is a tools/call that was not run because the server's
// tool list, needed to check its name, could not be read.
type ToolListError struct{ Err error }

func (e *ToolListError) Error() string {
	return "the MCP server's tool list, needed to check that the tool's name is the only one of its Airlock name, could not be read: " + e.Err.Error()
}

func (e *ToolListError) Unwrap() error { return e.Err }

// CheckCallText is what the model reads for a tools/call CheckCall
// refused with err.
func CheckCallText(err error) string {
	if c, ok := errors.AsType[*CollisionError](err); ok {
		return c.Error()
	}
	return Undecided(MethodToolsCall, err.Error())
}

// PageFunc asks the server for one page of its tool list (cursor nil: the
// first) and returns the result of the answer.
type PageFunc func(ctx context.Context, cursor json.RawMessage) (json.RawMessage, error)

// ToolsListRequest is a tools/list request with id (JSON) for the page
// at cursor (nil: the first).
func ToolsListRequest(id string, cursor json.RawMessage) []byte {
	params := "{}"
	if cursor != nil {
		params = `{"cursor":` + string(cursor) + `}`
	}
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","params":` + params + `}`)
}

// FetchToolList reads every page of a server's tool list (at most
// MaxToolListPages, MaxListedTools tools, within ToolListTimeout) and
// returns the tools' names.
func FetchToolList(ctx context.Context, page PageFunc) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, ToolListTimeout)
	defer cancel()
	var names []string
	var cursor json.RawMessage
	for range MaxToolListPages {
		result, err := page(ctx, cursor)
		if err != nil {
			return nil, err
		}
		more, next, err := ReadToolsPage(result)
		if err != nil {
			return nil, err
		}
		names = append(names, more...)
		if len(names) > MaxListedTools {
			return nil, fmt.Errorf("the server lists more than %d tools", MaxListedTools)
		}
		if next == nil {
			return names, nil
		}
		cursor = next
	}
	return nil, fmt.Errorf("the server's tool list has more than %d pages", MaxToolListPages)
}

// foldGet is m's value for key: spelled so, else under a key Go's
// decoder folds to it (a Go client reads it so; a message with both was
// refused by CheckMessage).
func foldGet(m map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	if v, ok := m[key]; ok {
		return v, true
	}
	fk := jsonx.FoldKey(key)
	for k, v := range m {
		if jsonx.FoldKey(k) == fk {
			return v, true
		}
	}
	return nil, false
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// toolsPage is a tools/list result read: its fields, its tools, and their
// names ("" for a tool without a string name).
type toolsPage struct {
	fields map[string]json.RawMessage
	key    string // the key of the tools
	tools  []json.RawMessage
	names  []string
	next   json.RawMessage // nil: no nextCursor
}

func readToolsPage(result json.RawMessage) (toolsPage, error) {
	var p toolsPage
	if json.Unmarshal(result, &p.fields) != nil || p.fields == nil {
		return p, errors.New("a tools/list result is not an object")
	}
	for k := range p.fields {
		if jsonx.FoldKey(k) == jsonx.FoldKey("tools") {
			p.key = k
		}
	}
	if p.key == "" || json.Unmarshal(p.fields[p.key], &p.tools) != nil {
		return p, errors.New("a tools/list result has no tools array")
	}
	if len(p.tools) > MaxListedTools {
		return p, fmt.Errorf("the server lists more than %d tools", MaxListedTools)
	}
	p.names = make([]string, len(p.tools))
	for i, t := range p.tools {
		var tool map[string]json.RawMessage
		if json.Unmarshal(t, &tool) != nil {
			continue
		}
		if raw, ok := foldGet(tool, "name"); ok {
			_ = json.Unmarshal(raw, &p.names[i])
		}
	}
	if next, ok := foldGet(p.fields, "nextCursor"); ok && !isNull(next) {
		p.next = next
	}
	return p, nil
}

// ReadToolsPage reads a tools/list result: its tools' names and its
// nextCursor (nil: the last page).
func ReadToolsPage(result json.RawMessage) (names []string, next json.RawMessage, err error) {
	p, err := readToolsPage(result)
	if err != nil {
		return nil, nil, err
	}
	for _, n := range p.names {
		if n != "" {
			names = append(names, n)
		}
	}
	return names, p.next, nil
}

// FirstPage reports whether a tools/list request's params ask for the
// first page: no params, or none but _meta. Any other key (a cursor, also
// spelled so that only some servers read it) makes its answer a page that
// is not known to be the whole list.
func FirstPage(params json.RawMessage) bool {
	if isNull(params) {
		return true
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(params, &m) != nil {
		return false
	}
	for k := range m {
		if k != "_meta" {
			return false
		}
	}
	return true
}

// ToolCache keeps servers' tool lists for ToolListTTL, by a key the relay
// chooses (the gateway: registration, version and session; the proxy: its
// server), bounded in lists and in names.
type ToolCache struct {
	ttl      time.Duration
	maxLists int
	maxNames int
	now      func() time.Time

	mu    sync.Mutex
	lists map[string]cachedList
	names int
	seq   uint64
}

type cachedList struct {
	list *ToolList
	at   time.Time
	seq  uint64 // the order of Puts: the lowest goes first
}

// NewToolCache returns a cache keeping each list for ttl (<= 0:
// ToolListTTL), at most maxLists lists and maxNames names in all (<= 0:
// the defaults); the oldest go first.
func NewToolCache(ttl time.Duration, maxLists, maxNames int) *ToolCache {
	if ttl <= 0 {
		ttl = ToolListTTL
	}
	if maxLists <= 0 {
		maxLists = DefaultCachedToolLists
	}
	if maxNames <= 0 {
		maxNames = DefaultCachedToolNames
	}
	return &ToolCache{ttl: ttl, maxLists: maxLists, maxNames: maxNames, now: time.Now, lists: map[string]cachedList{}}
}

// Get returns the list kept under key when it is fresh.
func (c *ToolCache) Get(key string) (*ToolList, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.lists[key]
	if !ok {
		return nil, false
	}
	if c.now().Sub(e.at) >= c.ttl {
		c.dropLocked(key)
		return nil, false
	}
	return e.list, true
}

// Put keeps l under key (not when it alone is over the bound of names).
func (c *ToolCache) Put(key string, l *ToolList) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(key)
	if l.size() > c.maxNames {
		return
	}
	now := c.now()
	for k, e := range c.lists {
		if now.Sub(e.at) >= c.ttl {
			c.dropLocked(k)
		}
	}
	for len(c.lists) > 0 && (len(c.lists) >= c.maxLists || c.names+l.size() > c.maxNames) {
		oldest, seq := "", c.seq+1
		for k, e := range c.lists {
			if e.seq < seq {
				oldest, seq = k, e.seq
			}
		}
		c.dropLocked(oldest)
	}
	c.seq++
	c.lists[key] = cachedList{list: l, at: now, seq: c.seq}
	c.names += l.size()
}

// Forget drops the list kept under key (notifications/tools/list_changed).
func (c *ToolCache) Forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(key)
}

func (c *ToolCache) dropLocked(key string) {
	if e, ok := c.lists[key]; ok {
		c.names -= e.list.size()
		delete(c.lists, key)
	}
}

// fetch reads the whole list of server with page and keeps it under key.
func (c *ToolCache) fetch(ctx context.Context, key, server string, page PageFunc) (*ToolList, error) {
	names, err := FetchToolList(ctx, page)
	if err != nil {
		return nil, err
	}
	l := NewToolList(server, names)
	c.Put(key, l)
	return l, nil
}

// CheckCall decides whether a tools/call of name may go on to be decided
// by Airlock and forwarded: nil, or a *CollisionError when name shares its
// Airlock name with another tool of server, or a *ToolListError when the
// list needed to tell could not be read (the call does not run either).
// The list kept under key serves when it is fresh and holds name as
// spelled; else it is read again with page (no round trip on the common
// path: a name the fresh list holds).
func (c *ToolCache) CheckCall(ctx context.Context, key, server, name string, page PageFunc) error {
	if _, err := hitl.CanonicalToolName(ToolName(server, name)); err != nil {
		return nil // Airlock refuses the call by its name
	}
	l, ok := c.Get(key)
	if !ok || !l.Listed(name) {
		var err error
		if l, err = c.fetch(ctx, key, server, page); err != nil {
			return &ToolListError{Err: err}
		}
	}
	if set := l.Colliding(name); set != nil {
		an, _ := hitl.CanonicalToolName(ToolName(server, name))
		return &CollisionError{Server: server, Name: name, AirlockName: an, Tools: set}
	}
	return nil
}

// ListAnswer returns what the client gets of raw, the server's answer to
// a tools/list of the client's (first: FirstPage of its params): raw
// itself when no tool in it shares its Airlock name with another;
// without every such tool (logged to log) otherwise; an error in place of
// a page of a paginated list when the whole list, needed to check it,
// cannot be read. The whole list is the answer itself when first and it
// has no nextCursor (then kept under key), else the one kept under key,
// else read with page; with page nil, ok is false when it would have to
// be read (the caller then calls again with a page, where it may wait).
// An answer that is no tools/list result passes as it is.
func (c *ToolCache) ListAnswer(ctx context.Context, key, server string, first bool, raw []byte, page PageFunc, log *slog.Logger) (out []byte, ok bool) {
	var msg map[string]json.RawMessage
	if json.Unmarshal(raw, &msg) != nil {
		return raw, true
	}
	result, has := msg["result"]
	if !has {
		return raw, true
	}
	p, err := readToolsPage(result)
	if err != nil {
		return raw, true
	}
	all := p.names
	if first && p.next == nil {
		c.Put(key, NewToolList(server, p.names))
	} else {
		l, fresh := c.Get(key)
		if !fresh {
			if page == nil {
				return nil, false
			}
			if l, err = c.fetch(ctx, key, server, page); err != nil {
				log.Warn("mcp: withheld a page of a tool list: the whole list, needed to check its names, could not be read",
					"server", server, "err", err)
				return errorAnswer(msg["id"], "Airlock withheld this page of the MCP server's tool list: the whole list, needed to check that no two tools share an Airlock name, could not be read: "+err.Error()), true
			}
		}
		all = append(append([]string(nil), all...), slices.Collect(maps.Keys(l.listed))...)
	}
	sets := CollidingTools(server, all)
	if len(sets) == 0 {
		return raw, true
	}
	drop := map[string]bool{}
	for an, set := range sets {
		log.Warn("mcp: removed from a tool list the tools whose names share an Airlock name: a rule or an approval for it would let any of them run, so none is listed, and a call of any is refused",
			"server", server, "airlock_name", an, "tools", strings.Join(set, ", "))
		for _, n := range set {
			drop[n] = true
		}
	}
	kept := make([]json.RawMessage, 0, len(p.tools))
	for i, t := range p.tools {
		if !drop[p.names[i]] || p.names[i] == "" {
			kept = append(kept, t)
		}
	}
	if len(kept) == len(p.tools) {
		return raw, true
	}
	tools, err := marshal(kept)
	if err != nil {
		return errorAnswer(msg["id"], "Airlock withheld the MCP server's tool list: it could not be rewritten"), true
	}
	p.fields[p.key] = tools
	if msg["result"], err = marshal(p.fields); err != nil {
		return errorAnswer(msg["id"], "Airlock withheld the MCP server's tool list: it could not be rewritten"), true
	}
	b, err := marshal(msg)
	if err != nil {
		return errorAnswer(msg["id"], "Airlock withheld the MCP server's tool list: it could not be rewritten"), true
	}
	return b, true
}

// errorAnswer is a JSON-RPC error response to id with message text.
func errorAnswer(id json.RawMessage, text string) []byte {
	if isNull(id) {
		id = json.RawMessage("null")
	}
	b, err := marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32603, "message": text}})
	if err != nil {
		return []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Airlock withheld the MCP server's tool list"}}`)
	}
	return b
}
