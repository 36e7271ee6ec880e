package hitl

// ResultInjection is the "injection" object of an action's result: what
// the scan of the reported output and error found, and what the setting
// result_injection_action made of it.
type ResultInjection struct {
	// Action is policy.ResultFlag or policy.ResultRedact.
	Action string `json:"action"`
	// Findings describe the hits (risk.ScanInjection's descriptions),
	// without repeats, at most 16 (risk.ScanResult).
	Findings []string `json:"findings"`
}
