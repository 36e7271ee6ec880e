package sandbox

import (
	"regexp"
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

// validateTar checks tar: the archive (-f) is written when creating and
// read otherwise, -C is written when extracting, and members added to an
// archive are read paths.
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
	for _, d := range p.values("-C", "--directory") {
		if extracting {
			err = c.WritePath(d)
		} else {
			err = c.Path(d)
		}
		if err != nil {
			return err
		}
	}
	if writing {
		return checkOperands(c, p.operands, OperandsPaths)
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

// checkAwkProgram scans an awk program outside string and regex literals.
func checkAwkProgram(c *Checker, prog string) error {
	depth := 0
	prevOperand := false
	for i := 0; i < len(prog); i++ {
		ch := prog[i]
		switch {
		case ch == '"':
			i++
			for i < len(prog) && prog[i] != '"' {
				if prog[i] == '\\' {
					i++
				}
				i++
			}
			prevOperand = true
		case ch == '/' && !prevOperand:
			i++
			for i < len(prog) && prog[i] != '/' {
				if prog[i] == '\\' {
					i++
				}
				if i < len(prog) && prog[i] == '\n' {
					return c.Refuse("could not check the program (unterminated regex)")
				}
				i++
			}
			prevOperand = true
		case ch == '#':
			for i < len(prog) && prog[i] != '\n' {
				i++
			}
		case ch == '(' || ch == '[':
			depth++
			prevOperand = false
		case ch == ')' || ch == ']':
			depth--
			prevOperand = true
		case ch == '|':
			if i+1 < len(prog) && prog[i+1] == '|' {
				i++
				prevOperand = false
				continue
			}
			return c.Refuse("| (pipes to or from commands) is not allowed")
		case ch == '>':
			if i+1 < len(prog) && prog[i+1] == '=' {
				i++
				prevOperand = false
				continue
			}
			if depth <= 0 {
				return c.Refuse("> outside parentheses (output redirection) is not allowed; write comparisons as (a > b)")
			}
			prevOperand = false
		case ch == '@':
			return c.Refuse("@ directives are not allowed")
		case isAlpha(ch) || ch == '_':
			j := i
			for j < len(prog) && (isAlnum(prog[j]) || prog[j] == '_') {
				j++
			}
			word := prog[i:j]
			switch word {
			case "system", "getline", "close", "fflush":
				return c.Refuse("%s is not allowed", word)
			}
			i = j - 1
			prevOperand = true
		case ch >= '0' && ch <= '9' || ch == '$' || ch == '.':
			prevOperand = true
		case ch == ' ' || ch == '\t':
		default:
			prevOperand = false
		}
	}
	return nil
}
