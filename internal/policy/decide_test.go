package policy

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	fleetVersion = 2
	agentVersion = 3
)

// setup compiles a fleet and an agent policy; an empty source means none.
func setup(t testing.TB, fleet, agent string) Set {
	t.Helper()
	var s Set
	if fleet != "" {
		s.Fleet = mustCompile(t, fleet, fleetVersion)
	}
	if agent != "" {
		s.Agent = mustCompile(t, agent, agentVersion)
	}
	return s
}

func pay(amount any) Input {
	return Input{Tool: "payments.send", Args: map[string]any{"amount": amount, "to": "acme"}, Agent: AgentInfo{ID: "bot-1", Name: "Bot"}}
}

func tool(name string) Input { return Input{Tool: name, Args: map[string]any{}} }

func withRisk(in Input, level string, injection bool) Input {
	in.Risk = RiskInfo{Level: level, Score: 50, Reasons: []string{"because"}, Injection: injection}
	return in
}

func TestDecide(t *testing.T) {
	t.Parallel()
	const (
		globs      = `{"rules":[{"id":"fs","tool":"fs.*","effect":"allow"},{"id":"q","tool":"net.ge?","effect":"approve"}]}`
		everything = `{"rules":[{"id":"all","tool":"*","effect":"approve","approvals":3}]}`
		allowReads = `{"rules":[{"id":"reads","tool":"fs.read","effect":"allow"}]}`
		riskFloor  = `{"rules":[{"id":"hi","tool":"*","effect":"deny","risk":"high"},{"id":"reads","tool":"fs.read","effect":"allow"}]}`
	)
	injectionFleet := func(action string) string {
		return `{"rules":[],"settings":{"injection_action":"` + action + `"}}`
	}
	tests := []struct {
		name      string
		fleet     string
		agent     string
		in        Input
		effect    Effect
		ruleID    string
		source    string
		approvals int
		timeout   time.Duration
		reason    []string // substrings
	}{
		// The DESIGN.md policy: every effect.
		{name: "allow by rule", agent: designPolicy, in: tool("fs.read"),
			effect: Allow, ruleID: "reads", source: "agent", reason: []string{`rule "reads" (agent policy v3): tool "fs.read"`}},
		{name: "spending cap: over the cap needs two approvals", agent: designPolicy, in: pay(150.0),
			effect: Approve, ruleID: "big-spend", source: "agent", approvals: 2, timeout: 15 * time.Minute,
			reason: []string{`rule "big-spend" (agent policy v3): args.amount > 100`}},
		{name: "spending cap: under the cap is allowed", agent: designPolicy, in: pay(50.0),
			effect: Allow, ruleID: "spend", source: "agent"},
		{name: "spending cap: at the cap is allowed", agent: designPolicy, in: pay(100.0), effect: Allow, ruleID: "spend", source: "agent"},
		{name: "spending cap: integer amount", agent: designPolicy, in: pay(101), effect: Approve, ruleID: "big-spend", source: "agent", approvals: 2, timeout: 15 * time.Minute},
		{name: "deny by rule glob", agent: designPolicy, in: tool("shell.exec"),
			effect: Deny, ruleID: "no-shell", source: "agent", reason: []string{`rule "no-shell" (agent policy v3): tool "shell.*"`}},
		{name: "document default deny", agent: designPolicy, in: tool("mail.send"),
			effect: Deny, source: "default", reason: []string{"no rule matched: agent policy v3 default deny"}},

		// Fail closed.
		{name: "missing key fails closed", agent: designPolicy, in: Input{Tool: "payments.send", Args: map[string]any{"to": "acme"}},
			effect: Deny, ruleID: "big-spend", source: "agent",
			reason: []string{`rule "big-spend" (agent policy v3): condition error: no such key: amount (fail closed)`}},
		{name: "nil args fail closed", agent: designPolicy, in: Input{Tool: "payments.send"},
			effect: Deny, ruleID: "big-spend", source: "agent", reason: []string{"no such key: amount"}},
		{name: "wrong type fails closed", agent: designPolicy, in: pay("lots"),
			effect: Deny, ruleID: "big-spend", source: "agent", reason: []string{`rule "big-spend"`, "condition error", "no such overload", "(fail closed)"}},
		{name: "non-bool result fails closed", agent: `{"rules":[{"id":"flag","tool":"x","effect":"allow","when":"args.flag"}]}`,
			in:     Input{Tool: "x", Args: map[string]any{"flag": "yes"}},
			effect: Deny, ruleID: "flag", source: "agent", reason: []string{`rule "flag"`, "condition returned string, not bool", "(fail closed)"}},
		{name: "bool dyn result works", agent: `{"rules":[{"id":"flag","tool":"x","effect":"allow","when":"args.flag"}]}`,
			in: Input{Tool: "x", Args: map[string]any{"flag": true}}, effect: Allow, ruleID: "flag", source: "agent"},
		{name: "false condition does not match", agent: `{"rules":[{"id":"flag","tool":"x","effect":"allow","when":"args.flag"}]}`,
			in: Input{Tool: "x", Args: map[string]any{"flag": false}}, effect: Deny, source: "default", reason: []string{"no rule matched: deny by default"}},

		// Globs.
		{name: "glob fs.* matches fs.read", agent: globs, in: tool("fs.read"), effect: Allow, ruleID: "fs", source: "agent"},
		{name: "glob fs.* matches fs.write.all", agent: globs, in: tool("fs.write.all"), effect: Allow, ruleID: "fs", source: "agent"},
		{name: "glob fs.* does not match fsx.read", agent: globs, in: tool("fsx.read"), effect: Deny, source: "default"},
		{name: "glob fs.* does not match fs", agent: globs, in: tool("fs"), effect: Deny, source: "default"},
		{name: "glob ? matches one character", agent: globs, in: tool("net.get"), effect: Approve, ruleID: "q", source: "agent", approvals: 1, timeout: 15 * time.Minute},
		{name: "glob ? needs exactly one character", agent: globs, in: tool("net.gets"), effect: Deny, source: "default"},
		{name: "glob * matches everything", agent: everything, in: tool("anything/at.all"), effect: Approve, ruleID: "all", source: "agent", approvals: 3, timeout: 15 * time.Minute},

		// Defaults.
		{name: "no policies: deny by default", in: tool("fs.read"), effect: Deny, source: "default", reason: []string{"no rule matched: deny by default"}},
		{name: "empty agent policy: deny by default", agent: `{}`, in: tool("fs.read"), effect: Deny, source: "default"},
		{name: "agent default allow", agent: `{"default":"allow","rules":[]}`, in: tool("fs.read"),
			effect: Allow, source: "default", reason: []string{"no rule matched: agent policy v3 default allow"}},
		{name: "fleet default approve", fleet: `{"default":"approve","rules":[]}`, agent: `{"rules":[]}`, in: tool("fs.read"),
			effect: Approve, source: "default", approvals: 1, timeout: 15 * time.Minute, reason: []string{"no rule matched: fleet policy v2 default approve"}},
		{name: "agent default beats fleet default", fleet: `{"default":"deny"}`, agent: `{"default":"allow"}`, in: tool("fs.read"),
			effect: Allow, source: "default"},
		{name: "fleet default timeout setting", fleet: `{"default":"approve","settings":{"default_timeout":"2m"}}`, in: tool("x"),
			effect: Approve, source: "default", approvals: 1, timeout: 2 * time.Minute},

		// Fleet and agent together.
		{name: "fleet deny beats agent allow", fleet: `{"rules":[{"id":"f-deny","tool":"fs.read","effect":"deny"}]}`, agent: designPolicy,
			in: tool("fs.read"), effect: Deny, ruleID: "f-deny", source: "fleet", reason: []string{`rule "f-deny" (fleet policy v2)`}},
		{name: "fleet approve beats agent allow", fleet: `{"rules":[{"id":"f-approve","tool":"fs.*","effect":"approve","timeout":"1h"}]}`, agent: designPolicy,
			in: tool("fs.read"), effect: Approve, ruleID: "f-approve", source: "fleet", approvals: 1, timeout: time.Hour},
		{name: "agent deny beats fleet allow", fleet: `{"rules":[{"id":"f-allow","tool":"*","effect":"allow"}]}`, agent: designPolicy,
			in: tool("shell.exec"), effect: Deny, ruleID: "no-shell", source: "agent"},
		{name: "equal effects: fleet rule named first", fleet: `{"rules":[{"id":"f-allow","tool":"*","effect":"allow"}]}`, agent: designPolicy,
			in: tool("fs.read"), effect: Allow, ruleID: "f-allow", source: "fleet"},
		{name: "agent approvals raise fleet approve", fleet: `{"rules":[{"id":"f-approve","tool":"payments.*","effect":"approve","timeout":"5m"}]}`, agent: designPolicy,
			in: pay(500.0), effect: Approve, ruleID: "f-approve", source: "fleet", approvals: 2, timeout: 5 * time.Minute},
		{name: "fleet condition over args", fleet: designFleet, agent: designPolicy,
			in: Input{Tool: "fs.read", Args: map[string]any{"path": "/etc/shadow"}}, effect: Deny, ruleID: "no-secrets", source: "fleet",
			reason: []string{`rule "no-secrets" (fleet policy v2): args.path.startsWith('/etc/')`}},

		// Most restrictive wins within one document.
		{name: "deny after allow wins", agent: `{"rules":[{"id":"a","tool":"x","effect":"allow"},{"id":"b","tool":"x","effect":"approve"},{"id":"c","tool":"x","effect":"deny"}]}`,
			in: tool("x"), effect: Deny, ruleID: "c", source: "agent"},
		{name: "approve after allow wins", agent: `{"rules":[{"id":"a","tool":"x","effect":"allow"},{"id":"b","tool":"*","effect":"approve"}]}`,
			in: tool("x"), effect: Approve, ruleID: "b", source: "agent", approvals: 1, timeout: 15 * time.Minute},
		{name: "first of equal approves names, max approvals, shortest timeout",
			agent: `{"rules":[{"id":"a","tool":"x","effect":"approve","approvals":2,"timeout":"9m"},{"id":"b","tool":"*","effect":"approve","approvals":4,"timeout":"3m"}]}`,
			in:    tool("x"), effect: Approve, ruleID: "a", source: "agent", approvals: 4, timeout: 3 * time.Minute},
		{name: "first deny names the decision", agent: `{"rules":[{"id":"d1","tool":"x","effect":"deny"},{"id":"d2","tool":"x","effect":"deny"}]}`,
			in: tool("x"), effect: Deny, ruleID: "d1", source: "agent"},
		{name: "approve rule with false condition is ignored",
			agent: `{"rules":[{"id":"a","tool":"x","effect":"approve","approvals":5,"when":"false"},{"id":"b","tool":"x","effect":"approve"}]}`,
			in:    tool("x"), effect: Approve, ruleID: "b", source: "agent", approvals: 1, timeout: 15 * time.Minute},

		// Risk floor on a rule.
		{name: "risk floor not met", agent: riskFloor, in: withRisk(tool("fs.read"), "medium", false), effect: Allow, ruleID: "reads", source: "agent"},
		{name: "risk floor met exactly", fleet: `{"settings":{"escalate_at":"none"}}`, agent: riskFloor, in: withRisk(tool("fs.read"), "high", false),
			effect: Deny, ruleID: "hi", source: "agent", reason: []string{`rule "hi" (agent policy v3): risk at least high`}},
		{name: "risk floor exceeded", agent: riskFloor, in: withRisk(tool("fs.read"), "critical", false), effect: Deny, ruleID: "hi", source: "agent"},
		{name: "unclassified risk counts as low", agent: riskFloor, in: tool("fs.read"), effect: Allow, ruleID: "reads", source: "agent"},
		{name: "unknown risk level counts as critical", agent: riskFloor, in: withRisk(tool("fs.read"), "severe", false), effect: Deny, ruleID: "hi", source: "agent"},

		// Conditions over agent and risk.
		{name: "when over agent.id and risk.level matches", fleet: `{"settings":{"escalate_at":"none"}}`,
			agent: `{"rules":[{"id":"bot-high","tool":"*","effect":"deny","when":"agent.id == 'bot-1' && risk.level == 'high' && risk.score >= 50 && 'because' in risk.reasons"},
			                  {"id":"rest","tool":"*","effect":"allow"}]}`,
			in: withRisk(pay(1.0), "high", false), effect: Deny, ruleID: "bot-high", source: "agent"},
		{name: "when over agent.id: other agent", fleet: `{"settings":{"escalate_at":"none"}}`,
			agent: `{"rules":[{"id":"bot-high","tool":"*","effect":"deny","when":"agent.id == 'bot-1' && risk.level == 'high'"},{"id":"rest","tool":"*","effect":"allow"}]}`,
			in:    func() Input { in := withRisk(pay(1.0), "high", false); in.Agent.ID = "bot-2"; return in }(), effect: Allow, ruleID: "rest", source: "agent"},
		{name: "when over risk.injection", fleet: injectionFleet("allow"),
			agent: `{"rules":[{"id":"inj","tool":"*","effect":"deny","when":"risk.injection"},{"id":"rest","tool":"*","effect":"allow"}]}`,
			in:    withRisk(tool("x"), "low", true), effect: Deny, ruleID: "inj", source: "agent"},

		// Prompt injection.
		{name: "injection: default action approves", agent: allowReads, in: withRisk(tool("fs.read"), "low", true),
			effect: Approve, source: "risk", approvals: 1, timeout: 15 * time.Minute,
			reason: []string{"prompt injection detected: default injection_action=approve", `rule "reads"`}},
		{name: "injection: deny", fleet: injectionFleet("deny"), agent: allowReads, in: withRisk(tool("fs.read"), "low", true),
			effect: Deny, source: "risk", reason: []string{"prompt injection detected: fleet injection_action=deny"}},
		{name: "injection: approve", fleet: injectionFleet("approve"), agent: allowReads, in: withRisk(tool("fs.read"), "low", true),
			effect: Approve, source: "risk", approvals: 1, timeout: 15 * time.Minute, reason: []string{"prompt injection detected: fleet injection_action=approve"}},
		{name: "injection: allow leaves the effect", fleet: injectionFleet("allow"), agent: allowReads, in: withRisk(tool("fs.read"), "low", true),
			effect: Allow, ruleID: "reads", source: "agent", reason: []string{`rule "reads"`, "prompt injection detected: fleet injection_action=allow"}},
		{name: "injection: approve keeps a stricter approve", fleet: injectionFleet("approve"), agent: designPolicy, in: withRisk(pay(500.0), "low", true),
			effect: Approve, ruleID: "big-spend", source: "agent", approvals: 2, timeout: 15 * time.Minute},
		{name: "injection: approve never loosens deny", fleet: injectionFleet("approve"), agent: designPolicy, in: withRisk(tool("shell.x"), "low", true),
			effect: Deny, ruleID: "no-shell", source: "agent"},
		{name: "injection: allow never loosens deny", fleet: injectionFleet("allow"), agent: designPolicy, in: withRisk(tool("shell.x"), "low", true),
			effect: Deny, ruleID: "no-shell", source: "agent"},
		{name: "injection: agent overrides fleet action", fleet: injectionFleet("allow"),
			agent: `{"rules":[{"id":"reads","tool":"fs.read","effect":"allow"}],"settings":{"injection_action":"deny"}}`,
			in:    withRisk(tool("fs.read"), "low", true), effect: Deny, source: "risk", reason: []string{"agent injection_action=deny"}},
		{name: "injection: no hit, no change", fleet: injectionFleet("deny"), agent: allowReads, in: withRisk(tool("fs.read"), "low", false),
			effect: Allow, ruleID: "reads", source: "agent"},

		// Risk escalation.
		{name: "escalation: below escalate_at", agent: allowReads, in: withRisk(tool("fs.read"), "medium", false), effect: Allow, ruleID: "reads", source: "agent"},
		{name: "escalation: at escalate_at", agent: allowReads, in: withRisk(tool("fs.read"), "high", false),
			effect: Approve, source: "risk", approvals: 1, timeout: 15 * time.Minute,
			reason: []string{"risk high >= escalate_at high: allow escalated to approve", `rule "reads" (agent policy v3)`}},
		{name: "escalation: above escalate_at", agent: allowReads, in: withRisk(tool("fs.read"), "critical", false),
			effect: Approve, source: "risk", approvals: 1, timeout: 15 * time.Minute, reason: []string{"risk critical >= escalate_at high"}},
		{name: "escalation: fleet escalate_at critical", fleet: `{"settings":{"escalate_at":"critical","default_timeout":"1m"}}`, agent: allowReads,
			in: withRisk(tool("fs.read"), "high", false), effect: Allow, ruleID: "reads", source: "agent"},
		{name: "escalation: fleet escalate_at medium", fleet: `{"settings":{"escalate_at":"medium","default_timeout":"1m"}}`, agent: allowReads,
			in: withRisk(tool("fs.read"), "medium", false), effect: Approve, source: "risk", approvals: 1, timeout: time.Minute},
		{name: "escalation: agent turns it off", agent: `{"rules":[{"id":"reads","tool":"fs.read","effect":"allow"}],"settings":{"escalate_at":"none"}}`,
			in: withRisk(tool("fs.read"), "critical", false), effect: Allow, ruleID: "reads", source: "agent"},
		{name: "escalation: empty escalate_at means never", fleet: `{"settings":{"escalate_at":""}}`, agent: allowReads,
			in: withRisk(tool("fs.read"), "critical", false), effect: Allow, ruleID: "reads", source: "agent"},
		{name: "escalation: never loosens deny", agent: designPolicy, in: withRisk(tool("shell.x"), "critical", false),
			effect: Deny, ruleID: "no-shell", source: "agent"},
		{name: "escalation: keeps approve and its approvals", agent: designPolicy, in: withRisk(pay(500.0), "critical", false),
			effect: Approve, ruleID: "big-spend", source: "agent", approvals: 2, timeout: 15 * time.Minute},
		{name: "escalation: applies to a default allow", agent: `{"default":"allow"}`, in: withRisk(tool("x"), "high", false),
			effect: Approve, source: "risk", approvals: 1, timeout: 15 * time.Minute, reason: []string{"no rule matched: agent policy v3 default allow"}},
		{name: "escalation and injection together", fleet: injectionFleet("allow"), agent: allowReads, in: withRisk(tool("fs.read"), "high", true),
			effect: Approve, source: "risk", approvals: 1, timeout: 15 * time.Minute, reason: []string{"escalated", "prompt injection detected"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, tt.fleet, tt.agent)
			got := s.Decide(tt.in)
			require.Equal(t, tt.effect, got.Effect, "effect; reason: %s", got.Reason)
			require.Equal(t, tt.ruleID, got.RuleID, "rule id; reason: %s", got.Reason)
			require.Equal(t, tt.source, got.Source, "source; reason: %s", got.Reason)
			require.Equal(t, tt.approvals, got.Approvals, "approvals")
			require.Equal(t, tt.timeout, got.Timeout, "timeout")
			for _, want := range tt.reason {
				require.Contains(t, got.Reason, want)
			}
			wantAgent, wantFleet := 0, 0
			if tt.agent != "" {
				wantAgent = agentVersion
			}
			if tt.fleet != "" {
				wantFleet = fleetVersion
			}
			require.Equal(t, wantAgent, got.PolicyVersion, "policy version")
			require.Equal(t, wantFleet, got.FleetVersion, "fleet version")
		})
	}
}

func TestDecideExactDecision(t *testing.T) {
	t.Parallel()
	s := setup(t, designFleet, designPolicy)
	got := s.Decide(pay(150.0))
	require.Equal(t, Decision{
		Effect:        Approve,
		RuleID:        "big-spend",
		Source:        "agent",
		PolicyVersion: 3,
		FleetVersion:  2,
		Approvals:     2,
		Timeout:       15 * time.Minute,
		Reason:        `rule "big-spend" (agent policy v3): args.amount > 100`,
		Route:         Route{Rules: []RuleRoute{{Source: "agent", RuleID: "big-spend"}}},
	}, got)

	b, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, `{"effect":"approve","rule_id":"big-spend","source":"agent","policy_version":3,"fleet_version":2,
		"approvals":2,"timeout":"15m","reason":"rule \"big-spend\" (agent policy v3): args.amount \u003e 100"}`, string(b))
	var back Decision
	require.NoError(t, json.Unmarshal(b, &back))
	got.Route = Route{} // never encoded
	require.Equal(t, got, back)

	denied := s.Decide(tool("nope"))
	b, err = json.Marshal(denied)
	require.NoError(t, err)
	require.JSONEq(t, `{"effect":"deny","source":"default","policy_version":3,"fleet_version":2,
		"reason":"no rule matched: agent policy v3 default deny"}`, string(b))
}

func TestDecideDoesNotEvaluateAfterDeny(t *testing.T) {
	t.Parallel()
	// The second rule would fail closed, but the first deny already decided.
	s := setup(t, "", `{"rules":[{"id":"d","tool":"x","effect":"deny"},{"id":"e","tool":"x","effect":"allow","when":"args.missing"}]}`)
	got := s.Decide(tool("x"))
	require.Equal(t, "d", got.RuleID)
	require.NotContains(t, got.Reason, "condition error")
}

func TestDecideConcurrent(t *testing.T) {
	t.Parallel()
	s := setup(t, designFleet, designPolicy)
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 200 {
				amount := float64((g*200 + i) % 300)
				got := s.Decide(pay(amount))
				want, wantRule := Allow, "spend"
				if amount > 100 {
					want, wantRule = Approve, "big-spend"
				}
				if got.Effect != want || got.RuleID != wantRule {
					t.Errorf("amount %v: got %s by %q, want %s by %q", amount, got.Effect, got.RuleID, want, wantRule)
					return
				}
				if r := s.Decide(tool(fmt.Sprintf("shell.%d", i))); r.Effect != Deny {
					t.Errorf("shell: got %s", r.Effect)
					return
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkDecide(b *testing.B) {
	s := setup(b, designFleet, designPolicy)
	in := pay(150.0)
	in.Risk = RiskInfo{Level: "medium", Score: 40, Reasons: []string{"payment"}}
	b.ReportAllocs()
	for b.Loop() {
		d := s.Decide(in)
		if d.Effect != Approve {
			b.Fatalf("got %s", d.Effect)
		}
	}
}

func BenchmarkDecideAllow(b *testing.B) {
	s := setup(b, designFleet, designPolicy)
	in := tool("fs.read")
	in.Args = map[string]any{"path": "/home/u/notes.txt"}
	b.ReportAllocs()
	for b.Loop() {
		if d := s.Decide(in); d.Effect != Deny && d.Effect != Allow {
			b.Fatalf("got %s", d.Effect)
		}
	}
}

func BenchmarkCompile(b *testing.B) {
	doc, err := ParseDocument([]byte(designPolicy))
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(doc, 1); err != nil {
			b.Fatal(err)
		}
	}
}
