package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/airlockhq/airlock/internal/risk"
)

// What the model gets back from a tool call that Airlock let through:
// the shaping shared by the gateway (internal/mcpgateway) and the stdio
// proxy (internal/mcpproxy), so that both surfaces answer alike. Both
// report the upstream's result (hitl.Service.Result), read the server's
// injection verdict from the returned action (InjectionVerdict) and pass
// it to ShapeResult.

// DefaultMaxResultBytes is the JSON size of a tool result beyond which
// ShapeResult truncates it. It equals risk.MaxResultScanBytes, so that what
// the model reads was all scanned for prompt injection.
const DefaultMaxResultBytes = 1 << 20

// MaxResultBytes is the most a relay may be configured to give the model:
// ShapeResult truncates beyond it whatever it is asked, since a longer
// result would reach the model past what the injection scan reads.
const MaxResultBytes = risk.MaxResultScanBytes

// CheckMaxResultBytes refuses a relay's setting of the result size
// outside 1 KiB to MaxResultBytes (AIRLOCK_MCP_MAX_RESULT_BYTES, the
// proxy's --max-result-bytes).
func CheckMaxResultBytes(n int) error {
	if n < 1<<10 || n > MaxResultBytes {
		return fmt.Errorf("must be between %d and %d (what the injection scan reads)", 1<<10, MaxResultBytes)
	}
	return nil
}

// resultLimit is what a relay set to maxBytes gives the model at most
// (<= 0: the default; never past MaxResultBytes).
func resultLimit(maxBytes int) int {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxResultBytes
	}
	return min(maxBytes, MaxResultBytes)
}

// Injection verdicts of an action's result (the setting
// result_injection_action).
const (
	// VerdictFlag: the result was flagged and goes to the model as it is.
	VerdictFlag = "flag"
	// VerdictRedact: the result is withheld from the model.
	VerdictRedact = "redact"
)

// maxKeptBlockBytes is the largest non-text content block (or top-level
// field other than content) a truncated result keeps; larger ones (images,
// audio, embedded resources, structuredContent) are dropped.
const maxKeptBlockBytes = 1 << 10

// Withheld is the text the model reads instead of a result that looks like
// a prompt injection.
func Withheld(finding string) string {
	return "Airlock withheld this tool result because it looks like a prompt injection (" + finding +
		"); the tool did run. A reviewer can see the finding on the action."
}

// Unreadable is the text the model reads instead of a result Airlock could
// not read as a tool result.
const Unreadable = "Airlock withheld this tool result because it is not a valid MCP tool result; the tool did run."

// ErrorResult is an MCP CallToolResult with isError and text.
func ErrorResult(text string) json.RawMessage {
	b, err := marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}, "isError": true})
	if err != nil {
		// A map of strings always encodes; this keeps the answer an error.
		return json.RawMessage(`{"content":[{"type":"text","text":"Airlock withheld this tool result."}],"isError":true}`)
	}
	return b
}

// ShapeResult returns what the model gets for the result object of a
// tools/call (MCP CallToolResult JSON):
//   - redactFinding != "": an isError result saying Airlock withheld the
//     result because it looks like a prompt injection, naming the finding;
//   - a result that is not a JSON object (in UTF-8): an isError result
//     (fail closed: the raw bytes never pass);
//   - a result whose JSON is larger than maxBytes (<= 0: the default): its
//     text contents truncated and its large non-text contents and fields
//     dropped so that it fits, with a text note appended, "[Airlock: result
//     truncated from N to M bytes]";
//   - anything else: result itself, byte for byte.
func ShapeResult(result json.RawMessage, maxBytes int, redactFinding string) json.RawMessage {
	if redactFinding != "" {
		return ErrorResult(Withheld(redactFinding))
	}
	maxBytes = resultLimit(maxBytes)
	if t := bytes.TrimSpace(result); len(t) == 0 || t[0] != '{' || !json.Valid(t) || !utf8.Valid(t) {
		return ErrorResult(Unreadable)
	}
	if len(result) <= maxBytes {
		return result
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(result, &fields); err != nil {
		return ErrorResult(Unreadable)
	}
	return truncateResult(fields, len(result), maxBytes)
}

// block is one content block of a result being truncated.
type block struct {
	fields map[string]json.RawMessage
	text   string // a text block's text
	isText bool
}

// truncateResult fits a result of size bytes into maxBytes.
func truncateResult(fields map[string]json.RawMessage, size, maxBytes int) json.RawMessage {
	var raw []json.RawMessage
	if c, ok := fields["content"]; ok && json.Unmarshal(c, &raw) != nil {
		raw = nil
	}
	var blocks []block
	dropped := 0
	for _, r := range raw {
		var f map[string]json.RawMessage
		if json.Unmarshal(r, &f) != nil || f == nil {
			dropped++
			continue
		}
		var typ, text string
		if json.Unmarshal(f["type"], &typ) == nil && typ == "text" && json.Unmarshal(f["text"], &text) == nil {
			blocks = append(blocks, block{fields: f, text: text, isText: true})
			continue
		}
		if len(r) > maxKeptBlockBytes {
			dropped++
			continue
		}
		blocks = append(blocks, block{fields: f})
	}
	top := map[string]json.RawMessage{}
	for k, v := range fields {
		if k == "content" {
			continue
		}
		if k == "isError" || len(v) <= maxKeptBlockBytes {
			top[k] = v
		} else {
			dropped++
		}
	}
	note := func(to int) string {
		s := "[Airlock: result truncated from " + strconv.Itoa(size) + " to " + strconv.Itoa(to) + " bytes"
		if dropped > 0 {
			s += fmt.Sprintf("; %d non-text part(s) dropped", dropped)
		}
		return s + "]"
	}
	// The frame: everything but the texts. What does not fit goes, the
	// small non-text blocks first, then the other fields.
	frame := func() int {
		b, err := assemble(top, blocks, nil, note(maxBytes))
		if err != nil {
			return maxBytes + 1
		}
		return len(b)
	}
	for base := frame(); base > maxBytes; base = frame() {
		if i := lastNonText(blocks); i >= 0 {
			blocks = append(blocks[:i], blocks[i+1:]...)
			dropped++
			continue
		}
		if n := len(top); n > 0 && (n > 1 || top["isError"] == nil) {
			for k := range top {
				if k != "isError" {
					delete(top, k)
					dropped++
				}
			}
			continue
		}
		// Even the text blocks' frames do not fit: the note alone.
		blocks = nil
		break
	}
	// The texts, in order, within what is left; an estimate of their
	// encoded size, checked and tightened by the encoding itself.
	for slack := 0; slack < maxBytes; slack = slack*2 + 64 {
		left := maxBytes - frame() - slack
		texts := make([]string, len(blocks))
		for i, b := range blocks {
			if !b.isText {
				continue
			}
			texts[i] = cutJSON(b.text, left)
			left -= jsonLen(texts[i])
		}
		out, err := assemble(top, blocks, texts, note(maxBytes))
		if err != nil {
			break
		}
		// The note names the size it ends up with: shrinking the number
		// can only shrink the result.
		if out, err = namesItsSize(out, func(n int) (json.RawMessage, error) { return assemble(top, blocks, texts, note(n)) }); err != nil {
			break
		}
		if len(out) <= maxBytes {
			return out
		}
	}
	out, err := namesItsSize(nil, func(n int) (json.RawMessage, error) { return assemble(nil, nil, nil, note(n)) })
	if err != nil {
		return ErrorResult(Unreadable)
	}
	return out
}

// namesItsSize returns build(n) for the n that is its own length (out is
// a first try, or nil), so that the note states the result's true size.
func namesItsSize(out json.RawMessage, build func(n int) (json.RawMessage, error)) (json.RawMessage, error) {
	n := len(out)
	for range 4 {
		again, err := build(n)
		if err != nil {
			return nil, err
		}
		if len(again) == n {
			return again, nil
		}
		n = len(again)
		out = again
	}
	return out, nil
}

func lastNonText(blocks []block) int {
	for i := len(blocks) - 1; i >= 0; i-- {
		if !blocks[i].isText {
			return i
		}
	}
	return -1
}

// assemble encodes a result of the top fields and the blocks (text
// blocks with texts[i], or empty without texts; text blocks left empty by
// truncation are left out) followed by a text block holding note.
func assemble(top map[string]json.RawMessage, blocks []block, texts []string, note string) (json.RawMessage, error) {
	content := make([]any, 0, len(blocks)+1)
	for i, b := range blocks {
		if !b.isText {
			content = append(content, b.fields)
			continue
		}
		text := ""
		if texts != nil {
			if text = texts[i]; text == "" {
				continue
			}
		}
		f := make(map[string]json.RawMessage, len(b.fields))
		for k, v := range b.fields {
			f[k] = v
		}
		enc, err := marshal(text)
		if err != nil {
			return nil, err
		}
		f["text"] = enc
		content = append(content, f)
	}
	content = append(content, map[string]any{"type": "text", "text": note})
	out := make(map[string]any, len(top)+1)
	for k, v := range top {
		out[k] = v
	}
	out["content"] = content
	return marshal(out)
}

// marshal encodes v compactly without HTML escaping, so that strings keep
// the size jsonLen estimates.
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("mcp: encoding a tool result: %w", err)
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// runeJSONLen is how many bytes r (of width w in the text, invalid when
// r is utf8.RuneError of width 1) takes inside a JSON string; an upper
// bound of what encoding/json writes.
func runeJSONLen(r rune, w int) int {
	switch {
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20, r == utf8.RuneError && w == 1, r == '\u2028', r == '\u2029':
		return 6
	}
	return w
}

// jsonLen is the encoded size of s's characters, without the quotes.
func jsonLen(s string) int {
	n := 0
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		n += runeJSONLen(r, w)
		i += w
	}
	return n
}

// cutJSON returns the longest prefix of s, cut between characters, whose
// encoded size (jsonLen) is at most budget.
func cutJSON(s string, budget int) string {
	if budget <= 0 {
		return ""
	}
	n := 0
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if n += runeJSONLen(r, w); n > budget {
			return s[:i]
		}
		i += w
	}
	return s
}

// RedactFinding is what ShapeResult's redactFinding is for an
// InjectionVerdict: "" unless the action is redact, else the findings
// joined (never "" then, even without findings).
func RedactFinding(action string, findings []string) string {
	if action != VerdictRedact {
		return ""
	}
	if len(findings) == 0 {
		return "no finding named"
	}
	return strings.Join(findings, "; ")
}

// InjectionVerdict reads the "injection" object of an action's result as
// the API returns it: the action ("flag" or "redact") and the findings,
// or "" and nil when the result has none. A result that cannot be read,
// or an action other than flag, reads as redact (fail closed).
func InjectionVerdict(actionResult json.RawMessage) (action string, findings []string) {
	if t := bytes.TrimSpace(actionResult); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return "", nil
	}
	var r struct {
		Injection *struct {
			Action   string   `json:"action"`
			Findings []string `json:"findings"`
		} `json:"injection"`
	}
	if err := json.Unmarshal(actionResult, &r); err != nil {
		return VerdictRedact, []string{"the action's result could not be read"}
	}
	if r.Injection == nil {
		return "", nil
	}
	if r.Injection.Action != VerdictFlag {
		return VerdictRedact, r.Injection.Findings
	}
	return VerdictFlag, r.Injection.Findings
}
