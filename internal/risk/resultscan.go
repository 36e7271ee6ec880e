package risk

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// Bounds on the prompt-injection scan of one reported result.
const (
	// MaxResultScanBytes is how many bytes of strings (values and map keys,
	// output first, then error) one result scan reads; the rest is not
	// scanned. The MCP surfaces truncate what the model reads to
	// mcp.DefaultMaxResultBytes by default, so what the model reads is
	// what was scanned.
	MaxResultScanBytes = 1 << 20
	// maxResultFindings bounds the findings kept for one result.
	maxResultFindings = 16
)

// resultScan collects the injection findings of one result within the
// byte budget.
type resultScan struct {
	budget   int
	findings []string
}

// ScanResult scans the strings of a tool call's result for prompt
// injection: output as encoding/json decodes into any (values and map keys,
// any depth), then errText, the first MaxResultScanBytes of them. Each
// finding (ScanInjection's description) comes once, at most 16. The server
// records it on the action (hitl.Service.Result); the MCP relays run the
// same scan to know whether they must wait for the server's verdict.
func ScanResult(output any, errText string) []string {
	sc := &resultScan{budget: MaxResultScanBytes}
	sc.value(output)
	// An error given as JSON (a JSON-RPC error object) is scanned as its
	// reader decodes it: "\u0049gnore all previous instructions" in the
	// raw text reads as an instruction once decoded.
	var decoded any
	if t := strings.TrimSpace(errText); t != "" && strings.ContainsRune(`{["`, rune(t[0])) && json.Unmarshal([]byte(t), &decoded) == nil {
		sc.value(decoded)
	} else {
		sc.text(errText)
	}
	return sc.findings
}

// value walks v (as encoding/json decodes into any) with an explicit
// stack, so nesting depth costs no recursion; map keys are visited in
// sorted order so findings come out deterministically.
func (sc *resultScan) value(v any) {
	stack := []any{v}
	for len(stack) > 0 && sc.budget > 0 {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch x := cur.(type) {
		case string:
			sc.text(x)
		case []any:
			for i := len(x) - 1; i >= 0; i-- {
				stack = append(stack, x[i])
			}
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for i := len(keys) - 1; i >= 0; i-- {
				v := x[keys[i]]
				if b, ok := v.(string); ok && keys[i] == "blob" {
					v = sc.blobText(b)
				}
				stack = append(stack, v, keys[i])
			}
		}
	}
}

// blobText is what a "blob" (an MCP resource's content, base64) is scanned
// as: the text it encodes, when it decodes (cut to the remaining budget) to
// UTF-8 — a client may hand a text blob to the model as text, so an
// instruction inside must not pass as base64 — else the blob as it is.
func (sc *resultScan) blobText(b string) string {
	raw, cut := b, false
	if limit := (sc.budget/3 + 1) * 4; len(raw) > limit {
		raw, cut = raw[:limit], true
	}
	d, err := base64.StdEncoding.DecodeString(raw)
	for i := 0; cut && i < utf8.UTFMax-1 && len(d) > 0 && !utf8.Valid(d); i++ {
		d = d[:len(d)-1] // a character the cut split
	}
	if err != nil || !utf8.Valid(d) {
		return b
	}
	return string(d)
}

// text scans one string, cut to the remaining budget.
func (sc *resultScan) text(s string) {
	if s == "" || sc.budget <= 0 {
		return
	}
	if len(s) > sc.budget {
		s = s[:sc.budget]
	}
	sc.budget -= len(s)
	for _, h := range ScanInjection(s) {
		if len(sc.findings) >= maxResultFindings {
			return
		}
		if !slices.Contains(sc.findings, h) {
			sc.findings = append(sc.findings, h)
		}
	}
}
