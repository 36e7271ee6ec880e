package risk

import (
	"regexp"
	"strings"
)

// A textRule is a pattern with the literal trigger strings of which at least
// one must occur in the text for the pattern to possibly match; the cheap
// strings.Contains prefilter keeps most texts away from the regexp.
type textRule struct {
	triggers []string
	re       *regexp.Regexp
}

// compileRule builds a textRule.
func compileRule(triggers []string, pattern string) textRule {
	return textRule{triggers: triggers, re: regexp.MustCompile(pattern)}
}

// A cmdRule detects one kind of dangerous command in command-like text
// (shell strings, joined argv, SQL). check turns a match into a signal, or
// reports false when the match turns out harmless.
type cmdRule struct {
	textRule
	sql   bool // applies only where SQL is expected
	check func(m []string) (cmdHit, bool)
}

// cmdHit is what a cmdRule found.
type cmdHit struct {
	kind   signalKind
	weight int
	floor  Level
	reason string
}

// simpleCmd is a check that reports the same hit for every match.
func simpleCmd(kind signalKind, weight int, floor Level, reason string) func([]string) (cmdHit, bool) {
	return func([]string) (cmdHit, bool) { return cmdHit{kind, weight, floor, reason}, true }
}

// cmdStart is what may precede a command word: start of text, whitespace, a
// shell operator, a quote, or a path ("/bin/rm").
const cmdStart = `(?:^|[\s;&|({\x60'"/])`

// cmdRules are the dangerous-command detectors, applied to normalised
// (lowercase) command text.
var cmdRules = []cmdRule{
	{
		textRule: compileRule([]string{"rm"}, cmdStart+`rm((?:[ \t]+[^\s;&|)}\x60]+)*)`),
		check:    checkRm,
	},
	{
		textRule: compileRule([]string{"mkfs", "mke2fs", "wipefs"}, cmdStart+`(mkfs(?:\.[a-z0-9]+)?|mke2fs|wipefs)\b`),
		check: func(m []string) (cmdHit, bool) {
			return cmdHit{kindMkfs, 40, Critical, "filesystem format: " + m[1]}, true
		},
	},
	{
		textRule: compileRule([]string{"/dev/"}, `(?:\bof=|>[ \t]*)(/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk|rdisk|mapper/|md|dm-|loop)[a-z0-9/_-]*)`),
		check: func(m []string) (cmdHit, bool) {
			return cmdHit{kindBlockDevice, 40, Critical, "raw write to block device " + m[1]}, true
		},
	},
	{
		textRule: compileRule([]string{"chmod"}, `\bchmod((?:[ \t]+[^\s;&|)}\x60]+)+)`),
		check:    checkChmod,
	},
	{
		textRule: compileRule([]string{"push"}, `\bgit\b[^;&|\n]*?[ \t]push\b([^;&|\n]*)`),
		check:    checkPush,
	},
	{
		textRule: compileRule([]string{"reset"}, `\bgit\b[^;&|\n]*?[ \t]reset\b[^;&|\n]*?[ \t]--hard\b`),
		check:    simpleCmd(kindGitDiscard, 15, "", "discards work: git reset --hard"),
	},
	{
		textRule: compileRule([]string{"clean"}, `\bgit\b[^;&|\n]*?[ \t]clean\b[^;&|\n]*?[ \t]-[a-z]*f`),
		check:    simpleCmd(kindGitDiscard, 15, "", "discards work: git clean -f"),
	},
	{
		textRule: compileRule([]string{"drop"}, `\bdrop[ \t\n]+(table|database|schema|view|index|user|role|collection)\b`),
		sql:      true,
		check: func(m []string) (cmdHit, bool) {
			return cmdHit{kindSQLDrop, 30, High, "destructive SQL: DROP " + strings.ToUpper(m[1])}, true
		},
	},
	{
		textRule: compileRule([]string{"truncate"}, `\btruncate(?:[ \t\n]+table)?[ \t\n]+[a-z_"\x60\[]`),
		sql:      true,
		check:    simpleCmd(kindSQLDrop, 30, High, "destructive SQL: TRUNCATE"),
	},
	{
		textRule: compileRule([]string{"delete"}, `\bdelete[ \t\n]+from[ \t\n]+[a-z0-9_."\x60\[\]]+[ \t\n]*(?:;|\z)`),
		sql:      true,
		check:    simpleCmd(kindSQLDeleteAll, 20, High, "destructive SQL: DELETE without WHERE"),
	},
	{
		textRule: compileRule([]string{"shutdown", "reboot", "halt", "poweroff", "init"},
			cmdStart+`(shutdown|reboot|halt|poweroff)\b|\binit[ \t]+[06]\b|\bsystemctl[ \t]+(?:poweroff|reboot|halt|kexec)\b`),
		check: simpleCmd(kindShutdown, 25, High, "shuts down or reboots the host"),
	},
	{
		textRule: compileRule([]string{"curl", "wget", "fetch", "base64"},
			`\b(?:curl|wget|fetch)\b[^;&\n]*\|[ \t]*(?:sudo[ \t]+)?(?:(?:ba|z|da|k|fi)?sh|python[0-9.]*|perl|ruby|node)\b`+
				`|\b(?:ba|z)?sh\b[^;&\n]*(?:<\(|\$\()[ \t]*(?:curl|wget)\b`+
				`|\bbase64[ \t]+(?:-d|--decode)\b[^;&\n]*\|[ \t]*(?:sudo[ \t]+)?(?:ba|z)?sh\b`),
		check: simpleCmd(kindPipeShell, 30, High, "pipes downloaded or encoded script into a shell"),
	},
	{
		textRule: compileRule([]string{"/dev/tcp", "/dev/udp", "nc", "netcat", "socat"},
			`/dev/(?:tcp|udp)/|\b(?:nc|ncat|netcat)\b[^;&|\n]*[ \t]-[a-z]*[ec]\b|\bsocat\b[^;&|\n]*exec:`),
		check: simpleCmd(kindReverseShell, 40, Critical, "reverse shell"),
	},
	{
		textRule: compileRule([]string{"(){", "() {"}, `:[ \t]*\(\)[ \t]*\{[ \t]*:[ \t]*\|[ \t]*:[ \t]*&[ \t]*\}[ \t]*;[ \t]*:`),
		check:    simpleCmd(kindForkBomb, 40, Critical, "fork bomb"),
	},
	{
		textRule: compileRule([]string{"sudo", "doas", "su"}, `(?:^|[\s;&|({\x60'"])(sudo|doas|su)(?:[ \t]|$)`),
		check: func(m []string) (cmdHit, bool) {
			return cmdHit{kindSudo, 15, "", "privilege escalation: " + m[1]}, true
		},
	},
	{
		textRule: compileRule([]string{"find"}, `\bfind\b[^;&|\n]*[ \t](?:-delete\b|-exec[ \t]+(?:/bin/)?rm\b)`),
		check:    simpleCmd(kindFindDelete, 15, "", "bulk delete: find -delete"),
	},
	{
		textRule: compileRule([]string{"shred"}, cmdStart+`shred\b`),
		check:    simpleCmd(kindShred, 20, High, "destructive command: shred"),
	},
	// Infrastructure and cloud tools that delete what they manage.
	{
		textRule: compileRule([]string{"kubectl", "oc"}, `\b(?:kubectl|oc)\b[^;&|\n]*?[ \t](delete|drain)\b([^;&|\n]*)`),
		check: func(m []string) (cmdHit, bool) {
			return cmdHit{kindCloudDestroy, 30, High, "destructive command: kubectl " + m[1]}, true
		},
	},
	{
		textRule: compileRule([]string{"terraform", "tofu"}, `\b(?:terraform|tofu)\b[^;&|\n]*?[ \t](?:destroy\b|apply\b[^;&|\n]*[ \t]-destroy\b|state[ \t]+rm\b)`),
		check:    simpleCmd(kindCloudDestroy, 30, High, "destructive command: terraform destroy"),
	},
	{
		textRule: compileRule([]string{"helm"}, `\bhelm\b[^;&|\n]*?[ \t](?:uninstall|delete|del|un)\b`),
		check:    simpleCmd(kindCloudDestroy, 30, High, "destructive command: helm uninstall"),
	},
	{
		textRule: compileRule([]string{"aws"}, `\baws\b[^;&|\n]*?[ \t](?:s3[ \t]+(?:rm\b[^;&|\n]*[ \t]--recursive\b|rb\b[^;&|\n]*[ \t]--force\b)|s3api[ \t]+delete-bucket\b|(delete-[a-z0-9-]+|terminate-instances|deregister-[a-z0-9-]+)\b)`),
		check:    simpleCmd(kindCloudDestroy, 30, High, "destructive command: aws delete"),
	},
	{
		textRule: compileRule([]string{"gcloud", "gsutil"}, `\bgcloud\b[^;&|\n]*?[ \t]delete\b|\bgsutil\b[^;&|\n]*?[ \t](?:rm[ \t]+[^;&|\n]*-[a-z]*r|rb)\b`),
		check:    simpleCmd(kindCloudDestroy, 30, High, "destructive command: gcloud delete"),
	},
	{
		textRule: compileRule([]string{"az"}, `\baz\b[^;&|\n]*?[ \t]delete\b`),
		check:    simpleCmd(kindCloudDestroy, 30, High, "destructive command: az delete"),
	},
}

// checkRm classifies an rm invocation by its flags and targets.
func checkRm(m []string) (cmdHit, bool) {
	recursive, force, noPreserve := false, false, false
	root := ""
	for _, arg := range strings.Fields(m[1]) {
		switch {
		case arg == "--":
		case strings.HasPrefix(arg, "--"):
			recursive = recursive || arg == "--recursive"
			force = force || arg == "--force"
			noPreserve = noPreserve || arg == "--no-preserve-root"
		case strings.HasPrefix(arg, "-") && len(arg) > 1:
			recursive = recursive || strings.ContainsAny(arg[1:], "r")
			force = force || strings.ContainsRune(arg[1:], 'f')
		default:
			if root == "" && isRootLevel(arg) {
				root = strings.Trim(arg, `'"`)
			}
		}
	}
	flags := "rm"
	switch {
	case recursive && force:
		flags = "rm -rf"
	case recursive:
		flags = "rm -r"
	}
	switch {
	case noPreserve || recursive && root != "":
		if root == "" {
			root = "/"
		}
		return cmdHit{kindRmRoot, 40, Critical, flags + ` on root-level path "` + root + `"`}, true
	case recursive:
		return cmdHit{kindRmRecursive, 20, High, "destructive command: " + flags}, true
	}
	return cmdHit{kindRmFile, 10, "", "deletes files: rm"}, true
}

// checkChmod flags recursive world-writable permission changes.
func checkChmod(m []string) (cmdHit, bool) {
	recursive, open := false, false
	for _, arg := range strings.Fields(m[1]) {
		switch {
		case arg == "--recursive", strings.HasPrefix(arg, "-") && !strings.HasPrefix(arg, "--") && strings.ContainsRune(arg, 'r'):
			recursive = true
		case arg == "777" || arg == "0777" || arg == "a+rwx" || arg == "ugo+rwx" || arg == "o+w" || arg == "a+w":
			open = true
		}
	}
	if recursive && open {
		return cmdHit{kindChmod, 20, High, "recursive chmod 777"}, true
	}
	return cmdHit{}, false
}

// checkPush flags force pushes: --force, --force-with-lease, -f, or a
// "+branch" refspec.
func checkPush(m []string) (cmdHit, bool) {
	for _, arg := range strings.Fields(m[1]) {
		switch {
		case strings.HasPrefix(arg, "--force"), arg == "--mirror":
			return cmdHit{kindForcePush, 20, High, "force push: git push " + arg}, true
		case strings.HasPrefix(arg, "-") && !strings.HasPrefix(arg, "--") && strings.ContainsRune(arg, 'f'):
			return cmdHit{kindForcePush, 20, High, "force push: git push " + arg}, true
		case strings.HasPrefix(arg, "+") && len(arg) > 1:
			return cmdHit{kindForcePush, 20, High, "force push: git push " + arg}, true
		}
	}
	return cmdHit{}, false
}

// scanCommand runs every command rule over norm (normalised command text,
// at most maxCommandText bytes) and reports each hit through emit.
func scanCommand(norm string, sqlOK bool, emit func(cmdHit)) {
	norm = truncateUTF8(norm, maxCommandText)
	for i := range cmdRules {
		r := &cmdRules[i]
		if r.sql && !sqlOK {
			continue
		}
		for _, m := range r.findAll(norm) {
			if hit, ok := r.check(m); ok {
				emit(hit)
			}
		}
	}
}

// maxCmdMatches bounds how many matches of one rule are examined per text.
const maxCmdMatches = 8

// maxCommandText bounds the command text the rules examine: real command
// lines are far shorter, and the caller reports when text was cut.
const maxCommandText = 64 << 10

// findAll returns the submatches of the matches of the rule in text (at
// most maxCmdMatches), after the trigger prefilter.
func (r *cmdRule) findAll(text string) [][]string {
	for _, t := range r.triggers {
		if strings.Contains(text, t) {
			return r.re.FindAllStringSubmatch(text, maxCmdMatches)
		}
	}
	return nil
}
