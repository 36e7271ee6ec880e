package sandbox

import (
	"regexp"
	"strings"
)

// findArgs is how many arguments each allowed find primary takes, and
// whether the argument is a path. Absent on purpose: -exec, -execdir, -ok,
// -okdir (run programs), -delete, -fprint, -fprint0, -fprintf, -fls (write
// files), -follow (follows symlinks out of the tree), -files0-from.
var findArgs = map[string]findArg{
	// Operators and positional options.
	"!": {}, "(": {}, ")": {}, ",": {}, "-not": {}, "-a": {}, "-and": {}, "-o": {}, "-or": {},
	"-depth": {}, "-d": {}, "-mount": {}, "-xdev": {}, "-noleaf": {}, "-daystart": {},
	"-ignore_readdir_race": {}, "-noignore_readdir_race": {},
	"-maxdepth": {n: 1}, "-mindepth": {n: 1}, "-regextype": {n: 1},
	// Tests.
	"-empty": {}, "-executable": {}, "-readable": {}, "-writable": {}, "-false": {}, "-true": {},
	"-nouser": {}, "-nogroup": {},
	"-name": {n: 1}, "-iname": {n: 1}, "-path": {n: 1}, "-ipath": {n: 1}, "-wholename": {n: 1},
	"-iwholename": {n: 1}, "-regex": {n: 1}, "-iregex": {n: 1}, "-lname": {n: 1}, "-ilname": {n: 1},
	"-type": {n: 1}, "-xtype": {n: 1}, "-size": {n: 1}, "-perm": {n: 1}, "-user": {n: 1}, "-group": {n: 1},
	"-uid": {n: 1}, "-gid": {n: 1}, "-links": {n: 1}, "-inum": {n: 1}, "-used": {n: 1}, "-fstype": {n: 1},
	"-mtime": {n: 1}, "-atime": {n: 1}, "-ctime": {n: 1}, "-mmin": {n: 1}, "-amin": {n: 1}, "-cmin": {n: 1},
	"-newer": {n: 1, path: true}, "-anewer": {n: 1, path: true}, "-cnewer": {n: 1, path: true},
	"-samefile": {n: 1, path: true},
	// Actions that only print.
	"-print": {}, "-print0": {}, "-ls": {}, "-prune": {}, "-quit": {}, "-printf": {n: 1},
}

type findArg struct {
	n    int  // number of arguments
	path bool // the argument is a path read
}

var findNewerXY = regexp.MustCompile(`^-newer[aBcmt][aBcmt]$`)

// validateFind checks find [-P] [starting-point...] [expression]: the
// starting points are paths; every primary of the expression must be on the
// allowed list.
func validateFind(c *Checker, args []string) error {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") && len(args[i]) > 1 {
		switch args[i] {
		case "-P":
			i++
			continue
		case "-H", "-L", "-D", "-O":
			return c.Refuse("%s is not allowed", args[i])
		}
		if strings.HasPrefix(args[i], "-O") {
			return c.Refuse("%s is not allowed", quote(args[i]))
		}
		break
	}
	// Starting points: up to the first argument that begins an expression.
	for ; i < len(args); i++ {
		a := args[i]
		if (strings.HasPrefix(a, "-") && len(a) > 1) || a == "!" || a == "(" || a == ")" || a == "," {
			break
		}
		if err := c.Path(a); err != nil {
			return err
		}
	}
	for ; i < len(args); i++ {
		a := args[i]
		spec, ok := findArgs[a]
		if !ok {
			if findNewerXY.MatchString(a) {
				if i+1 >= len(args) {
					return c.Refuse("%s needs an argument", a)
				}
				i++
				if a[len(a)-1] != 't' {
					if err := c.Path(args[i]); err != nil {
						return err
					}
				}
				continue
			}
			return c.Refuse("%s is not allowed", quote(a))
		}
		if i+spec.n > len(args)-1 {
			return c.Refuse("%s needs an argument", a)
		}
		if spec.path {
			if err := c.Path(args[i+1]); err != nil {
				return err
			}
		}
		i += spec.n
	}
	return nil
}
