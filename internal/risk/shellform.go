package risk

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// The shell form of a command line is what the shell would run once quotes,
// backslashes and word splitting have done their work: `r\m -rf /`,
// `'r'm -rf /` and `rm${IFS}-rf${IFS}/` all read "rm -rf /". The command
// rules match it next to the text as written.

// Bounds on shell parsing per Classify call.
const (
	// maxShellParses is how many command lines are run through the shell
	// parser; the rest get the cheap unescaping only.
	maxShellParses = 64
	// maxShellLine is the longest text given to the shell parser.
	maxShellLine = 8 << 10
)

// shellParser parses command lines within the budget of one call.
type shellParser struct{ parses int }

// shellForm returns text as the shell would read it, and false when text
// has nothing (quotes, backslashes, expansions) that could hide a word.
func (p *shellParser) shellForm(text string) (string, bool) {
	if !hidesWords(text) {
		return "", false
	}
	if len(text) > maxShellLine || p.parses >= maxShellParses {
		return unescapeShell(text), true
	}
	p.parses++
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(text), "")
	if err != nil {
		return unescapeShell(text), true
	}
	var b strings.Builder
	printStmts(&b, f.Stmts, 0)
	return b.String(), true
}

// hidesWords reports whether text has shell syntax that can hide a word
// from the command rules: a backslash, ${...}, $'...', $IFS,
// or quotes inside a word ('r'm, r""m). Quoting whole arguments
// (-m 'release 1.4') hides nothing and needs no parse.
func hidesWords(text string) bool {
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '\\':
			return true
		case '$':
			if i+1 < len(text) && (text[i+1] == '{' || text[i+1] == '\'' || strings.HasPrefix(text[i+1:], "ifs")) {
				return true
			}
		case '\'', '"':
			if i > 0 && i+1 < len(text) && isWordByte(text[i-1]) && (isWordByte(text[i+1]) || text[i+1] == text[i]) ||
				i+1 < len(text) && text[i+1] == text[i] && (i+2 >= len(text) || isWordByte(text[i+2])) {
				return true
			}
		}
	}
	return false
}

// unescapeShell is the shell form without a parse, for text the parser
// refuses or that is over budget: backslashes and empty or single-letter
// quotes dropped, $IFS read as a space.
func unescapeShell(s string) string {
	s = ifsReplacer.Replace(s)
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			if i+1 < len(s) && s[i+1] == '\\' {
				b.WriteByte('\\')
				i++
			}
		case '\'', '"':
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// ifsReplacer reads the shell's field separator as the space it expands to.
var ifsReplacer = strings.NewReplacer("${ifs}", " ", "$ifs", " ", "${IFS}", " ", "$IFS", " ")

// maxShellDepth bounds nesting in the printed shell form.
const maxShellDepth = 8

func printStmts(b *strings.Builder, stmts []*syntax.Stmt, depth int) {
	for i, st := range stmts {
		if i > 0 {
			b.WriteString("; ")
		}
		printStmt(b, st, depth)
	}
}

func printStmt(b *strings.Builder, st *syntax.Stmt, depth int) {
	if st == nil || depth > maxShellDepth {
		return
	}
	printCmd(b, st.Cmd, depth)
	for _, r := range st.Redirs {
		b.WriteByte(' ')
		if r.N != nil {
			b.WriteString(r.N.Value)
		}
		b.WriteString(r.Op.String())
		if r.Word != nil {
			printWord(b, r.Word, depth)
		}
	}
	if st.Background {
		b.WriteString(" &")
	}
}

func printCmd(b *strings.Builder, cmd syntax.Command, depth int) {
	switch c := cmd.(type) {
	case *syntax.CallExpr:
		for i, a := range c.Assigns {
			if i > 0 {
				b.WriteByte(' ')
			}
			if a.Name != nil {
				b.WriteString(a.Name.Value)
				b.WriteByte('=')
			}
			if a.Value != nil {
				printWord(b, a.Value, depth)
			}
		}
		for i, w := range c.Args {
			if i > 0 || len(c.Assigns) > 0 {
				b.WriteByte(' ')
			}
			printWord(b, w, depth)
		}
	case *syntax.BinaryCmd:
		printStmt(b, c.X, depth+1)
		b.WriteString(" " + c.Op.String() + " ")
		printStmt(b, c.Y, depth+1)
	case *syntax.Subshell:
		b.WriteString("(")
		printStmts(b, c.Stmts, depth+1)
		b.WriteString(")")
	case *syntax.Block:
		b.WriteString("{ ")
		printStmts(b, c.Stmts, depth+1)
		b.WriteString("; }")
	case *syntax.IfClause:
		for ic := c; ic != nil; ic = ic.Else {
			printStmts(b, ic.Cond, depth+1)
			b.WriteString("; ")
			printStmts(b, ic.Then, depth+1)
			b.WriteString("; ")
		}
	case *syntax.WhileClause:
		printStmts(b, c.Cond, depth+1)
		b.WriteString("; ")
		printStmts(b, c.Do, depth+1)
	case *syntax.ForClause:
		printStmts(b, c.Do, depth+1)
	case *syntax.FuncDecl:
		if c.Name != nil {
			b.WriteString(c.Name.Value)
		}
		b.WriteString("() { ")
		printStmt(b, c.Body, depth+1)
		b.WriteString("; }")
	case *syntax.TimeClause:
		printStmt(b, c.Stmt, depth+1)
	case *syntax.DeclClause:
		b.WriteString(c.Variant.Value)
		for _, a := range c.Args {
			b.WriteByte(' ')
			if a.Name != nil {
				b.WriteString(a.Name.Value)
				b.WriteByte('=')
			}
			if a.Value != nil {
				printWord(b, a.Value, depth)
			}
		}
	}
}

func printWord(b *strings.Builder, w *syntax.Word, depth int) {
	for _, part := range w.Parts {
		printPart(b, part, depth)
	}
}

func printPart(b *strings.Builder, part syntax.WordPart, depth int) {
	switch p := part.(type) {
	case *syntax.Lit:
		v := p.Value
		for j := 0; j < len(v); j++ {
			if v[j] == '\\' && j+1 < len(v) {
				j++
				if v[j] != '\n' {
					b.WriteByte(v[j])
				}
				continue
			}
			b.WriteByte(v[j])
		}
	case *syntax.SglQuoted:
		if p.Dollar {
			b.WriteString(ansiCUnquote(p.Value))
		} else {
			b.WriteString(p.Value)
		}
	case *syntax.DblQuoted:
		for _, inner := range p.Parts {
			if lit, ok := inner.(*syntax.Lit); ok {
				b.WriteString(dblQuoteUnescaper.Replace(lit.Value))
				continue
			}
			printPart(b, inner, depth)
		}
	case *syntax.ParamExp:
		name := ""
		if p.Param != nil {
			name = p.Param.Value
		}
		if strings.EqualFold(name, "ifs") {
			b.WriteByte(' ')
			return
		}
		// $NAME, as ${NAME} means: the braces end no word for the rules
		// ("rm -rf ${HOME}" reads as "rm -rf $HOME").
		b.WriteString("$" + name)
	case *syntax.CmdSubst:
		b.WriteString("$(")
		printStmts(b, p.Stmts, depth+1)
		b.WriteString(")")
	case *syntax.ProcSubst:
		b.WriteString(p.Op.String())
		printStmts(b, p.Stmts, depth+1)
		b.WriteString(")")
	}
}

// dblQuoteUnescaper undoes the escapes that work inside double quotes.
var dblQuoteUnescaper = strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\$`, `$`, "\\`", "`")

// ansiCUnquote decodes the escapes of $'...' quoting: \xHH, octal \NNN and
// the usual letters.
func ansiCUnquote(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch c := s[i]; {
		case c == 'x' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		case c >= '0' && c <= '7':
			v, n := 0, 0
			for n < 3 && i < len(s) && s[i] >= '0' && s[i] <= '7' {
				v = v*8 + int(s[i]-'0')
				i++
				n++
			}
			i--
			b.WriteByte(byte(v))
		case c == 'n':
			b.WriteByte('\n')
		case c == 't':
			b.WriteByte('\t')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
