package risk

import (
	"path"
	"strings"
)

// readOnlyCommands are programs that only read, whatever their arguments
// (given as argv, without a shell). Programs that can write or run other
// programs through a flag (find -exec, sed -i, sort -o, rg --pre) are not
// here.
var readOnlyCommands = keySet("ls", "cat", "head", "tail", "wc", "pwd", "echo", "grep", "egrep",
	"fgrep", "diff", "stat", "du", "df", "whoami", "date", "uname", "tree", "which", "basename",
	"dirname", "realpath", "true", "id", "hostname", "nproc", "file")

// readOnlyGit are git subcommands that only read.
var readOnlyGit = keySet("status", "diff", "log", "show", "rev-parse", "ls-files", "blame",
	"describe", "shortlog", "branch")

// shellMeta are characters that make a command string more than one simple
// command.
const shellMeta = ";&|`$()<>{}\n\\*?!#"

// readOnlyCommand reports whether an exec call's command is a known
// read-only program, taking argv from args.argv (a list) or args.command /
// args.cmd (a list, or a string without shell syntax).
func readOnlyCommand(args map[string]any) (string, bool) {
	var argv []string
	for _, k := range []string{"argv", "command", "cmd"} {
		switch t := args[k].(type) {
		case []any:
			for _, e := range t {
				s, ok := e.(string)
				if !ok {
					return "", false
				}
				argv = append(argv, s)
			}
		case []string:
			argv = t
		case string:
			if strings.ContainsAny(t, shellMeta) {
				return "", false
			}
			argv = strings.Fields(t)
		default:
			continue
		}
		break
	}
	if len(argv) == 0 {
		return "", false
	}
	name := strings.ToLower(path.Base(argv[0]))
	if !readOnlyCommands[name] && name != "git" {
		return "", false
	}
	for _, a := range argv[1:] {
		a = strings.ToLower(a)
		if strings.HasPrefix(a, "--output") || strings.HasPrefix(a, "--ext-diff") || strings.HasPrefix(a, "--textconv") {
			return "", false
		}
	}
	if name == "git" {
		if len(argv) < 2 || !readOnlyGit[argv[1]] {
			return "", false
		}
		if argv[1] == "branch" && len(argv) > 2 {
			return "", false
		}
		return "git " + argv[1], true
	}
	return name, true
}
