package policy

import (
	"fmt"
	"path"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
)

// Limits on policy documents.
const (
	// MaxRules is the most rules one document may hold.
	MaxRules = 1000
	// MaxApprovals is the most approvals a rule may require.
	MaxApprovals = 10
	// MaxTimeout is the longest pending timeout a rule or setting may set.
	MaxTimeout = 7 * 24 * time.Hour
	// maxToolLength bounds a rule's tool name or glob.
	maxToolLength = 128
	// maxIDLength bounds a rule id.
	maxIDLength = 64
)

// Compiled is a validated policy with its conditions compiled once. It is
// immutable and safe for concurrent use.
type Compiled struct {
	doc     Document
	version int
	rules   []compiledRule
	budgets []compiledBudget
	// defaultReasons explains the document's default in each role; empty
	// when the document has no default.
	defaultReasons [2]string
}

// compiledRule is a Rule ready for matching.
type compiledRule struct {
	Rule
	match     toolMatcher
	riskFloor int         // rank of Rule.Risk; 0 (low) when unset
	prg       cel.Program // nil without a when condition
	approvals int         // >= 1 for approve rules
	timeout   time.Duration
	// reasons explains a match, precomputed for the policy in the fleet
	// role (index 0) and the agent role (index 1).
	reasons [2]string
}

// The roles a Compiled can play in a Set, as indexes of precomputed reasons.
const (
	roleFleet = 0
	roleAgent = 1
)

var roleNames = [2]string{roleFleet: SourceFleet, roleAgent: SourceAgent}

// Version returns the version the policy was compiled as (0 for nil).
func (c *Compiled) Version() int {
	if c == nil {
		return 0
	}
	return c.version
}

// Document returns a copy of the compiled document (the zero Document for
// nil). Its Rules is never nil.
func (c *Compiled) Document() Document {
	if c == nil {
		return Document{Rules: []Rule{}}
	}
	return c.doc.Clone()
}

// Compile validates doc and compiles its conditions. Any problem is reported
// as a *ValidationError naming the rule and field.
func Compile(doc Document, version int) (*Compiled, error) {
	if doc.Default != "" && !doc.Default.Valid() {
		return nil, docError("default", "unknown effect %q (want allow, approve or deny)", doc.Default)
	}
	if len(doc.Rules) > MaxRules {
		return nil, docError("rules", "%d rules; at most %d are allowed", len(doc.Rules), MaxRules)
	}
	c := &Compiled{doc: doc.Clone(), version: version, rules: make([]compiledRule, len(doc.Rules))}
	seen := make(map[string]int, len(doc.Rules))
	for i, r := range c.doc.Rules {
		if first, dup := seen[r.ID]; dup && r.ID != "" {
			return nil, ruleError(i, r.ID, "id", "duplicate id %q (also rule %d)", r.ID, first)
		}
		seen[r.ID] = i
		cr, err := compileRule(i, r)
		if err != nil {
			return nil, err
		}
		for role, name := range roleNames {
			cr.reasons[role] = ruleReason(&cr, name, version)
		}
		c.rules[i] = cr
	}
	if doc.Default != "" {
		for role, name := range roleNames {
			c.defaultReasons[role] = fmt.Sprintf("no rule matched: %s policy v%d default %s", name, version, doc.Default)
		}
	}
	if err := validateSettings(doc.Settings); err != nil {
		return nil, err
	}
	budgets, err := compileBudgets(c.doc.Budgets)
	if err != nil {
		return nil, err
	}
	c.budgets = budgets
	return c, nil
}

func compileRule(i int, r Rule) (compiledRule, error) {
	cr := compiledRule{Rule: r}
	fail := func(field, format string, args ...any) (compiledRule, error) {
		return compiledRule{}, ruleError(i, r.ID, field, format, args...)
	}
	switch {
	case r.ID == "":
		return fail("id", "id is required")
	case !validID(r.ID):
		return fail("id", "id must be 1-%d characters from A-Z a-z 0-9 . _ -", maxIDLength)
	}

	m, err := newToolMatcher(r.Tool)
	if err != nil {
		return fail("tool", "%v", err)
	}
	cr.match = m

	switch {
	case r.Effect == "":
		return fail("effect", "effect is required (allow, approve or deny)")
	case !r.Effect.Valid():
		return fail("effect", "unknown effect %q (want allow, approve or deny)", r.Effect)
	}

	switch {
	case r.Approvals != 0 && r.Effect != Approve:
		return fail("approvals", "approvals is only allowed on approve rules")
	case r.Approvals < 0 || r.Approvals > MaxApprovals:
		return fail("approvals", "approvals must be between 1 and %d", MaxApprovals)
	case r.Effect == Approve:
		cr.approvals = max(r.Approvals, 1)
	}

	if r.Timeout != nil {
		if r.Effect != Approve {
			return fail("timeout", "timeout is only allowed on approve rules")
		}
		if msg := timeoutProblem(r.Timeout.Std()); msg != "" {
			return fail("timeout", "%s", msg)
		}
		cr.timeout = r.Timeout.Std()
	}

	if r.Risk != "" {
		rank, ok := ruleLevelRank(r.Risk)
		if !ok {
			return fail("risk", "unknown risk level %q (want low, medium, high or critical)", r.Risk)
		}
		cr.riskFloor = rank
	}

	if r.Target != nil {
		if err := r.Target.validate(); err != nil {
			return fail("target", "%v", err)
		}
		if r.Target.Tool != "" && !m.matches(r.Target.Tool) {
			return fail("target", "target tool %q does not match the rule's tool %q", r.Target.Tool, r.Tool)
		}
	}
	for j, t := range r.Except {
		if err := t.validate(); err != nil {
			return fail(fmt.Sprintf("except[%d]", j), "%v", err)
		}
	}

	if err := validateRoute(i, r); err != nil {
		return compiledRule{}, err
	}

	if r.When != "" {
		prg, err := compileCondition(r.When)
		if err != nil {
			return fail("when", "%v", err)
		}
		cr.prg = prg
	}
	return cr, nil
}

// timeoutProblem says what is wrong with a pending timeout, or "".
func timeoutProblem(d time.Duration) string {
	switch {
	case d <= 0:
		return fmt.Sprintf("timeout must be positive, got %s", Duration(d))
	case d > MaxTimeout:
		return fmt.Sprintf("timeout must be at most %s (7 days), got %s", Duration(MaxTimeout), Duration(d))
	}
	return ""
}

func validID(id string) bool {
	if len(id) == 0 || len(id) > maxIDLength {
		return false
	}
	for _, c := range []byte(id) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// toolPatternChars are the characters a rule's tool may hold: those of a
// canonical tool name (hitl.CanonicalToolName) and path.Match's glob syntax.
// A pattern in another case or with other characters could never match a
// canonical name, and would look as if it did.
const toolPatternChars = "abcdefghijklmnopqrstuvwxyz0123456789._-*?[]!^"

// toolMatcher matches tool names against a rule's tool field.
type toolMatcher struct {
	kind    matchKind
	pattern string
}

type matchKind uint8

const (
	matchExact matchKind = iota // no glob metacharacters: string equality
	matchAll                    // "*": every tool
	matchGlob                   // path.Match
)

func newToolMatcher(tool string) (toolMatcher, error) {
	switch {
	case tool == "":
		return toolMatcher{}, fmt.Errorf("tool is required (a tool name or a glob such as \"fs.*\")")
	case len(tool) > maxToolLength:
		return toolMatcher{}, fmt.Errorf("tool is %d bytes long; the limit is %d", len(tool), maxToolLength)
	}
	for _, c := range tool {
		switch {
		case c <= ' ' || c == 0x7f:
			return toolMatcher{}, fmt.Errorf("tool %q contains whitespace or control characters", tool)
		case 'A' <= c && c <= 'Z':
			return toolMatcher{}, fmt.Errorf("tool %q must be lower case: tool names are case-insensitive and matched in lower case (write %q)", tool, strings.ToLower(tool))
		case !strings.ContainsRune(toolPatternChars, c):
			return toolMatcher{}, fmt.Errorf("tool %q may hold only a-z 0-9 . _ - and the glob characters * ? [ ] ! ^ (tool names are [a-z0-9._-])", tool)
		}
	}
	if tool == "*" {
		return toolMatcher{kind: matchAll}, nil
	}
	if !strings.ContainsAny(tool, `*?[\`) {
		return toolMatcher{kind: matchExact, pattern: tool}, nil
	}
	if _, err := path.Match(tool, ""); err != nil {
		return toolMatcher{}, fmt.Errorf("invalid glob %q: %v", tool, err)
	}
	return toolMatcher{kind: matchGlob, pattern: tool}, nil
}

func (m toolMatcher) matches(tool string) bool {
	switch m.kind {
	case matchExact:
		return tool == m.pattern
	case matchAll:
		return true
	}
	ok, _ := path.Match(m.pattern, tool) // the pattern was validated
	return ok
}
