package sandbox

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

var longOption = regexp.MustCompile(`--(\[no-\])?[a-z0-9][a-z0-9-]*`)

// helpOptions returns the long options a program's help text mentions.
func helpOptions(t *testing.T, argv ...string) (map[string]bool, bool) {
	t.Helper()
	if _, err := exec.LookPath(argv[0]); err != nil {
		return nil, false
	}
	out, _ := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	opts := map[string]bool{}
	for _, m := range longOption.FindAllString(string(out), -1) {
		if rest, ok := strings.CutPrefix(m, "--[no-]"); ok {
			opts[rest] = true
			opts["no-"+rest] = true
			continue
		}
		opts[strings.TrimPrefix(m, "--")] = true
	}
	return opts, len(opts) > 0
}

// TestAllowedLongFlagsExist guards against getopt's abbreviations: GNU
// tools (and git's parse-options commands) accept any unambiguous prefix of
// a long option, so an allowed name the installed program does not have
// exactly could be read as a prefix of another, unchecked option. Every
// allowed long flag must therefore be one the program documents.
func TestAllowedLongFlagsExist(t *testing.T) {
	check := func(name, spec string, argv ...string) {
		opts, ok := helpOptions(t, argv...)
		if !ok {
			t.Logf("%s: not installed here, not checked", name)
			return
		}
		for long := range mustFlags(spec).long {
			if !opts[long] {
				t.Errorf("%s: allowed flag --%s is not in `%s` output", name, long, strings.Join(argv, " "))
			}
		}
	}
	for name, sc := range simpleCommands {
		check(name, sc.flags, name, "--help")
	}
	check("grep", grepFlags, "grep", "--help")
	check("sed", sedFlags, "sed", "--help")
	check("tar", tarFlags, "tar", "--help")
	check("rg", rgFlags, "rg", "--help")
	// git's diff and revision options (log, show, diff, rev-list,
	// shortlog) and rev-parse match names exactly; the parse-options
	// commands accept abbreviations.
	exact := map[string]bool{"log": true, "show": true, "diff": true, "rev-list": true, "shortlog": true, "rev-parse": true, "version": true}
	for sub, gs := range gitSubcommands {
		if exact[sub] {
			continue
		}
		fs := gs.flags()
		opts, ok := helpOptions(t, "git", sub, "-h")
		if !ok {
			t.Errorf("git %s -h printed no options", sub)
			continue
		}
		for long := range fs.long {
			// parse-options negates every option (--no-x for --x, --x
			// for an option named no-x).
			neg, isNeg := strings.CutPrefix(long, "no-")
			if !opts[long] && !(isNeg && opts[neg]) && !opts["no-"+long] {
				t.Errorf("git %s: allowed flag --%s is not in `git %s -h` output", sub, long, sub)
			}
		}
	}
}
