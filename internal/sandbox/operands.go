package sandbox

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
// checked lexically, as at submit.
func Operands(req ExecRequest, pol Policy) ([]Operand, error) {
	var ops []Operand
	err := validate(req, pol, func(p string, write bool) {
		ops = append(ops, Operand{Path: p, Write: write})
	})
	if err != nil {
		return nil, err
	}
	return ops, nil
}
