// Package policy decides what an agent's tool call may do: run at once
// (allow), wait for a human (approve) or never run (deny).
//
// Every decision involves two documents of the same shape (Document): the
// fleet policy, which applies to every agent, and the agent's own policy.
// Compile validates a Document and compiles its CEL conditions once; the
// resulting *Compiled is immutable and safe for concurrent use. A Set pairs
// the fleet policy with one agent's policy and makes decisions with
// Set.Decide.
//
// # Decision semantics
//
//  1. Every rule of the fleet policy, then every rule of the agent policy, is
//     considered in document order. A rule matches when its tool glob matches
//     the tool name, its risk floor (if set) is met by the action's risk level,
//     and its when condition (if set) evaluates to true. A when condition that
//     fails to evaluate (missing key, wrong type, cost limit) or returns a
//     non-bool value fails closed: the rule matches with effect deny and the
//     reason names the rule and the error.
//  2. The most restrictive matching effect wins (deny > approve > allow).
//     Among matches with that effect, the first in order (fleet before agent,
//     then document order) gives Decision.RuleID and Decision.Source. For
//     approve, every matching approve rule holds the action, not only the
//     first: Approvals is the maximum over them, Timeout the shortest of
//     their timeouts (a rule without one counts the effective
//     default_timeout), the reason names each, and Decision.Route lists
//     each one's notify, reviewers and escalate, all of which apply (an
//     approver must satisfy the reviewers of every rule that names some).
//  3. When nothing matches, the agent document's default applies if set,
//     else the fleet document's default, else deny ("deny by default").
//     Decision.Source is "default" and Decision.RuleID is empty.
//  4. Then the risk settings (Set.EffectiveSettings) apply. On a
//     prompt-injection hit, injection_action deny makes the effect deny,
//     approve makes it at least approve, allow leaves it unchanged. When
//     escalate_at is set and the risk level is at or above it, an allow
//     becomes approve. Risk never loosens an effect. When risk changes the
//     effect, Decision.Source is "risk", Decision.RuleID is empty and the
//     reason quotes what the rules had decided.
//  5. A nil Set.Fleet is an empty fleet policy (version 0, no rules, default
//     settings); a Set with neither policy denies everything by default.
//
// Risk levels are low < medium < high < critical. In an Input, an empty
// level counts as low (not classified) and an unknown level as critical, so
// a classifier bug restricts rather than loosens.
//
// # Conditions
//
// A rule's when is a CEL expression (cel.dev/cel-go) that must type-check to
// bool (or dyn, checked at evaluation). Its variables are:
//
//	args   map(string, dyn)  the tool call's JSON arguments
//	agent  map(string, dyn)  {"id": string, "name": string}
//	risk   map(string, dyn)  {"level": string, "score": int,
//	                          "reasons": list(string), "injection": bool}
//	tool   string            the tool name (useful with globs)
//
// JSON numbers arrive as double; numeric comparisons across int, uint and
// double are enabled, so args.amount > 100 holds for 150.0. Optional field
// selection (args.?amount.orValue(0) > 100) and the cel-go strings extension
// (lowerAscii, split, join, …) are available. Expressions are limited to
// MaxExpressionLength bytes; their estimated worst-case cost (assuming every
// argument string or collection has at most 128 elements) and their actual
// evaluation cost are both limited to MaxCost.
//
// # Documents
//
// Documents are exchanged as JSON or YAML (see ParseDocument). Durations are
// Go duration strings; they are written back in a compact form ("15m",
// "1h30m", "90s" becomes "1m30s").
package policy
