package policy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestTargetOf: only a file tool's call gets a path target; another
// tool's "path" (an API's endpoint) is compared with all its arguments,
// and a backslash is part of a name. Before, approving bank.api {path,
// body} "always" allowed any body at that path, and "notes\\a.md"
// matched an approval of "notes/a.md" (found by a review).
func TestTargetOf(t *testing.T) {
	t.Parallel()
	assert.Equal(t, Target{Tool: "fs.write", Path: "docs/a.md"}, TargetOf("fs.write", map[string]any{"path": "./docs//a.md", "content": "x"}))
	assert.Equal(t, Target{Tool: "file_put", Path: "a"}, TargetOf("file_put", map[string]any{"path": "a", "data": "x"}))
	for _, tool := range []string{"bank.api", "http.post", "crm.update", "profile.set"} {
		args := map[string]any{"path": "/v1/transfers", "body": map[string]any{"to": "acme", "amount": 5}}
		target := TargetOf(tool, args)
		assert.Equal(t, Target{Tool: tool, Args: args}, target, tool)
		assert.False(t, target.matches(tool, map[string]any{"path": "/v1/transfers", "body": map[string]any{"to": "mallory", "amount": 900}}), tool)
	}
	// A file's mode says what the file may do (run, setuid), not what it
	// holds: a call with one is approved for its exact arguments.
	withMode := map[string]any{"path": "bin/tool", "content": "x", "mode": "0644"}
	assert.Equal(t, Target{Tool: "fs.chmod", Args: withMode}, TargetOf("fs.chmod", withMode))
	fs := TargetOf("fs.write", map[string]any{"path": "notes/a.md"})
	assert.False(t, fs.matches("fs.write", map[string]any{"path": `notes\a.md`}))
	assert.True(t, fs.matches("fs.write", map[string]any{"path": "notes//a.md"}))
}

func TestTargetMatchesExactly(t *testing.T) {
	t.Parallel()
	path := Target{Path: "docs/readme.md"}
	args := Target{Args: map[string]any{"to": "x", "n": json.Number("10000000000000001"), "list": []any{1.5, "a"}}}
	cases := []struct {
		name   string
		target Target
		tool   string
		args   map[string]any
		want   bool
	}{
		{"same path", path, "fs.write", map[string]any{"path": "docs/readme.md", "content": "x"}, true},
		{"dot and double slash", path, "fs.write", map[string]any{"path": "./docs//readme.md"}, true},
		{"dot dot", path, "fs.write", map[string]any{"path": "docs/a/../readme.md"}, true},
		{"other path", path, "fs.write", map[string]any{"path": "docs/readme.md.bak"}, false},
		{"escaping dot dot", path, "fs.write", map[string]any{"path": "../docs/readme.md"}, false},
		{"extra non-content arg", path, "fs.write", map[string]any{"path": "docs/readme.md", "dst": "/etc/passwd"}, false},
		{"file mode is no content", path, "fs.write", map[string]any{"path": "docs/readme.md", "content": "x", "mode": "4755"}, false},
		{"path not a string", path, "fs.write", map[string]any{"path": 1.0}, false},
		{"tool narrowed", Target{Tool: "fs.write", Path: "docs/readme.md"}, "fs.delete", map[string]any{"path": "docs/readme.md"}, false},
		{"same args, float and number", args, "t", map[string]any{"to": "x", "n": json.Number("10000000000000001"), "list": []any{json.Number("1.50"), "a"}}, true},
		{"neighbour number", args, "t", map[string]any{"to": "x", "n": json.Number("10000000000000000"), "list": []any{1.5, "a"}}, false},
		{"float64 rounding is not equal", args, "t", map[string]any{"to": "x", "n": 1e16, "list": []any{1.5, "a"}}, false},
		{"extra key", args, "t", map[string]any{"to": "x", "n": json.Number("10000000000000001"), "list": []any{1.5, "a"}, "cc": "y"}, false},
		{"missing key", args, "t", map[string]any{"to": "x", "list": []any{1.5, "a"}}, false},
		{"string vs number", Target{Args: map[string]any{"n": "1"}}, "t", map[string]any{"n": 1.0}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, c.want, c.target.matches(c.tool, c.args))
		})
	}
}

func TestAlwaysTargetBeatsOnlyItsRule(t *testing.T) {
	t.Parallel()
	set := setup(t, "", `{"rules":[
		{"id":"files","tool":"fs.*","effect":"approve","except":[{"tool":"fs.write","path":"docs/a.md"}]},
		{"id":"always-1","tool":"fs.write","effect":"allow","target":{"path":"docs/a.md"}},
		{"id":"secrets","tool":"fs.write","effect":"approve","when":"args.content.contains('KEY')"}
	]}`)
	decide := func(tool string, args map[string]any) Decision {
		return set.Decide(Input{Tool: tool, Args: args, Risk: RiskInfo{Level: "low"}})
	}
	d := decide("fs.write", map[string]any{"path": "docs/a.md", "content": "hi"})
	assert.Equal(t, Allow, d.Effect)
	assert.Equal(t, "always-1", d.RuleID)
	assert.Equal(t, Approve, decide("fs.write", map[string]any{"path": "docs/b.md", "content": "hi"}).Effect)
	assert.Equal(t, Approve, decide("fs.read", map[string]any{"path": "docs/a.md"}).Effect)
	d = decide("fs.write", map[string]any{"path": "docs/a.md", "content": "KEY"})
	assert.Equal(t, Approve, d.Effect, "another approve rule still applies")
	assert.Equal(t, "secrets", d.RuleID)
}

func TestTargetValidated(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		`{"rules":[{"id":"a","tool":"fs.write","effect":"allow","target":{}}]}`,
		`{"rules":[{"id":"a","tool":"fs.write","effect":"allow","target":{"path":"a/../b"}}]}`,
		`{"rules":[{"id":"a","tool":"fs.write","effect":"allow","target":{"path":"a","args":{}}}]}`,
		`{"rules":[{"id":"a","tool":"fs.write","effect":"allow","target":{"tool":"fs.read","path":"a"}}]}`,
		`{"rules":[{"id":"a","tool":"fs.*","effect":"approve","except":[{"tool":"fs.*","path":"a"}]}]}`,
	} {
		doc, err := ParseDocument([]byte(src))
		if err == nil {
			_, err = Compile(doc, 1)
		}
		assert.Error(t, err, src)
	}
}
