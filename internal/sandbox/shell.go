package sandbox

import (
	"path/filepath"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// maxScriptCommands bounds the simple commands of one script.
const maxScriptCommands = 256

// maxGlobMatches bounds what one glob may match when it is checked.
const maxGlobMatches = 10000

// shellChecker walks a parsed "sh -c" script.
type shellChecker struct {
	c        *Checker
	sh       *Checker // the same checker, naming "sh" in refusals
	pol      *Policy
	commands int
}

// checkScript parses script as POSIX sh (what /bin/sh is) and checks every
// simple command with the same validators as a plain argv, every
// redirection against the workspace, and refuses everything whose meaning
// is only known when it runs: parameter, command, arithmetic and process
// substitution, functions, control flow, background jobs, assignments,
// tilde expansion and globs that could turn into flags.
func checkScript(c *Checker, pol *Policy, script string) error {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(script), "")
	if err != nil {
		return refuse("sh: the script does not parse: %s", quote(err.Error()))
	}
	s := &shellChecker{c: c, sh: c.forCommand("sh"), pol: pol}
	if err := s.stmts(f.Stmts); err != nil {
		return err
	}
	if s.commands == 0 {
		return refuse("sh: empty script")
	}
	return nil
}

func (s *shellChecker) stmts(list []*syntax.Stmt) error {
	for _, st := range list {
		if err := s.stmt(st); err != nil {
			return err
		}
	}
	return nil
}

func (s *shellChecker) stmt(st *syntax.Stmt) error {
	if st.Background || st.Disown {
		return refuse("sh: background jobs (&) are not allowed")
	}
	if st.Coprocess {
		return refuse("sh: coprocesses are not allowed")
	}
	for _, r := range st.Redirs {
		if err := s.redirect(r); err != nil {
			return err
		}
	}
	switch cmd := st.Cmd.(type) {
	case nil:
		return nil
	case *syntax.CallExpr:
		return s.call(cmd)
	case *syntax.BinaryCmd:
		switch cmd.Op {
		case syntax.AndStmt, syntax.OrStmt, syntax.Pipe:
		default:
			return refuse("sh: the operator %s is not allowed", cmd.Op)
		}
		if err := s.stmt(cmd.X); err != nil {
			return err
		}
		return s.stmt(cmd.Y)
	case *syntax.Subshell:
		return s.stmts(cmd.Stmts)
	case *syntax.Block:
		return s.stmts(cmd.Stmts)
	case *syntax.FuncDecl:
		return refuse("sh: functions are not allowed")
	case *syntax.IfClause, *syntax.WhileClause, *syntax.ForClause, *syntax.CaseClause:
		return refuse("sh: control flow (if, while, until, for, case) is not allowed")
	case *syntax.DeclClause:
		return refuse("sh: %s is not allowed", cmd.Variant.Value)
	default:
		return refuse("sh: this construct is not allowed")
	}
}

// call checks one simple command.
func (s *shellChecker) call(ce *syntax.CallExpr) error {
	s.commands++
	if s.commands > maxScriptCommands {
		return refuse("sh: too many commands (at most %d)", maxScriptCommands)
	}
	if len(ce.Args) == 0 {
		return refuse("sh: variable assignments are not allowed")
	}
	for _, a := range ce.Assigns {
		if a.Name == nil || a.Naked || a.Append || a.Index != nil || a.Array != nil {
			return refuse("sh: this assignment is not allowed")
		}
		value := ""
		if a.Value != nil {
			v, glob, err := s.word(a.Value)
			if err != nil {
				return err
			}
			if glob {
				return refuse("sh: glob patterns in assignments are not allowed")
			}
			value = v
		}
		if reason := envRefusal(a.Name.Value, value, s.pol.Env); reason != "" {
			return refuse("sh: assignment: %s", reason)
		}
	}
	argv := make([]string, 0, len(ce.Args))
	for i, w := range ce.Args {
		lit, glob, err := s.word(w)
		if err != nil {
			return err
		}
		if glob {
			if i == 0 {
				return refuse("sh: a command name must not be a glob pattern")
			}
			if err := s.checkGlob(lit); err != nil {
				return err
			}
		}
		argv = append(argv, lit)
	}
	return checkCommand(s.c, s.pol, argv)
}

// word returns the value of a word after quote removal and whether it
// holds an unquoted glob character. Only literal words pass.
func (s *shellChecker) word(w *syntax.Word) (string, bool, error) {
	var b strings.Builder
	glob := false
	for i, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			v := p.Value
			if i == 0 && strings.HasPrefix(v, "~") {
				return "", false, refuse("sh: tilde expansion is not allowed")
			}
			for j := 0; j < len(v); j++ {
				ch := v[j]
				if ch == '\\' && j+1 < len(v) {
					j++
					if v[j] != '\n' {
						b.WriteByte(v[j])
					}
					continue
				}
				if ch == '*' || ch == '?' || ch == '[' {
					glob = true
				}
				b.WriteByte(ch)
			}
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false, refuse("sh: $'...' quoting is not allowed")
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", false, refuse("sh: $\"...\" quoting is not allowed")
			}
			for _, inner := range p.Parts {
				lit, ok := inner.(*syntax.Lit)
				if !ok {
					return "", false, expansionRefusal(inner)
				}
				v := lit.Value
				for j := 0; j < len(v); j++ {
					ch := v[j]
					if ch == '\\' && j+1 < len(v) && strings.IndexByte("$`\"\\\n", v[j+1]) >= 0 {
						j++
						if v[j] != '\n' {
							b.WriteByte(v[j])
						}
						continue
					}
					b.WriteByte(ch)
				}
			}
		default:
			return "", false, expansionRefusal(part)
		}
	}
	return b.String(), glob, nil
}

// expansionRefusal names the expansion a word part would perform.
func expansionRefusal(part syntax.WordPart) error {
	switch part.(type) {
	case *syntax.ParamExp:
		return refuse("sh: parameter expansion ($VAR) is not allowed")
	case *syntax.CmdSubst:
		return refuse("sh: command substitution is not allowed")
	case *syntax.ArithmExp:
		return refuse("sh: arithmetic expansion is not allowed")
	case *syntax.ProcSubst:
		return refuse("sh: process substitution is not allowed")
	case *syntax.ExtGlob:
		return refuse("sh: extended globs are not allowed")
	case *syntax.BraceExp:
		return refuse("sh: brace expansion is not allowed")
	}
	return refuse("sh: this word is not allowed")
}

// checkGlob refuses globs that could expand to a flag (a leading wildcard:
// a file named "--pre=..." would become an option; an unquoted pattern in
// a flag's value), to hidden entries or "..", and checks what the pattern
// matches now.
func (s *shellChecker) checkGlob(pattern string) error {
	if strings.ContainsAny(pattern[:1], "*?[") {
		return refuse("sh: a glob must not start with a wildcard (a file name could become a flag); write ./%s", quote(pattern))
	}
	for _, comp := range strings.Split(pattern, "/") {
		if comp == ".." {
			return refuse("sh: .. in a glob pattern is not allowed")
		}
		if strings.HasPrefix(comp, ".") && strings.ContainsAny(comp, "*?[") {
			return refuse("sh: glob patterns matching hidden entries are not allowed: %s", quote(pattern))
		}
	}
	if strings.HasPrefix(pattern, "-") {
		// The shell would match it against file names beginning with
		// the flag (a file named "--file=x" turns --file=* into that).
		return refuse("sh: quote the glob pattern in %s", quote(pattern))
	}
	if s.c.lexical {
		return nil // without the workspace, the worker checks the matches
	}
	var base, rel string
	switch {
	case strings.HasPrefix(pattern, SandboxWorkspace+"/"):
		base, rel = s.c.root, strings.TrimPrefix(pattern, SandboxWorkspace+"/")
	case strings.HasPrefix(pattern, "/"):
		return s.sh.Path(pattern)
	default:
		base, rel = s.c.cwd, pattern
	}
	matches, err := filepath.Glob(escapeGlob(base) + "/" + rel)
	if err != nil {
		return nil // the shell keeps a malformed pattern as a literal word
	}
	if len(matches) > maxGlobMatches {
		return refuse("sh: the glob %s matches too many entries", quote(pattern))
	}
	for _, m := range matches {
		if err := s.sh.Path(s.c.hostToArg(m)); err != nil {
			return err
		}
	}
	return nil
}

// escapeGlob quotes glob metacharacters in a literal path.
func escapeGlob(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if strings.IndexByte(`*?[\`, p[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// redirect checks one redirection: files inside the workspace (written
// ones not under .git), fd duplication, literal here-documents.
func (s *shellChecker) redirect(r *syntax.Redirect) error {
	if r.N != nil && (len(r.N.Value) != 1 || !isDigits(r.N.Value)) {
		return refuse("sh: this redirection is not allowed")
	}
	target := ""
	if r.Word != nil {
		v, glob, err := s.word(r.Word)
		if err != nil {
			return err
		}
		if glob {
			return refuse("sh: glob patterns in redirections are not allowed")
		}
		target = v
	}
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrClob:
		if target == "" {
			return refuse("sh: redirection needs a file")
		}
		return s.sh.WritePath(target)
	case syntax.RdrIn:
		if target == "" {
			return refuse("sh: redirection needs a file")
		}
		return s.sh.Path(target)
	case syntax.DplIn, syntax.DplOut:
		if target != "-" && !isDigits(target) {
			return refuse("sh: only file descriptor numbers may follow >& and <&")
		}
		return nil
	case syntax.Hdoc, syntax.DashHdoc:
		if r.Hdoc != nil {
			for _, part := range r.Hdoc.Parts {
				if _, ok := part.(*syntax.Lit); !ok {
					return expansionRefusal(part)
				}
			}
		}
		return nil
	}
	return refuse("sh: the redirection %s is not allowed", r.Op)
}
