package risk

import "strings"

// Injection grades: what a score from GradeInjection reads as.
const (
	GradeLow    = "low"
	GradeMedium = "medium"
	GradeHigh   = "high"
)

// Weights of GradeInjection.
const (
	// injWeightStrong is a hit on a phrase that only an injection uses
	// ("ignore previous instructions", a fake role marker, a jailbreak).
	injWeightStrong = 45
	// injWeightWeak is any other hit ("note to the assistant", "send the
	// file to …").
	injWeightWeak = 30
	// injWeightLayer is added per layer of encoding or obfuscation the
	// hit was found under: hiding a phrase is a sign of intent.
	injWeightLayer = 10
)

// strongInjection are the words whose presence in a hit's quoted text makes
// it a strong one.
var strongInjection = []string{"ignore", "disregard", "forget", "jailbreak", "jail break", "system prompt",
	"developer mode", "do anything now", "dan mode", "exfiltrat", "override", "<|", "[inst", "system:",
	"### system", "new instructions", "real instructions"}

// GradeInjection grades the findings of a prompt-injection scan
// (ScanInjection's or ScanResult's descriptions) as a score from 0 (no
// finding) to 100, and its grade: low below 40, medium below 70, high from
// 70. Each finding adds its weight: 45 for a phrase only an injection uses,
// 30 for any other, plus 10 for each layer of encoding it was found under
// ("(base64-encoded)", "(rot13)", …). A scanner error scores 100.
func GradeInjection(findings []string) (score int, grade string) {
	for _, f := range findings {
		if strings.HasPrefix(f, "scanner error") {
			return 100, GradeHigh
		}
		score += findingWeight(f)
	}
	score = min(score, 100)
	return score, InjectionGrade(score)
}

// InjectionGrade is the grade of a score from GradeInjection.
func InjectionGrade(score int) string {
	switch {
	case score >= 70:
		return GradeHigh
	case score >= 40:
		return GradeMedium
	}
	return GradeLow
}

// findingWeight weighs one finding: `"quoted text"` then notes.
func findingWeight(f string) int {
	quoted, notes := f, ""
	if i := strings.LastIndex(f, `"`); i > 0 {
		quoted, notes = f[:i], f[i+1:]
	}
	w := injWeightWeak
	q := strings.ToLower(quoted)
	for _, s := range strongInjection {
		if strings.Contains(q, s) {
			w = injWeightStrong
			break
		}
	}
	return w + injWeightLayer*strings.Count(notes, " (")
}
