package risk

import "strings"

// PathArg is one path found in a call's arguments.
type PathArg struct {
	// Path is the path as written (one token of a command).
	Path string
	// Where is the argument it came from, as args.a.b[2].
	Where string
	// Write is true when the call may write, delete or move it, as far as
	// the tool's category and the argument's key tell: write, delete, exec
	// and unknown tools write their paths, except the source of a copy.
	Write bool
	// Whole is true when the call deletes or moves the path with
	// everything under it (delete tools, moves and renames): a directory
	// holding a protected path counts as that path.
	Whole bool
}

// PathArgs calls fn with every path-valued argument of a call: values of
// path keys (path, file, src, dst, target, dir, cwd… at any depth), values
// that look like paths, and every token of commands (argv elements, command
// strings, "--flag=value" values). fn returns false to stop. It is pure,
// bounded like Classify, and never panics.
func PathArgs(tool string, args map[string]any, fn func(PathArg) bool) {
	defer func() { _ = recover() }()
	info := analyzeTool(tool)
	v := &pathVisitor{tool: info, fn: fn, move: isMoveTool(tool)}
	w := newWalker()
	w.walkArgs(v, args)
}

// isMoveTool reports tools whose source also changes (a move or rename).
func isMoveTool(tool string) bool {
	t := strings.ToLower(tool)
	for _, w := range []string{"move", "mv", "rename"} {
		if strings.Contains(t, w) {
			return true
		}
	}
	return false
}

// sourceKeys name what a copy only reads.
var sourceKeys = keySet("src", "source", "from", "sources", "srcs")

type pathVisitor struct {
	tool toolInfo
	move bool
	fn   func(PathArg) bool
}

func (p *pathVisitor) writes(key string) bool {
	switch p.tool.cat {
	case CategoryWrite:
		return p.move || !sourceKeys[key]
	case CategoryDelete, CategoryExec, CategoryUnknown:
		return true
	}
	return false
}

func (p *pathVisitor) emit(w *walker, s, key string) {
	whole := p.tool.cat == CategoryDelete || p.move && p.tool.cat == CategoryWrite
	if !p.fn(PathArg{Path: s, Where: w.pathString(), Write: p.writes(key), Whole: whole}) {
		w.stop = true
	}
}

func (p *pathVisitor) visitString(w *walker, s, key string, mapKey bool) {
	if mapKey {
		return
	}
	a := assessor{tool: p.tool}
	cmd := a.commandContext(key)
	spaced := strings.ContainsAny(s, " \t\n")
	fileURLPaths(s, key, cmd, spaced, func(path string) {
		if !w.stop {
			p.emit(w, path, key)
		}
	})
	if w.stop {
		return
	}
	if !cmd && !a.pathLike(s, key, spaced) {
		return
	}
	if !cmd && !spaced {
		p.emit(w, s, key)
		return
	}
	// A command (or a path field holding several words): every token.
	for _, tok := range strings.FieldsFunc(s, isCommandSep) {
		if w.stop {
			return
		}
		if strings.Contains(tok, "://") {
			continue
		}
		p.emit(w, tok, key)
		if i := strings.IndexByte(tok, '='); i >= 0 && i+1 < len(tok) {
			p.emit(w, tok[i+1:], key) // --file=.env, VAR=~/.ssh/id_rsa
		}
	}
}

// isCommandSep splits a command into the words a shell would see, near
// enough for finding paths: blanks, quotes and operators.
func isCommandSep(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '"', '\'', '`', ';', '|', '&', '<', '>', '(', ')', '{', '}', ',':
		return true
	}
	return false
}

func (p *pathVisitor) visitEntry(*walker, string, any, bool) {}
func (p *pathVisitor) visitList(*walker, list, string)       {}
