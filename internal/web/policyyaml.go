package web

import (
	"bytes"
	"encoding/json"
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/airlockhq/airlock/internal/policy"
)

// policyYAML renders a policy document for the console's policy pages and
// editor, in a form policy.ParseDocument reads back to exactly the same
// document (so that saving it unchanged changes nothing): block YAML with
// the fields in the order of the API's JSON (id, tool, effect, when, …),
// which reads better than a generic encoder's sorted keys; where that
// would be read back otherwise (ParseDocument reads YAML 1.1, where a plain
// no, y or off is a boolean, and an "always" approval's target holds the
// agent's own argument values), the same with every string quoted; and
// where even that would not do, indented JSON, which ParseDocument reads
// as it is.
func policyYAML(doc policy.Document) (string, error) {
	if doc.Rules == nil {
		doc.Rules = []policy.Rule{}
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("web: encoding policy: %w", err)
	}
	for _, quoted := range []bool{false, true} {
		if y, err := blockYAML(js, quoted); err == nil && readsBack(y, js) {
			return y, nil
		}
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, js, "", "  "); err != nil {
		return "", fmt.Errorf("web: writing policy json: %w", err)
	}
	buf.WriteByte('\n')
	return buf.String(), nil
}

// blockYAML writes the JSON document js as block YAML, every string
// scalar double-quoted when quoted is set.
func blockYAML(js []byte, quoted bool) (string, error) {
	// JSON is YAML: decoding it into a node keeps the key order.
	var node yaml.Node
	if err := yaml.Unmarshal(js, &node); err != nil {
		return "", fmt.Errorf("web: converting policy: %w", err)
	}
	blockStyle(&node, quoted)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&node); err != nil {
		return "", fmt.Errorf("web: writing policy yaml: %w", err)
	}
	return buf.String(), nil
}

// readsBack reports whether ParseDocument reads y as the document whose
// JSON is js.
func readsBack(y string, js []byte) bool {
	back, err := policy.ParseDocument([]byte(y))
	if err != nil {
		return false
	}
	if back.Rules == nil {
		back.Rules = []policy.Rule{}
	}
	again, err := json.Marshal(back)
	return err == nil && bytes.Equal(again, js)
}

// blockStyle drops the flow style and quotes JSON gave every node; the
// encoder quotes again only where YAML 1.2 needs it, or (quoted) every
// string.
func blockStyle(n *yaml.Node, quoted bool) {
	n.Style = 0
	if n.Kind == yaml.SequenceNode && len(n.Content) == 0 {
		n.Style = yaml.FlowStyle // rules: []
	}
	if quoted && n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		n.Style = yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		blockStyle(c, quoted)
	}
}
