package sandbox

import (
	"strings"
)

// sed: --follow-symlinks is absent; -i takes an attached suffix without a
// slash (GNU sed would otherwise write the backup into another directory).
const sedFlags = "-n -e= -f@ -E -r -s -u -z -i? -l# " +
	"--quiet --silent --expression= --file@ --regexp-extended --separate --unbuffered --null-data " +
	"--in-place? --line-length# --posix --sandbox --debug"

var sedFlagSet = lazyFlags(sedFlags)

// maxSedScript bounds a sed script read from a file.
const maxSedScript = 64 << 10

// validateSed checks sed: every script (-e, -f or the first operand) is
// parsed and the commands that run programs or touch other files (e, r, R,
// w, W, s///e, s///w) are refused; with -i the files are written, so they
// must be writable workspace paths. A script read from a file (-f) is
// checked too, but the file is workspace content that can change after
// the check (an earlier command of the same script, another job), so it
// must run with --sandbox: GNU sed then refuses those commands itself,
// whatever the file holds when it reads it.
func validateSed(c *Checker, args []string) error {
	p, err := sedFlagSet().parse(c, args)
	if err != nil {
		return err
	}
	if p.has("-f", "--file") && !p.has("--sandbox") {
		return c.Refuse("a script read from a file (-f) must run with --sandbox (the file can change after it is checked; sed --sandbox refuses e, r, w itself)")
	}
	var scripts []string
	scripts = append(scripts, p.values("-e", "--expression")...)
	for _, f := range p.values("-f", "--file") {
		host, err := c.check(f, false)
		if err != nil {
			return err
		}
		if host == "/dev/null" || c.lexical {
			continue // without the workspace, the worker checks the script
		}
		b, err := readSmall(host, maxSedScript)
		if err != nil {
			return c.Refuse("script file must be a regular file of at most %d bytes: %s", maxSedScript, quote(f))
		}
		scripts = append(scripts, b)
	}
	ops := p.operands
	if !p.has("-e", "--expression", "-f", "--file") {
		if len(ops) == 0 {
			return c.Refuse("a script is required")
		}
		scripts = append(scripts, ops[0])
		ops = ops[1:]
	}
	if err := checkSedScript(c, strings.Join(scripts, "\n")); err != nil {
		return err
	}
	inPlace := false
	for _, f := range p.flags {
		if f.name == "-i" || f.name == "--in-place" {
			inPlace = true
			if strings.ContainsAny(f.value, "/*") {
				return c.Refuse("an -i backup suffix must not contain / or *")
			}
		}
	}
	if inPlace {
		if len(ops) == 0 {
			return c.Refuse("-i needs a file")
		}
		return checkOperands(c, ops, OperandsWritePaths)
	}
	return checkOperands(c, ops, OperandsPaths)
}

// sedParser walks a GNU sed script far enough to find every command and
// every s/// flag. Anything it does not understand is refused.
type sedParser struct {
	c *Checker
	s string
	i int
}

// checkSedScript refuses scripts with e, r, R, w, W commands or s///e,
// s///w flags, and scripts it cannot parse.
func checkSedScript(c *Checker, script string) error {
	p := &sedParser{c: c, s: script}
	return p.script()
}

func (p *sedParser) eof() bool { return p.i >= len(p.s) }

func (p *sedParser) peek() byte {
	if p.eof() {
		return 0
	}
	return p.s[p.i]
}

func (p *sedParser) bad(what string) error {
	return p.c.Refuse("could not check the script (%s)", what)
}

func (p *sedParser) skipBlanks() {
	for !p.eof() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// script parses commands until the end of input.
func (p *sedParser) script() error {
	depth := 0
	for {
		for !p.eof() && strings.IndexByte(" \t\n;", p.s[p.i]) >= 0 {
			p.i++
		}
		if p.eof() {
			if depth != 0 {
				return p.bad("unmatched {")
			}
			return nil
		}
		if p.peek() == '#' {
			p.skipLine()
			continue
		}
		if p.peek() == '}' {
			if depth == 0 {
				return p.bad("unexpected }")
			}
			depth--
			p.i++
			if err := p.endOfCommand(); err != nil {
				return err
			}
			continue
		}
		if err := p.addresses(); err != nil {
			return err
		}
		p.skipBlanks()
		for p.peek() == '!' {
			p.i++
			p.skipBlanks()
		}
		if p.eof() {
			return p.bad("missing command")
		}
		cmd := p.s[p.i]
		p.i++
		switch cmd {
		case '{':
			depth++
			continue
		case 'e':
			return p.c.Refuse("the e command (run a program) is not allowed")
		case 'r', 'R':
			return p.c.Refuse("the %c command (read another file) is not allowed", cmd)
		case 'w', 'W':
			return p.c.Refuse("the %c command (write a file) is not allowed", cmd)
		case 's':
			if err := p.substitute(); err != nil {
				return err
			}
		case 'y':
			if err := p.transliterate(); err != nil {
				return err
			}
		case 'a', 'i', 'c':
			p.skipText()
			continue
		case ':', 'b', 't', 'T', 'v':
			// GNU sed reads no end of command after a label or v's
			// version: what follows it is the next command.
			label, err := p.label()
			if err != nil {
				return err
			}
			if cmd == ':' && label == "" {
				return p.bad("label expected")
			}
			if cmd == 'v' && strings.Trim(label, "0123456789.") != "" {
				return p.c.Refuse("v needs a version number, not %s", quote(label))
			}
			continue
		case 'l', 'L', 'q', 'Q':
			p.skipBlanks()
			p.number()
		case '=', 'd', 'D', 'g', 'G', 'h', 'H', 'n', 'N', 'p', 'P', 'x', 'z', 'F':
		default:
			return p.c.Refuse("unknown command %s", quote(string(cmd)))
		}
		if err := p.endOfCommand(); err != nil {
			return err
		}
	}
}

// endOfCommand accepts blanks then ';', newline, '}', '#' or the end.
func (p *sedParser) endOfCommand() error {
	p.skipBlanks()
	if p.eof() {
		return nil
	}
	switch p.peek() {
	case ';', '\n':
		p.i++
		return nil
	case '}', '#':
		return nil
	}
	return p.bad("unexpected " + quote(string(p.peek())))
}

// addresses parses zero, one or two addresses.
func (p *sedParser) addresses() error {
	ok, err := p.address()
	if err != nil || !ok {
		return err
	}
	p.skipBlanks()
	if p.peek() != ',' {
		return nil
	}
	p.i++
	p.skipBlanks()
	if p.peek() == '+' || p.peek() == '~' {
		p.i++
		if !p.number() {
			return p.bad("number expected")
		}
		return nil
	}
	ok, err = p.address()
	if err != nil {
		return err
	}
	if !ok {
		return p.bad("address expected")
	}
	return nil
}

// address parses one address: N, N~M, $, /re/flags or \cREcflags.
func (p *sedParser) address() (bool, error) {
	switch ch := p.peek(); {
	case ch >= '0' && ch <= '9':
		p.number()
		if p.peek() == '~' {
			p.i++
			if !p.number() {
				return false, p.bad("number expected")
			}
		}
		return true, nil
	case ch == '$':
		p.i++
		return true, nil
	case ch == '/' || ch == '\\':
		delim := byte('/')
		p.i++
		if ch == '\\' {
			if p.eof() || p.peek() == '\n' || p.peek() == '\\' {
				return false, p.bad("bad regex delimiter")
			}
			delim = p.s[p.i]
			p.i++
		}
		if !p.delimited(delim) {
			return false, p.bad("unterminated address regex")
		}
		for p.peek() == 'I' || p.peek() == 'M' {
			p.i++
		}
		return true, nil
	}
	return false, nil
}

// number consumes digits and reports whether there were any.
func (p *sedParser) number() bool {
	start := p.i
	for !p.eof() && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}

// delimited consumes text up to an unescaped delim, the way GNU sed's
// match_slash does: a backslash escapes the next character, brackets are
// not special, and an unescaped newline ends the script part in error.
func (p *sedParser) delimited(delim byte) bool {
	for !p.eof() {
		ch := p.s[p.i]
		p.i++
		switch {
		case ch == '\\':
			if p.eof() {
				return false
			}
			p.i++
		case ch == delim:
			return true
		case ch == '\n':
			return false
		}
	}
	return false
}

// substitute parses s/re/replacement/flags after the 's'.
func (p *sedParser) substitute() error {
	if p.eof() || p.peek() == '\n' || p.peek() == '\\' {
		return p.bad("bad s delimiter")
	}
	delim := p.s[p.i]
	p.i++
	if !p.delimited(delim) {
		return p.bad("unterminated s regex")
	}
	if !p.delimited(delim) {
		return p.bad("unterminated s replacement")
	}
	for !p.eof() {
		switch ch := p.peek(); {
		case ch == 'e':
			return p.c.Refuse("the s///e flag (run the pattern space as a command) is not allowed")
		case ch == 'w':
			return p.c.Refuse("the s///w flag (write a file) is not allowed")
		case ch == 'g' || ch == 'p' || ch == 'i' || ch == 'I' || ch == 'm' || ch == 'M' || (ch >= '0' && ch <= '9'):
			p.i++
		default:
			return nil
		}
	}
	return nil
}

// transliterate parses y/src/dst/ after the 'y'.
func (p *sedParser) transliterate() error {
	if p.eof() || p.peek() == '\n' || p.peek() == '\\' {
		return p.bad("bad y delimiter")
	}
	delim := p.s[p.i]
	p.i++
	for range 2 { // the source, then the destination
		if !p.delimited(delim) {
			return p.bad("unterminated y command")
		}
	}
	return nil
}

// skipText skips the text of a, i and c: up to an unescaped newline (a
// backslash before a newline continues the text).
func (p *sedParser) skipText() {
	for !p.eof() {
		ch := p.s[p.i]
		p.i++
		if ch == '\\' {
			if !p.eof() {
				p.i++
			}
			continue
		}
		if ch == '\n' {
			return
		}
	}
}

// skipLine skips to the end of the line (comments).
func (p *sedParser) skipLine() {
	for !p.eof() && p.s[p.i] != '\n' {
		p.i++
	}
}

// label reads a label (of :, b, t, T) or v's version as GNU sed's
// read_label does: after blanks, up to a blank, ';', newline, '}', '#' or
// the end, which it leaves for the next command. A label with another
// control or a non-ASCII byte is refused: GNU sed would keep it in the
// label, or, where it reads it as a blank of the locale, end the label
// there.
func (p *sedParser) label() (string, error) {
	p.skipBlanks()
	start := p.i
	for !p.eof() && strings.IndexByte(" \t\n;}#", p.s[p.i]) < 0 {
		if ch := p.s[p.i]; ch < 0x20 || ch >= 0x7f {
			return "", p.bad("a label with a control or non-ASCII character")
		}
		p.i++
	}
	return p.s[start:p.i], nil
}
