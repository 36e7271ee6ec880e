package sandbox

import (
	"path"
	"regexp"
	"slices"
	"strings"
)

// tar: absent on purpose are --to-command, --use-compress-program/-I,
// --checkpoint-action, --info-script/-F, --new-volume-script, --rsh-command,
// --rmt-command (run programs), -P/--absolute-names, -h/--dereference,
// --hard-dereference, --remove-files, --recursive-unlink, -T/--files-from
// (names read from a file) and incremental snapshot files.
const tarFlags = "-c -x -t -r -u -v -z -j -J -a -k -O -p -m -o -f= -C= -X@ " +
	"--create --extract --get --list --append --update --verbose --gzip --gunzip --ungzip --bzip2 --xz --lzma " +
	"--zstd --auto-compress --keep-old-files --skip-old-files --keep-newer-files --overwrite --to-stdout " +
	"--preserve-permissions --same-permissions --no-same-permissions --no-same-owner --numeric-owner " +
	"--touch --file= --directory= --exclude= --exclude-from@ --exclude-vcs --exclude-vcs-ignores " +
	"--strip-components# --wildcards --no-wildcards --anchored --no-anchored --owner= --group= --mode= " +
	"--mtime= --sort= --transform= --xform= --show-transformed-names --totals? --one-file-system " +
	"--no-recursion --recursion --null --warning= --format= --posix --ignore-zeros --ignore-failed-read " +
	"--label= --no-overwrite-dir --delay-directory-restore"

var tarFlagSet = lazyFlags(tarFlags)

// tarArgLetters are the bundled (old-style) options that take an argument.
const tarArgLetters = "fCXbgKLNV"

// tarRenames are the options that make an extracted file's path differ from
// the member name given on the command line, or make one name match many
// members.
var tarRenames = []string{"--transform", "--xform", "--strip-components", "--wildcards", "--no-anchored", "--recursion"}

// validateTar checks tar: the archive (-f) is written when creating and
// read otherwise, -C is written when extracting, and members added to an
// archive are read paths.
//
// Extraction (-x without -O) writes whatever names the archive holds, and
// the archive is workspace content: an earlier command of the same script,
// or another run, can rewrite it after it was checked, so reading it here
// proves nothing. It must name its members instead, after --no-recursion
// (which in GNU tar applies to the names that follow it: without it a
// directory's name brings in its whole subtree), and each is checked as a
// written path. Renaming options are refused, and so are names nested in
// one another (a member extracted as a symlink would lead the next one
// anywhere).
func validateTar(c *Checker, args []string) error {
	if len(args) > 0 && args[0] != "" && !strings.HasPrefix(args[0], "-") {
		// Old style: "tar xzf archive.tgz" bundles the options.
		bundle := args[0]
		rest := args[1:]
		var expanded []string
		for i := 0; i < len(bundle); i++ {
			expanded = append(expanded, "-"+string(bundle[i]))
			if strings.IndexByte(tarArgLetters, bundle[i]) >= 0 {
				if len(rest) == 0 {
					return c.Refuse("-%c needs a value", bundle[i])
				}
				expanded = append(expanded, rest[0])
				rest = rest[1:]
			}
		}
		args = append(expanded, rest...)
	}
	p, err := tarFlagSet().parse(c, args)
	if err != nil {
		return err
	}
	writing := p.has("-c", "--create", "-r", "--append", "-u", "--update")
	extracting := p.has("-x", "--extract", "--get")
	dirs := p.values("-C", "--directory")
	// GNU tar unquotes member names and -C directories: "\056git" is .git.
	for _, n := range append(slices.Clone(dirs), p.operands...) {
		if strings.Contains(n, "\\") {
			return c.Refuse("backslashes are not allowed in names (tar reads escapes in them): %s", quote(n))
		}
	}
	for _, f := range p.values("-f", "--file") {
		if f == "-" {
			continue
		}
		if strings.Contains(f, ":") {
			return c.Refuse("remote archives are not allowed: %s", quote(f))
		}
		if writing {
			err = c.WritePath(f)
		} else {
			err = c.Path(f)
		}
		if err != nil {
			return err
		}
	}
	for _, d := range dirs {
		if extracting {
			err = c.WritePath(d)
		} else {
			err = c.Path(d)
		}
		if err != nil {
			return err
		}
	}
	if extracting && !p.has("-O", "--to-stdout") {
		if err := checkTarMembers(c, args, p, dirs); err != nil {
			return err
		}
	}
	if writing {
		return checkOperands(c, p.operands, OperandsPaths)
	}
	return nil
}

// checkTarMembers checks the member names of an extraction to disk (see
// validateTar): each is a path written under the working directory and
// under the -C directory (names before a -C are extracted where tar
// started, those after it in the directory).
func checkTarMembers(c *Checker, args []string, p *parsedArgs, dirs []string) error {
	for _, f := range tarRenames {
		if p.has(f) {
			return c.Refuse("%s is not allowed when extracting: the member names must be the paths written", f)
		}
	}
	if len(p.operands) == 0 {
		return c.Refuse("extracting must name the members to write, after --no-recursion " +
			"(tar -xf ARCHIVE --no-recursion NAME...), or write to stdout (-O): the archive's own names are not checked")
	}
	// --no-recursion applies to the names after it: nothing before it may be
	// an operand (a value that swallowed it fails to parse).
	at := slices.Index(args, "--no-recursion")
	if at < 0 || !p.has("--no-recursion") {
		return c.Refuse("extracting named members needs --no-recursion before the names")
	}
	quiet := *c
	quiet.seen = nil
	if pre, err := tarFlagSet().parse(&quiet, args[:at]); err != nil || len(pre.operands) > 0 {
		return c.Refuse("extracting named members needs --no-recursion before the names")
	}
	if len(dirs) > 1 {
		return c.Refuse("extracting allows one -C directory")
	}
	names := make([]string, 0, len(p.operands))
	for _, m := range p.operands {
		switch {
		case m == "" || m == "-":
			return c.Refuse("not a member name: %s", quote(m))
		case strings.HasPrefix(m, "/"):
			return c.Refuse("member names must be relative: %s", quote(m))
		case strings.ContainsAny(m, "*?["):
			return c.Refuse("wildcard characters in member names are not allowed: %s", quote(m))
		case slices.Contains(strings.Split(m, "/"), ".."):
			return c.Refuse("member names must not contain ..: %s", quote(m))
		}
		if err := c.WritePath(m); err != nil {
			return err
		}
		for _, d := range dirs {
			if err := c.WritePath(path.Join(d, m)); err != nil {
				return err
			}
		}
		names = append(names, path.Clean(m))
	}
	for _, a := range names {
		for _, b := range names {
			if a != b && (a == "." || strings.HasPrefix(b, a+"/")) {
				return c.Refuse("member %s is inside another named member %s: extract them in separate runs", quote(b), quote(a))
			}
		}
	}
	return nil
}

// awk: -f (program file), gawk's -e/-i/-l/-E and --exec are absent.
var awkFlagSet = lazyFlags("-F= -v=")

var awkAssignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// validateAwk checks awk 'PROGRAM' [file | var=value]...: the program must
// not run commands (system, |), read other input (getline) or redirect
// output (> at the top level; a comparison inside parentheses is fine).
func validateAwk(c *Checker, args []string) error {
	p, err := awkFlagSet().parse(c, args)
	if err != nil {
		return err
	}
	if len(p.operands) == 0 {
		return c.Refuse("a program is required")
	}
	if err := checkAwkProgram(c, p.operands[0]); err != nil {
		return err
	}
	for _, o := range p.operands[1:] {
		if awkAssignment.MatchString(o) {
			continue
		}
		if err := c.Path(o); err != nil {
			return err
		}
	}
	return nil
}

// awkPrev is what the scanner last read in code, which decides what a "/"
// starts: a regex literal or a division.
type awkPrev uint8

const (
	awkOpen    awkPrev = iota // an operand may follow: a regex (every awk)
	awkOperand                // an operand ended: a division (every awk)
	awkEither                 // awks differ, or the grammar decides: both
)

// awkState is one way of reading the program, at byte i.
type awkState struct {
	i      int
	prev   awkPrev
	depth  int    // ( and [ open at i
	ctrl   uint64 // bit d: the "(" at depth d opened an if/while/for header
	header bool   // an if/while/for was just read: the next "(" opens its header
}

// Bounds of the scan: deeper nesting and programs with more readings are
// refused.
const (
	maxAwkDepth  = 63
	maxAwkStates = 1 << 16
)

// awkWords are the keywords and builtin function names: what follows them
// is read as an operand or an operator depending on the awk (mawk reads
// "length /x/" as a regex, gawk as a division).
var awkWords = map[string]bool{
	"BEGIN": true, "END": true, "BEGINFILE": true, "ENDFILE": true, "function": true, "func": true,
	"if": true, "else": true, "while": true, "for": true, "do": true, "break": true, "continue": true,
	"next": true, "nextfile": true, "exit": true, "return": true, "delete": true, "print": true,
	"printf": true, "in": true, "switch": true, "case": true, "default": true, "length": true,
	"substr": true, "index": true, "split": true, "sub": true, "gsub": true, "gensub": true,
	"match": true, "sprintf": true, "sin": true, "cos": true, "atan2": true, "exp": true, "log": true,
	"sqrt": true, "int": true, "rand": true, "srand": true, "tolower": true, "toupper": true,
	"systime": true, "strftime": true, "mktime": true, "and": true, "or": true, "xor": true,
	"lshift": true, "rshift": true, "compl": true, "strtonum": true, "asort": true, "asorti": true,
	"isarray": true, "typeof": true, "patsplit": true, "mkbool": true,
}

// checkAwkProgram looks for what the program must not do in its code, that
// is outside string and regex literals and comments. Whether a "/" starts
// a regex or divides depends on the awk (gawk decides by its grammar: after
// "x++" it divides, after "if (c)" it starts a regex; mawk decides by the
// token before: after "++" or "length" a regex, after ")" a division), and
// so does whether a "/" inside a bracket expression ends a regex. Hiding
// code in what the scanner takes for a literal must be impossible, so each
// reading is scanned wherever they differ: the program passes only if no
// reading holds a forbidden construct. Readings that leave a string or a
// regex open at the end of a line are dropped (every awk rejects them).
func checkAwkProgram(c *Checker, prog string) error {
	stack := []awkState{{}}
	seen := map[awkState]bool{}
	complete := false
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[s] {
			continue
		}
		seen[s] = true
		if len(seen) > maxAwkStates {
			return c.Refuse("the program is too complex to check")
		}
		next, done, err := scanAwk(c, prog, s)
		if err != nil {
			return err
		}
		complete = complete || done
		stack = append(stack, next...)
	}
	if !complete {
		return c.Refuse("could not check the program (unterminated string or regex)")
	}
	return nil
}

// scanAwk reads code from s until the end of the program (done), a point
// where the reading splits (next holds the branches) or a dead end (an
// unterminated literal: neither).
func scanAwk(c *Checker, prog string, s awkState) (next []awkState, done bool, err error) {
	n := len(prog)
	for s.i < n {
		ch := prog[s.i]
		switch ch {
		case ' ', '\t', '\r', '\f', '\v':
			s.i++
			continue
		case '\\':
			// A line continuation is blank; any other backslash is an error
			// in awk, and what follows it is read both ways.
			j := s.i + 1
			if j < n && prog[j] == '\r' {
				j++
			}
			if j < n && prog[j] == '\n' {
				s.i = j + 1
				continue
			}
			s.i++
			s.prev = awkEither
			continue
		case '\n':
			if s.prev != awkOpen && s.depth > 0 {
				s.prev = awkEither
			} else {
				s.prev = awkOpen
			}
			s.i++
			continue
		case '#':
			for s.i < n && prog[s.i] != '\n' {
				s.i++
			}
			continue
		}
		header := s.header
		s.header = false
		switch {
		case ch == '"':
			j := s.i + 1
			for j < n && prog[j] != '"' {
				switch prog[j] {
				case '\\':
					j++
					if j+1 < n && prog[j] == '\r' && prog[j+1] == '\n' {
						j++
					}
				case '\n':
					return nil, false, nil
				}
				j++
			}
			if j >= n {
				return nil, false, nil
			}
			s.i = j + 1
			s.prev = awkOperand
		case ch == '/':
			prev := s.prev
			if prev == awkOperand {
				s.i++
				s.prev = awkOpen
				continue
			}
			for _, end := range awkRegexEnds(prog, s.i) {
				r := s
				r.i, r.prev = end, awkOperand
				next = append(next, r)
			}
			if prev == awkEither {
				d := s
				d.i, d.prev = s.i+1, awkOpen
				next = append(next, d)
			}
			return next, false, nil
		case ch == '(' || ch == '[':
			if s.depth >= maxAwkDepth {
				return nil, false, c.Refuse("the program nests too deeply to check")
			}
			s.depth++
			if ch == '(' && header && s.depth > 0 {
				s.ctrl |= 1 << s.depth
			} else if s.depth > 0 {
				s.ctrl &^= 1 << s.depth
			}
			s.i++
			s.prev = awkOpen
		case ch == ')' || ch == ']':
			s.prev = awkOperand
			if s.depth > 0 && s.ctrl&(1<<s.depth) != 0 {
				// The end of an if/while/for header: gawk reads a regex
				// next, mawk a division.
				s.prev = awkEither
				s.ctrl &^= 1 << s.depth
			}
			s.depth--
			s.i++
		case ch == '|':
			if s.i+1 < n && prog[s.i+1] == '|' {
				s.i += 2
				s.prev = awkOpen
				continue
			}
			return nil, false, c.Refuse("| (pipes to or from commands) is not allowed")
		case ch == '>':
			if s.i+1 < n && prog[s.i+1] == '=' {
				s.i += 2
				s.prev = awkOpen
				continue
			}
			if s.depth <= 0 {
				return nil, false, c.Refuse("> outside parentheses (output redirection) is not allowed; write comparisons as (a > b)")
			}
			s.i++
			s.prev = awkOpen
		case ch == '@':
			return nil, false, c.Refuse("@ directives are not allowed")
		case ch == '+' || ch == '-':
			if s.i+1 < n && prog[s.i+1] == ch {
				// x++ / y divides in gawk; mawk reads a regex.
				s.i += 2
				s.prev = awkEither
				continue
			}
			s.i++
			s.prev = awkOpen
		case isAlpha(ch) || ch == '_':
			j := s.i
			for j < n && (isAlnum(prog[j]) || prog[j] == '_') {
				j++
			}
			word := prog[s.i:j]
			switch word {
			case "system", "getline", "close", "fflush":
				return nil, false, c.Refuse("%s is not allowed", word)
			case "if", "while", "for":
				s.header = true
			}
			s.prev = awkOperand
			if awkWords[word] {
				s.prev = awkEither
			}
			s.i = j
		case ch >= '0' && ch <= '9' || ch == '.':
			for s.i < n && (prog[s.i] >= '0' && prog[s.i] <= '9' || prog[s.i] == '.') {
				s.i++
			}
			s.prev = awkOperand
		case strings.IndexByte("{};,!~=<*%^?:&$", ch) >= 0:
			s.i++
			s.prev = awkOpen
		default:
			s.i++
			s.prev = awkEither
		}
	}
	return nil, true, nil
}

// awkRegexEnds returns where a regex literal that starts at prog[start]
// ("/") may end: the index after each "/" that closes it in some awk. One
// that sees no bracket expressions (mawk 1.3.4-2020) ends it at the first
// unescaped "/"; gawk, and awks that follow POSIX brackets, go on while a
// bracket expression is open. None: the regex is open at the end of its
// line, which every awk rejects.
func awkRegexEnds(prog string, start int) []int {
	var ends []int
	gawk, gawkOpen := 0, -1 // gawk's in_brack count and where its bracket opened
	posix, posixOpen := false, -1
	for j := start + 1; j < len(prog); j++ {
		switch prog[j] {
		case '\\':
			j++
			if j+1 < len(prog) && prog[j] == '\r' && prog[j+1] == '\n' {
				j++
			}
		case '\n':
			return ends
		case '[':
			if j+1 < len(prog) && prog[j+1] == ':' || gawk == 0 {
				gawk++
				if gawk == 1 {
					gawkOpen = j
				}
			}
			if !posix {
				posix, posixOpen = true, j
			}
		case ']':
			if !(gawk > 0 && (j == gawkOpen+1 || j == gawkOpen+2 && prog[j-1] == '^')) {
				gawk--
				if gawk == 0 {
					gawkOpen = -1
				}
			}
			if posix && j != posixOpen+1 && !(j == posixOpen+2 && prog[j-1] == '^') {
				posix = false
			}
		case '/':
			ends = append(ends, j+1)
			if gawk <= 0 && !posix {
				return ends
			}
		}
	}
	return ends
}
