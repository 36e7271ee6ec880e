package sandbox

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// argKind says what a flag takes.
type argKind byte

const (
	argNone  argKind = iota // a switch
	argText                 // a required free-text value (pattern, name, format)
	argInt                  // a required count or size
	argRead                 // a required path the program reads
	argWrite                // a required path the program writes
	argOpt                  // an optional value, attached only (--flag=value, -fVALUE)
)

// flagSpec is one allowed flag.
type flagSpec struct {
	arg argKind
}

// FlagSet is an explicit list of the flags a program may get; anything else
// is refused. It is written as space-separated tokens:
//
//	-x        short switch             --name     long switch
//	-x=       short, text value        --name=    long, text value
//	-x#       short, number            --name#    long, number
//	-x@       short, path read         --name@    long, path read
//	-x>       short, path written      --name>    long, path written
//	-x?       short, optional value    --name?    long, optional value (attached only)
//	-#        numeric shorthand (head -5, git log -3)
//
// A required value may be attached (-n5, --lines=5) or the next argument.
type FlagSet struct {
	short   map[byte]flagSpec
	long    map[string]flagSpec
	numeric bool
}

// ParseFlagSet parses the token list described at FlagSet.
func ParseFlagSet(spec string) (*FlagSet, error) {
	fs := &FlagSet{short: map[byte]flagSpec{}, long: map[string]flagSpec{}}
	for _, tok := range strings.Fields(spec) {
		if tok == "-#" {
			fs.numeric = true
			continue
		}
		kind := argNone
		switch tok[len(tok)-1] {
		case '=':
			kind = argText
		case '#':
			kind = argInt
		case '@':
			kind = argRead
		case '>':
			kind = argWrite
		case '?':
			kind = argOpt
		}
		name := tok
		if kind != argNone {
			name = tok[:len(tok)-1]
		}
		switch {
		case strings.HasPrefix(name, "--") && len(name) > 2:
			fs.long[name[2:]] = flagSpec{arg: kind}
		case len(name) == 2 && name[0] == '-' && name[1] != '-':
			fs.short[name[1]] = flagSpec{arg: kind}
		default:
			return nil, fmt.Errorf("sandbox: bad flag token %q", tok)
		}
	}
	return fs, nil
}

// mustFlags parses a built-in flag list; a bad one is a programming error.
func mustFlags(spec string) *FlagSet {
	fs, err := ParseFlagSet(spec)
	if err != nil {
		panic(err)
	}
	return fs
}

// lazyFlags parses a built-in flag list on first use.
func lazyFlags(spec string) func() *FlagSet {
	return sync.OnceValue(func() *FlagSet { return mustFlags(spec) })
}

// flagUse is one flag as it appeared on the command line.
type flagUse struct {
	name     string // "-n" or "--lines" (as written, without the value)
	value    string
	hasValue bool
}

// parsedArgs is a command line split into flags and operands.
type parsedArgs struct {
	flags    []flagUse
	operands []string
	dashdash bool // a "--" was seen
}

// has reports whether any of the given flags (as written, e.g. "-e",
// "--regexp") was used.
func (p *parsedArgs) has(names ...string) bool {
	for _, f := range p.flags {
		for _, n := range names {
			if f.name == n {
				return true
			}
		}
	}
	return false
}

// values returns the values given to any of the named flags.
func (p *parsedArgs) values(names ...string) []string {
	var out []string
	for _, f := range p.flags {
		for _, n := range names {
			if f.name == n && f.hasValue {
				out = append(out, f.value)
			}
		}
	}
	return out
}

var intValue = regexp.MustCompile(`^[+-]?[0-9]{1,18}[A-Za-z%]{0,3}$`)

// parse splits args into flags and operands, refusing any flag not in the
// set and checking every flag value (numbers, paths). Flags may follow
// operands (GNU-style permutation); "--" ends the flags; "-" is an operand.
func (fs *FlagSet) parse(c *Checker, args []string) (*parsedArgs, error) {
	out := &parsedArgs{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if out.dashdash || a == "-" || !strings.HasPrefix(a, "-") {
			out.operands = append(out.operands, a)
			continue
		}
		if a == "--" {
			out.dashdash = true
			continue
		}
		if strings.HasPrefix(a, "--") {
			name, value, hasValue := strings.Cut(a[2:], "=")
			spec, ok := fs.long[name]
			if !ok {
				return nil, c.Refuse("--%s is not allowed", quote(name))
			}
			use := flagUse{name: "--" + name, value: value, hasValue: hasValue}
			switch spec.arg {
			case argNone:
				if hasValue {
					return nil, c.Refuse("--%s takes no value", name)
				}
			case argOpt:
			default:
				if !hasValue {
					if i+1 >= len(args) {
						return nil, c.Refuse("--%s needs a value", name)
					}
					i++
					use.value, use.hasValue = args[i], true
				}
			}
			if err := checkFlagValue(c, use.name, spec.arg, use.value, use.hasValue); err != nil {
				return nil, err
			}
			out.flags = append(out.flags, use)
			continue
		}
		// Short flags, possibly clustered (-la, -n5, -C3).
		if fs.numeric && isDigits(a[1:]) {
			out.flags = append(out.flags, flagUse{name: "-#", value: a[1:], hasValue: true})
			continue
		}
		for j := 1; j < len(a); j++ {
			ch := a[j]
			spec, ok := fs.short[ch]
			if !ok {
				return nil, c.Refuse("-%s is not allowed", quote(string(ch)))
			}
			use := flagUse{name: "-" + string(ch)}
			if spec.arg == argNone {
				out.flags = append(out.flags, use)
				continue
			}
			if rest := a[j+1:]; rest != "" {
				use.value, use.hasValue = rest, true
			} else if spec.arg != argOpt {
				if i+1 >= len(args) {
					return nil, c.Refuse("-%c needs a value", ch)
				}
				i++
				use.value, use.hasValue = args[i], true
			}
			if err := checkFlagValue(c, use.name, spec.arg, use.value, use.hasValue); err != nil {
				return nil, err
			}
			out.flags = append(out.flags, use)
			break
		}
	}
	return out, nil
}

// checkFlagValue checks one flag's value by kind.
func checkFlagValue(c *Checker, name string, kind argKind, value string, has bool) error {
	switch kind {
	case argInt:
		if !intValue.MatchString(value) {
			return c.Refuse("%s needs a number, not %s", name, quote(value))
		}
	case argRead:
		return c.Path(value)
	case argWrite:
		return c.WritePath(value)
	}
	return nil
}

// isDigits reports whether s is a non-empty run of ASCII digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// OperandKind says what a program's operands (non-flag arguments) are.
type OperandKind int

const (
	// OperandsPaths are paths the program reads.
	OperandsPaths OperandKind = iota
	// OperandsWritePaths are paths the program may write (or delete).
	OperandsWritePaths
	// OperandsText are not paths (names, words, numbers).
	OperandsText
	// OperandsNone means the program takes no operands.
	OperandsNone
)

// FlagValidator returns a Validator for a program that takes the flags in
// spec (see FlagSet) and operands of the given kind. It is how a
// configuration allows a simple program the catalog does not know.
func FlagValidator(spec string, operands OperandKind) (Validator, error) {
	fs, err := ParseFlagSet(spec)
	if err != nil {
		return nil, err
	}
	return simpleValidator(func() *FlagSet { return fs }, operands), nil
}

// simpleValidator checks flags against fs and operands by kind.
func simpleValidator(fs func() *FlagSet, operands OperandKind) Validator {
	return func(c *Checker, args []string) error {
		p, err := fs().parse(c, args)
		if err != nil {
			return err
		}
		return checkOperands(c, p.operands, operands)
	}
}

// checkOperands applies an OperandKind to operands.
func checkOperands(c *Checker, ops []string, kind OperandKind) error {
	switch kind {
	case OperandsNone:
		if len(ops) > 0 {
			return c.Refuse("takes no operands")
		}
	case OperandsPaths:
		for _, o := range ops {
			if err := c.Path(o); err != nil {
				return err
			}
		}
	case OperandsWritePaths:
		for _, o := range ops {
			if err := c.WritePath(o); err != nil {
				return err
			}
		}
	}
	return nil
}
