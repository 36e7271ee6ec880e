package sandbox

import "strings"

// Operand is one path an exec request's command names, as the command
// validators read it.
type Operand struct {
	// Path is the path, absolute: under SandboxWorkspace when the request
	// has no workspace (lexical), else as given or joined to the host
	// working directory.
	Path string
	// Write is true when the program may write, delete or move it (cp's
	// destination, mv's both ends, sed -i's files, rm, mkdir, touch…).
	Write bool
}

// Operands validates req like Validate and returns every path its command
// names, with whether it is written. With an empty workspace the paths are
// checked lexically, as at submit. When the validators refuse the command,
// the error comes with the paths checked before the refusal.
func Operands(req ExecRequest, pol Policy) ([]Operand, error) {
	var ops []Operand
	dest, isCopy := copyDestination(req.Argv)
	err := validate(req, pol, func(raw, p string, write bool) {
		if isCopy && write && raw != dest {
			write = false // a copy only reads its sources
		}
		ops = append(ops, Operand{Path: p, Write: write})
	})
	return ops, err
}

// copyDestination returns the operand cp writes, its last one; false
// (every operand counts as written) for anything else, and for a cp with
// a target-directory flag in any spelling (-t, -rtDIR, --target-directory).
func copyDestination(argv []string) (string, bool) {
	if len(argv) < 3 || argv[0] != "cp" {
		return "", false
	}
	for _, a := range argv[1:] {
		if a == "--" {
			return "", false // operands that look like flags: keep them all written
		}
		if strings.HasPrefix(a, "--target") || strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "t") {
			return "", false
		}
	}
	last := argv[len(argv)-1]
	if strings.HasPrefix(last, "-") {
		return "", false
	}
	return last, true
}
