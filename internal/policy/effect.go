package policy

// Effect is what a policy does with an action: allow it, hold it for human
// approval, or deny it.
type Effect string

// The three effects, from least to most restrictive.
const (
	Allow   Effect = "allow"
	Approve Effect = "approve"
	Deny    Effect = "deny"
)

// Valid reports whether e is one of Allow, Approve or Deny.
func (e Effect) Valid() bool {
	switch e {
	case Allow, Approve, Deny:
		return true
	}
	return false
}

// Rank orders effects by restrictiveness: allow 0 < approve 1 < deny 2.
// An invalid effect ranks as deny, so it can never loosen a decision.
func (e Effect) Rank() int {
	switch e {
	case Allow:
		return 0
	case Approve:
		return 1
	}
	return 2
}

// String returns the effect's name.
func (e Effect) String() string { return string(e) }
