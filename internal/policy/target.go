package policy

import (
	"encoding/json"
	"fmt"
	"math/big"
	"path"
	"slices"
	"strings"
)

// Target is one exact call: what an "always" approval allows and what the
// rule it was approved under stops asking about. A target names either the
// canonical path a path tool works on (Path) or the whole argument object
// (Args); Tool narrows it to one tool when the rule's tool is a glob.
type Target struct {
	// Tool is the exact tool name; empty means the rule's own tool.
	Tool string `json:"tool,omitempty"`
	// Path matches a call whose path argument ("path"), canonicalised, is
	// this path.
	Path string `json:"path,omitempty"`
	// Args matches a call whose arguments are exactly these: the same keys,
	// the same strings, numbers equal as written (no rounding).
	Args map[string]any `json:"args,omitempty"`
}

// PathArg is the argument a path target compares.
const PathArg = "path"

// CanonicalPath cleans p the way targets compare paths: "./", "..",
// repeated and trailing slashes removed; a relative path stays relative.
// A backslash is a character of a name, as on the systems tools run on
// ("notes\\a.md" is not "notes/a.md"). It returns "" for an empty path.
func CanonicalPath(p string) string {
	if p == "" {
		return ""
	}
	return path.Clean(p)
}

// TargetOf returns the target of a call: its canonical path when tool is
// a file tool (a word of its name says so: fs.write, file.put) and its
// arguments hold a string "path" and only content besides, else its whole
// arguments. Another tool's "path" is not a file's (an API's endpoint,
// bank.api {path, body}): a path target would allow any body there.
func TargetOf(tool string, args map[string]any) Target {
	if p, ok := args[PathArg].(string); ok && p != "" && isFileTool(tool) && onlyContentBesidesPath(args) {
		return Target{Tool: tool, Path: CanonicalPath(p)}
	}
	return Target{Tool: tool, Args: args}
}

// fileToolWords are the words of a tool's name that make it a file tool.
var fileToolWords = []string{"fs", "file", "files", "filesystem", "dir", "dirs", "directory", "folder"}

func isFileTool(tool string) bool {
	for _, w := range strings.FieldsFunc(strings.ToLower(tool), func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9')
	}) {
		if slices.Contains(fileToolWords, w) {
			return true
		}
	}
	return false
}

// contentArgs are the argument names that carry what a path tool writes,
// not where: a path target allows any content at its path. Not a file's
// mode: 0644 approved always must not allow 4755 at the same path.
var contentArgs = []string{"content", "contents", "text", "data", "body", "encoding", "append"}

func onlyContentBesidesPath(args map[string]any) bool {
	for k := range args {
		if k != PathArg && !slices.Contains(contentArgs, k) {
			return false
		}
	}
	return true
}

func (t Target) validate() error {
	switch {
	case t.Path == "" && t.Args == nil:
		return fmt.Errorf("a target needs path or args")
	case t.Path != "" && t.Args != nil:
		return fmt.Errorf("a target takes path or args, not both")
	case t.Path != "" && CanonicalPath(t.Path) != t.Path:
		return fmt.Errorf("target path %q is not canonical (want %q)", t.Path, CanonicalPath(t.Path))
	case strings.ContainsAny(t.Tool, `*?[\`):
		return fmt.Errorf("target tool %q must be an exact tool name", t.Tool)
	}
	return nil
}

// matches reports whether the call (tool, args) is t.
func (t Target) matches(tool string, args map[string]any) bool {
	if t.Tool != "" && t.Tool != tool {
		return false
	}
	if t.Path != "" {
		p, ok := args[PathArg].(string)
		return ok && onlyContentBesidesPath(args) && CanonicalPath(p) == t.Path
	}
	return sameJSON(t.Args, args)
}

// sameJSON reports whether two decoded JSON values are equal, numbers
// compared exactly (float64, json.Number and integers alike).
func sameJSON(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !sameJSON(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	case string, bool, nil:
		return a == b
	}
	ra, okA := exactNumber(a)
	rb, okB := exactNumber(b)
	return okA && okB && ra.Cmp(rb) == 0
}

// exactNumber returns v as an exact rational, for the number types decoded
// JSON holds.
func exactNumber(v any) (*big.Rat, bool) {
	switch n := v.(type) {
	case json.Number:
		return new(big.Rat).SetString(string(n))
	case float64:
		r := new(big.Rat)
		if r.SetFloat64(n) == nil {
			return nil, false
		}
		return r, true
	case int:
		return new(big.Rat).SetInt64(int64(n)), true
	case int64:
		return new(big.Rat).SetInt64(n), true
	case uint64:
		return new(big.Rat).SetUint64(n), true
	}
	return nil, false
}
