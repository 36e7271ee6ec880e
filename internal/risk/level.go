package risk

// Level is the severity of an assessed tool call: low, medium, high or
// critical, in that order.
type Level string

// The four risk levels, from least to most severe.
const (
	// Low is routine, side-effect-free work such as reads.
	Low Level = "low"
	// Medium is work with contained side effects, or unknown tools.
	Medium Level = "medium"
	// High is work that can do real damage: shell commands, payments,
	// deletions, secrets, or anything with a suspicious signal.
	High Level = "high"
	// Critical is work that is destructive or hostile on its face; it can
	// never be approved with a blanket "always" scope.
	Critical Level = "critical"
)

// Score thresholds: a score below mediumScore is low, below highScore is
// medium, below criticalScore is high, and anything else is critical.
const (
	mediumScore   = 25
	highScore     = 50
	criticalScore = 75
	maxScore      = 100
)

// ParseLevel returns the Level named by s. Only the exact lowercase names
// "low", "medium", "high" and "critical" are accepted.
func ParseLevel(s string) (Level, bool) {
	switch l := Level(s); l {
	case Low, Medium, High, Critical:
		return l, true
	}
	return "", false
}

// Rank orders levels: low=0, medium=1, high=2, critical=3; an unknown level
// is -1.
func (l Level) Rank() int {
	switch l {
	case Low:
		return 0
	case Medium:
		return 1
	case High:
		return 2
	case Critical:
		return 3
	}
	return -1
}

// Valid reports whether l is one of the four known levels.
func (l Level) Valid() bool { return l.Rank() >= 0 }

// AtLeast reports whether l is at least as severe as o. An unknown level
// ranks below Low, so an unknown l is at least nothing but another unknown
// level, and every level is at least an unknown o.
func (l Level) AtLeast(o Level) bool { return l.Rank() >= o.Rank() }

// LevelForScore maps a 0–100 score to its level: below 25 low, below 50
// medium, below 75 high, otherwise critical. Scores outside 0–100 are
// clamped first.
func LevelForScore(score int) Level {
	switch {
	case score < mediumScore:
		return Low
	case score < highScore:
		return Medium
	case score < criticalScore:
		return High
	}
	return Critical
}

// minScore is the lowest score that maps to l (0 for unknown levels).
func minScore(l Level) int {
	switch l {
	case Medium:
		return mediumScore
	case High:
		return highScore
	case Critical:
		return criticalScore
	}
	return 0
}
