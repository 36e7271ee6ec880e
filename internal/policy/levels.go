package policy

// Risk levels as produced by the risk classifier, from lowest to highest.
const (
	RiskLow      = "low"
	RiskMedium   = "medium"
	RiskHigh     = "high"
	RiskCritical = "critical"
)

// riskLevels lists the levels in rank order.
var riskLevels = [...]string{RiskLow, RiskMedium, RiskHigh, RiskCritical}

// ValidRiskLevel reports whether level is low, medium, high or critical.
func ValidRiskLevel(level string) bool {
	_, ok := ruleLevelRank(level)
	return ok
}

// ruleLevelRank ranks a level written in a policy document.
func ruleLevelRank(level string) (int, bool) {
	for i, l := range riskLevels {
		if l == level {
			return i, true
		}
	}
	return 0, false
}

// inputLevelRank ranks the level of an action being decided: empty (not
// classified) counts as low, anything unknown as critical (fail closed).
func inputLevelRank(level string) int {
	if level == "" {
		return 0
	}
	if r, ok := ruleLevelRank(level); ok {
		return r
	}
	return len(riskLevels) - 1
}

// levelName is how an input level appears in reasons.
func levelName(level string) string {
	if level == "" {
		return RiskLow
	}
	return level
}
