package sandbox

// grep: -R / --dereference-recursive (follows symlinks while recursing) and
// device/preprocessor options are absent; -f reads a pattern file inside
// the workspace.
const grepFlags = "-E -F -G -P -e= -f@ -i -y -v -w -x -c -L -l -o -q -s -b -H -h -n -T -Z -z -a -I -r -U -m# -A# -B# -C# -d= -D= -# " +
	"--extended-regexp --fixed-strings --basic-regexp --perl-regexp --regexp= --file@ --ignore-case --no-ignore-case " +
	"--word-regexp --line-regexp --null-data --no-messages --invert-match --max-count# --byte-offset --line-number " +
	"--line-buffered --with-filename --no-filename --label= --only-matching --quiet --silent " +
	"--binary-files= --text --recursive --include= --exclude= --exclude-from@ --exclude-dir= --files-without-match " +
	"--files-with-matches --count --initial-tab --null --before-context# --after-context# --context# --color? --colour? " +
	"--directories= --devices="

var grepFlagSet = lazyFlags(grepFlags)

// validateGrep checks grep: the first operand is the pattern unless -e or
// -f gave one; the rest are paths.
func validateGrep(c *Checker, args []string) error {
	p, err := grepFlagSet().parse(c, args)
	if err != nil {
		return err
	}
	for _, v := range p.values("-d", "--directories") {
		if v != "read" && v != "skip" && v != "recurse" {
			return c.Refuse("--directories=%s is not allowed", quote(v))
		}
	}
	for _, v := range p.values("-D", "--devices") {
		if v != "read" && v != "skip" {
			return c.Refuse("--devices=%s is not allowed", quote(v))
		}
	}
	ops := p.operands
	if !p.has("-e", "--regexp", "-f", "--file") {
		if len(ops) == 0 {
			return c.Refuse("a pattern is required")
		}
		ops = ops[1:]
	}
	return checkOperands(c, ops, OperandsPaths)
}

// rg: --pre, --pre-glob, -z/--search-zip (run other programs),
// -L/--follow (follows symlinks out of the tree), --hostname-bin (runs a
// program) and config-file options are absent. --no-config is allowed; the
// sandbox's environment never carries RIPGREP_CONFIG_PATH anyway.
const rgFlags = "-a -A# -B# -b -C# -c -d# -E= -e= -F -f@ -g= -H -h -I -i -j# -l -M# -m# -N -n -o -P -p -q -r= -S -s -T= -t= -U -u -v -w -x -0 " +
	"--text --after-context# --before-context# --byte-offset --context# --count --count-matches --max-depth# " +
	"--encoding= --regexp= --fixed-strings --file@ --glob= --iglob= --with-filename --no-filename --ignore-case " +
	"--threads# --files-with-matches --files-without-match --max-columns# --max-count# --no-line-number " +
	"--line-number --only-matching --pcre2 --pretty --quiet --replace= --smart-case --case-sensitive --type-not= " +
	"--type= --multiline --multiline-dotall --unrestricted --invert-match --word-regexp --line-regexp --null " +
	"--hidden --no-hidden --no-ignore --no-ignore-vcs --no-ignore-parent --no-ignore-dot --no-ignore-global " +
	"--no-ignore-exclude --no-ignore-files --no-ignore-messages --files --json --no-json --column --no-column " +
	"--heading --no-heading --color= --sort= --sortr= --trim --no-trim --stats --vimgrep --no-messages --binary " +
	"--no-binary --no-config --type-list --max-filesize= --one-file-system --passthru --crlf --no-crlf " +
	"--line-buffered --block-buffered --context-separator= --no-context-separator --field-match-separator= " +
	"--field-context-separator= --path-separator= --ignore-file@ --ignore-file-case-insensitive --dfa-size-limit= " +
	"--regex-size-limit= --engine= --auto-hybrid-regex --no-pcre2-unicode --no-unicode --include-zero " +
	"--null-data --max-columns-preview --no-max-columns-preview --glob-case-insensitive --no-glob-case-insensitive " +
	"--unicode"

var rgFlagSet = lazyFlags(rgFlags)

// validateRg checks ripgrep: the first operand is the pattern unless -e,
// -f, --files or --type-list; the rest are paths.
func validateRg(c *Checker, args []string) error {
	p, err := rgFlagSet().parse(c, args)
	if err != nil {
		return err
	}
	ops := p.operands
	if !p.has("-e", "--regexp", "-f", "--file", "--files", "--type-list") {
		if len(ops) == 0 {
			return c.Refuse("a pattern is required")
		}
		ops = ops[1:]
	}
	return checkOperands(c, ops, OperandsPaths)
}
