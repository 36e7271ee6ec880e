package web

import (
	"bytes"
	"encoding/json"
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/airlockhq/airlock/internal/policy"
)

// policyYAML renders a policy document as block YAML with the fields in the
// order of the API's JSON (id, tool, effect, when, …), which reads better
// than a generic encoder's sorted keys. policy.ParseDocument reads it back
// to the same document.
func policyYAML(doc policy.Document) (string, error) {
	if doc.Rules == nil {
		doc.Rules = []policy.Rule{}
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("web: encoding policy: %w", err)
	}
	// JSON is YAML: decoding it into a node keeps the key order.
	var node yaml.Node
	if err := yaml.Unmarshal(js, &node); err != nil {
		return "", fmt.Errorf("web: converting policy: %w", err)
	}
	blockStyle(&node)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&node); err != nil {
		return "", fmt.Errorf("web: writing policy yaml: %w", err)
	}
	return buf.String(), nil
}

// blockStyle drops the flow style and quotes JSON gave every node; the
// encoder quotes again only where YAML needs it.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	if n.Kind == yaml.SequenceNode && len(n.Content) == 0 {
		n.Style = yaml.FlowStyle // rules: []
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}
