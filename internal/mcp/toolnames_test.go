package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/mcp"
)

// TestCollidingTools: names sharing an Airlock name (ASCII case) form
// sets, each sorted; names alone of theirs, one spelling listed twice
// and names Airlock refuses collide with none.
func TestCollidingTools(t *testing.T) {
	got := mcp.CollidingTools("srv", []string{"read", "READ", "Read", "echo", "echo", "delete_file", "Delete_File", "rm/rf", "RM/RF", "get-sum"})
	assert.Equal(t, map[string][]string{
		"mcp.srv.read":        {"READ", "Read", "read"},
		"mcp.srv.delete_file": {"Delete_File", "delete_file"},
	}, got)
	assert.Empty(t, mcp.CollidingTools("srv", []string{"echo", "echo", "get-sum"}))
	assert.Equal(t, map[string][]string{
		"mcp.srv.resources.read": {"Resources.Read", "resources/read"},
		"mcp.srv.prompts.get":    {"prompts.get", "prompts/get"},
	}, mcp.CollidingTools("srv", []string{"Resources.Read", "prompts.get", "resources.list"}), "the gated methods' names")
	l := mcp.NewToolList("srv", []string{"echo"})
	assert.Equal(t, []string{"resources.read", "resources/read"}, l.Colliding("resources.read"), "listed or not")
}

// TestToolListColliding: a call's name collides when another listed
// tool shares its Airlock name, also when the call spells it in a way
// the list does not hold.
func TestToolListColliding(t *testing.T) {
	l := mcp.NewToolList("srv", []string{"read", "READ", "echo"})
	assert.Equal(t, []string{"READ", "read"}, l.Colliding("read"))
	assert.Equal(t, []string{"READ", "Read", "read"}, l.Colliding("Read"), "an unlisted spelling")
	assert.Nil(t, l.Colliding("echo"))
	assert.Equal(t, []string{"ECHO", "echo"}, l.Colliding("ECHO"), "an unlisted spelling of a listed tool")
	assert.Nil(t, l.Colliding("other"))
	assert.Nil(t, l.Colliding("rm/rf"))
	assert.True(t, l.Listed("READ"))
	assert.False(t, l.Listed("Read"))
}

// pages serves a tool list in pages of names (tools/list results), and
// counts the pages asked for.
type pages struct {
	pages [][]string
	asked int
	err   error
}

func (p *pages) page(_ context.Context, cursor json.RawMessage) (json.RawMessage, error) {
	p.asked++
	if p.err != nil {
		return nil, p.err
	}
	i := 0
	if cursor != nil {
		var c string
		if err := json.Unmarshal(cursor, &c); err != nil {
			return nil, err
		}
		fmt.Sscan(c, &i)
	}
	res := map[string]any{"tools": toolObjects(p.pages[i]...)}
	if i+1 < len(p.pages) {
		res["nextCursor"] = fmt.Sprint(i + 1)
	}
	return json.Marshal(res)
}

func toolObjects(names ...string) []any {
	out := []any{}
	for _, n := range names {
		out = append(out, map[string]any{"name": n, "inputSchema": map[string]any{"type": "object"}})
	}
	return out
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestCheckCall: a call of a colliding name is refused naming the
// collision; the list is read (every page) when none is kept, and again
// when the kept one does not hold the call's spelling, and not for a
// name it holds; a list that cannot be read refuses the call.
func TestCheckCall(t *testing.T) {
	ctx := context.Background()
	c := mcp.NewToolCache(0, 0, 0)
	p := &pages{pages: [][]string{{"READ", "echo"}, {"read"}}}
	err := c.CheckCall(ctx, "k", "srv", "read", p.page)
	var ce *mcp.CollisionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, []string{"READ", "read"}, ce.Tools)
	assert.Equal(t, "mcp.srv.read", ce.AirlockName)
	assert.Contains(t, mcp.CheckCallText(err), "read was not run")
	assert.Equal(t, 2, p.asked, "both pages")
	require.NoError(t, c.CheckCall(ctx, "k", "srv", "echo", p.page))
	assert.Equal(t, 2, p.asked, "the kept list serves a name it holds")
	require.NoError(t, c.CheckCall(ctx, "k", "srv", "new-tool", p.page))
	assert.Equal(t, 4, p.asked, "a name the list does not hold has it read again")
	require.NoError(t, c.CheckCall(ctx, "k", "srv", "rm/rf", p.page))
	assert.Equal(t, 4, p.asked, "a name Airlock refuses needs no list")

	broken := &pages{err: errors.New("boom")}
	err = c.CheckCall(ctx, "other", "srv", "echo", broken.page)
	var le *mcp.ToolListError
	require.ErrorAs(t, err, &le)
	assert.Contains(t, mcp.CheckCallText(err), "so it was not run")
	assert.Contains(t, mcp.CheckCallText(err), "boom")

	endless := &pages{pages: [][]string{{"a"}}}
	for range mcp.MaxToolListPages {
		endless.pages = append(endless.pages, []string{"a"})
	}
	require.ErrorAs(t, c.CheckCall(ctx, "endless", "srv", "a", endless.page), &le)
}

func answer(t *testing.T, result map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 3, "result": result})
	require.NoError(t, err)
	return b
}

func namesOf(t *testing.T, raw []byte) []string {
	t.Helper()
	var m struct {
		Result struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(raw, &m), "%s", raw)
	var out []string
	for _, tl := range m.Result.Tools {
		out = append(out, tl.Name)
	}
	return out
}

// TestListAnswer: a whole list passes byte for byte without collisions
// and loses every tool of a colliding set otherwise (its other fields
// kept), and is kept; a page of a paginated list is checked against the
// whole list (read when none is kept: page nil says it must be), so that
// a collision across pages removes the tool from each page; a page whose
// whole list cannot be read is an error.
func TestListAnswer(t *testing.T) {
	ctx := context.Background()
	c := mcp.NewToolCache(0, 0, 0)
	clean := answer(t, map[string]any{"tools": toolObjects("echo", "get-sum")})
	out, ok := c.ListAnswer(ctx, "k", "srv", true, clean, nil, quiet)
	require.True(t, ok)
	assert.Equal(t, clean, out)

	dup := answer(t, map[string]any{"tools": toolObjects("read", "echo", "READ"), "_meta": map[string]any{"x": 1}})
	out, ok = c.ListAnswer(ctx, "k", "srv", true, dup, nil, quiet)
	require.True(t, ok)
	assert.Equal(t, []string{"echo"}, namesOf(t, out))
	assert.Contains(t, string(out), `"_meta":{"x":1}`)
	assert.Contains(t, string(out), `"id":3`)
	var ce *mcp.CollisionError
	assert.ErrorAs(t, c.CheckCall(ctx, "k", "srv", "READ", nil), &ce, "the relayed list is kept: no page asked for")

	p := &pages{pages: [][]string{{"READ"}, {"echo"}, {"read"}}}
	page1 := answer(t, map[string]any{"tools": toolObjects("READ"), "nextCursor": "1"})
	_, ok = c.ListAnswer(ctx, "paged", "srv", true, page1, nil, quiet)
	assert.False(t, ok, "the whole list must be read first")
	out, ok = c.ListAnswer(ctx, "paged", "srv", true, page1, p.page, quiet)
	require.True(t, ok)
	assert.Empty(t, namesOf(t, out))
	assert.Contains(t, string(out), `"nextCursor":"1"`)
	page3 := answer(t, map[string]any{"tools": toolObjects("read")})
	out, ok = c.ListAnswer(ctx, "paged", "srv", false, page3, nil, quiet)
	require.True(t, ok, "the whole list is kept now")
	assert.Empty(t, namesOf(t, out))
	assert.Equal(t, 3, p.asked)

	broken := &pages{err: errors.New("boom")}
	out, ok = c.ListAnswer(ctx, "broken", "srv", false, page3, broken.page, quiet)
	require.True(t, ok)
	assert.Contains(t, string(out), `"error"`)
	assert.Contains(t, string(out), "boom")
	assert.NotContains(t, string(out), `"tools"`)

	// A cursor spelled so that only some servers read it is no first page.
	assert.True(t, mcp.FirstPage(nil))
	assert.True(t, mcp.FirstPage(json.RawMessage(`{"_meta":{}}`)))
	assert.False(t, mcp.FirstPage(json.RawMessage(`{"Cursor":"2"}`)))
	assert.False(t, mcp.FirstPage(json.RawMessage(`{"cursor":"2"}`)))
}

// TestToolCacheBounds: the oldest lists go beyond the bound of lists or
// of names, and Forget (list_changed) drops one.
func TestToolCacheBounds(t *testing.T) {
	c := mcp.NewToolCache(0, 2, 5)
	c.Put("a", mcp.NewToolList("s", []string{"x", "y"}))
	c.Put("b", mcp.NewToolList("s", []string{"x", "y"}))
	c.Put("c", mcp.NewToolList("s", []string{"x"}))
	_, ok := c.Get("a")
	assert.False(t, ok, "the oldest went: two lists at most")
	c.Put("d", mcp.NewToolList("s", []string{"x", "y", "z"}))
	_, ok = c.Get("b")
	assert.False(t, ok, "five names at most")
	_, ok = c.Get("d")
	assert.True(t, ok)
	c.Put("e", mcp.NewToolList("s", strings.Fields("1 2 3 4 5 6")))
	_, ok = c.Get("e")
	assert.False(t, ok, "a list over the bound alone is not kept")
	c.Forget("d")
	_, ok = c.Get("d")
	assert.False(t, ok)
}
