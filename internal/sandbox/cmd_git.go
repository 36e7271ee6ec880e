package sandbox

import (
	"strings"
)

// Flags shared by the diff family (diff, log, show). Absent on purpose:
// --output (writes a file), --ext-diff and --textconv (run programs),
// -O (reads an order file), --no-index (compares files outside a repository).
const gitDiffFlags = "-p -u -s -U# -z -R -a -w -b -M? -C? -B? -D -l# -S= -G= " +
	"--patch --no-patch --unified# --raw --patch-with-raw --stat? --numstat --shortstat --dirstat? --cumulative " +
	"--summary --patch-with-stat --name-only --name-status --submodule? --color? --no-color --color-moved? " +
	"--no-color-moved --color-moved-ws= --word-diff? --word-diff-regex= --color-words? --no-renames " +
	"--rename-empty --no-rename-empty --check --ws-error-highlight= --full-index --binary --abbrev? " +
	"--break-rewrites? --find-renames? --find-copies? --find-copies-harder --irreversible-delete " +
	"--diff-filter= --pickaxe-all --pickaxe-regex --find-object= --text --ignore-cr-at-eol " +
	"--ignore-space-at-eol --ignore-space-change --ignore-all-space --ignore-blank-lines " +
	"--ignore-matching-lines= --inter-hunk-context# --function-context --exit-code --quiet --no-ext-diff " +
	"--no-textconv --ignore-submodules? --src-prefix= --dst-prefix= --no-prefix --default-prefix " +
	"--line-prefix= --relative? --no-relative --minimal --patience --histogram --anchored= --diff-algorithm= " +
	"--indent-heuristic --no-indent-heuristic --stat-width# --stat-name-width# --stat-count# " +
	"--compact-summary --output-indicator-new= --output-indicator-old= --output-indicator-context= "

// Flags of the log family (log, show, rev-list, shortlog). Absent on
// purpose: --show-signature (runs gpg), -L (line log), --stdin.
const gitLogFlags = "-# -n# -i -E -F -P -g -m -c -t -r " +
	"--max-count# --skip# --since= --after= --until= --before= --author= --committer= --grep= " +
	"--grep-reflog= --all-match --invert-grep --regexp-ignore-case --basic-regexp --extended-regexp " +
	"--fixed-strings --perl-regexp --remove-empty --merges --no-merges --min-parents# --max-parents# " +
	"--no-min-parents --no-max-parents --first-parent --exclude-first-parent-only --not --all --branches? " +
	"--tags? --remotes? --glob= --exclude= --reflog --single-worktree --ignore-missing --cherry-mark " +
	"--cherry-pick --left-only --right-only --cherry --walk-reflogs --merge --boundary " +
	"--simplify-by-decoration --full-history --dense --sparse --simplify-merges --ancestry-path? " +
	"--show-pulls --topo-order --date-order --author-date-order --reverse --no-walk? --do-walk --pretty? " +
	"--format= --abbrev-commit --no-abbrev-commit --oneline --encoding= --expand-tabs? --no-expand-tabs " +
	"--notes? --no-notes --show-notes? --standard-notes --no-standard-notes --relative-date --date= " +
	"--parents --children --left-right --graph --show-linear-break? --decorate? --no-decorate " +
	"--decorate-refs= --decorate-refs-exclude= --clear-decorations --source --use-mailmap --no-use-mailmap " +
	"--mailmap --no-mailmap --full-diff --log-size --follow --no-follow --cc --dd --diff-merges= " +
	"--no-diff-merges --combined-all-paths --count --timestamp "

// gitSub is how one allowed git subcommand is checked.
type gitSub struct {
	flags    func() *FlagSet
	operands OperandKind
	pattern  bool // the first operand is a pattern unless -e or -f gave one
}

// gitSubcommands is the read-mostly allowlist. Absent on purpose: config,
// remote, fetch, pull, push, clone, ls-remote, submodule, worktree (the
// server's own worktree tools do that), am, apply, rebase, merge,
// cherry-pick, revert, bisect, clean, gc, filter-branch, daemon, instaweb,
// credential, hook, difftool, mergetool, send-email, archive and anything
// that takes an --exec or a program.
var gitSubcommands = map[string]gitSub{
	"status": {flags: lazyFlags("-s -b -v -u? -z --short --branch --show-stash --porcelain? --long --verbose " +
		"--untracked-files? --ignored? --ignore-submodules? --column? --no-column --ahead-behind " +
		"--no-ahead-behind --renames --no-renames --find-renames?")},
	"log":  {flags: lazyFlags(gitLogFlags + gitDiffFlags)},
	"show": {flags: lazyFlags(gitLogFlags + gitDiffFlags)},
	"diff": {flags: lazyFlags(gitDiffFlags + "--cached --staged --merge-base --base --ours --theirs")},
	"add": {flags: lazyFlags("-n -v -f -A -u -N --dry-run --verbose --force --update --all --no-all " +
		"--ignore-removal --no-ignore-removal --intent-to-add --refresh --ignore-errors --ignore-missing " +
		"--renormalize --sparse")},
	"commit": {flags: lazyFlags("-a -q -s -n -m= -F@ -o -i -C= --all --quiet --signoff --no-signoff " +
		"--no-verify --message= --file@ --only --include --amend --no-edit --allow-empty " +
		"--allow-empty-message --author= --date= --cleanup= --fixup= --squash= --no-gpg-sign --reset-author " +
		"--dry-run --short --porcelain --long --untracked-files? --no-status --status --trailer= " +
		"--reuse-message= --no-post-rewrite")},
	"branch": {flags: lazyFlags("-a -r -l -v -q -d -D -m -M -f -i --list --all --remotes --verbose --quiet " +
		"--show-current --contains? --no-contains? --merged? --no-merged? --points-at= --sort= --format= " +
		"--color? --no-color --column? --no-column --abbrev? --no-abbrev --ignore-case " +
		"--delete --move --create-reflog --no-track --force"), operands: OperandsText},
	"rev-parse": {flags: lazyFlags("-q --quiet --verify --short? --abbrev-ref? --symbolic --symbolic-full-name " +
		"--all --branches? --tags? --remotes? --show-toplevel --show-prefix --show-cdup --git-dir " +
		"--git-common-dir --absolute-git-dir --is-inside-work-tree --is-inside-git-dir --is-bare-repository " +
		"--is-shallow-repository --show-superproject-working-tree --show-object-format? --default= " +
		"--revs-only --no-revs --flags --no-flags --not")},
	"ls-files": {flags: lazyFlags("-c -d -m -o -i -s -u -k -z -t -v -f -x= -X@ --cached --deleted --modified " +
		"--others --ignored --stage --unmerged --killed --directory --no-empty-directory --eol --exclude= " +
		"--exclude-from@ --exclude-per-directory= --exclude-standard --error-unmatch --full-name --abbrev? " +
		"--deduplicate --sparse --format=")},
	"checkout": {flags: lazyFlags("-q -f -b= -B= -m -t --quiet --force --detach --ours --theirs --merge " +
		"--no-track --track? --guess --no-guess --ignore-skip-worktree-bits --overlay --no-overlay " +
		"--progress --no-progress --orphan= --ignore-other-worktrees")},
	"switch": {flags: lazyFlags("-c= -C= -d -f -q -m -t --create= --force-create= --detach --force " +
		"--discard-changes --quiet --merge --guess --no-guess --track? --no-track --orphan= --progress " +
		"--no-progress --ignore-other-worktrees")},
	"restore": {flags: lazyFlags("-s= -S -W -q -m --source= --staged --worktree --quiet --ours --theirs " +
		"--merge --ignore-unmerged --overlay --no-overlay --progress --no-progress --ignore-skip-worktree-bits")},
	"rm": {flags: lazyFlags("-f -n -q -r --force --dry-run --quiet --cached --ignore-unmatch --sparse"),
		operands: OperandsWritePaths},
	"mv": {flags: lazyFlags("-f -k -n -v --force --dry-run --verbose --sparse"), operands: OperandsWritePaths},
	"reset": {flags: lazyFlags("-q -N --quiet --soft --mixed --hard --keep --no-refresh " +
		"--intent-to-add")},
	"blame": {flags: lazyFlags("-b -c -e -f -l -n -p -s -t -w -L= -M? -C? --root --show-stats --show-name " +
		"--show-number --show-email --porcelain --line-porcelain --incremental --score-debug --abbrev? " +
		"--progress --no-progress --ignore-rev= --minimal")},
	"grep": {flags: lazyFlags("-a -c -E -F -G -P -h -H -i -I -l -L -n -o -p -q -r -v -w -W -z -e= -f@ -m# " +
		"-A# -B# -C# -# --text --count --extended-regexp --fixed-strings --basic-regexp --perl-regexp " +
		"--ignore-case --files-with-matches --name-only --files-without-match --line-number " +
		"--no-line-number --column --only-matching --show-function --quiet --recursive --no-recursive " +
		"--invert-match --word-regexp --function-context --null --max-count# --max-depth# --after-context# " +
		"--before-context# --context# --cached --untracked --exclude-standard --no-exclude-standard " +
		"--full-name --break --heading --and --or --not --all-match --threads# --color? --no-color"),
		pattern: true},
	"cat-file":   {flags: lazyFlags("-t -s -e -p --mailmap --use-mailmap"), operands: OperandsText},
	"merge-base": {flags: lazyFlags("-a --all --octopus --independent --is-ancestor --fork-point"), operands: OperandsText},
	"describe": {flags: lazyFlags("--all --tags --contains --abbrev# --candidates# --exact-match --debug " +
		"--long --match= --exclude= --always --first-parent --dirty? --broken?"), operands: OperandsText},
	"tag": {flags: lazyFlags("-l -i --list --sort= --contains? --no-contains? --points-at= --merged? " +
		"--no-merged? --format= --color? --column? --no-column --ignore-case"),
		operands: OperandsText},
	"show-ref": {flags: lazyFlags("-q -s -d --head --heads --tags --verify --quiet --dereference " +
		"--hash? --abbrev?"), operands: OperandsText},
	"ls-tree": {flags: lazyFlags("-d -r -t -l -z --long --name-only --name-status --object-only --full-name " +
		"--full-tree --abbrev? --format=")},
	"rev-list": {flags: lazyFlags(gitLogFlags)},
	"shortlog": {flags: lazyFlags("-n -s -e -c --numbered --summary --email --committer --group= --format= " +
		"--all --since= --after= --until= --before= --author= --no-merges --merges --first-parent")},
	"version": {flags: lazyFlags("--build-options"), operands: OperandsNone},
}

// validateGit checks git [global options] SUBCOMMAND [args]. Global options
// are limited to -C (inside the workspace) and harmless switches; -c,
// --config-env, --exec-path, --git-dir, --work-tree, --namespace and the
// pager options are refused. The subcommand must be on the allowlist and
// its flags on its list. Finally the repository's config is checked for
// programs git could run.
func validateGit(c *Checker, args []string) error {
	i := 0
	cur := c
	for ; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			break
		}
		switch a {
		case "-C":
			if i+1 >= len(args) {
				return c.Refuse("-C needs a directory")
			}
			i++
			d, err := cur.Dir(args[i])
			if err != nil {
				return err
			}
			cur = d
		case "--no-pager", "-P", "--no-replace-objects", "--literal-pathspecs", "--glob-pathspecs",
			"--noglob-pathspecs", "--icase-pathspecs", "--no-optional-locks", "--no-lazy-fetch", "--no-advice":
		case "--version":
			if i != len(args)-1 {
				return c.Refuse("--version takes nothing after it")
			}
			return nil
		default:
			name, _, _ := strings.Cut(a, "=")
			return c.Refuse("%s is not allowed", quote(name))
		}
	}
	if i >= len(args) {
		return c.Refuse("a subcommand is required")
	}
	subName := args[i]
	sub, ok := gitSubcommands[subName]
	if !ok {
		return c.Refuse("subcommand %s is not allowed", quote(subName))
	}
	sc := cur.forCommand("git " + subName)
	p, err := sub.flags().parse(sc, args[i+1:])
	if err != nil {
		return err
	}
	ops := p.operands
	if sub.pattern && !p.has("-e", "-f") && len(ops) > 0 {
		ops = ops[1:]
	}
	switch sub.operands {
	case OperandsText:
		// Names and revisions; still refuse anything that looks like a
		// path out of the workspace.
		for _, o := range ops {
			if strings.HasPrefix(o, "/") || o == ".." || strings.HasPrefix(o, "../") {
				if err := sc.Path(o); err != nil {
					return err
				}
			}
		}
	default:
		if err := checkOperands(sc, ops, sub.operands); err != nil {
			return err
		}
	}
	return checkGitRepo(c.forCommand("git"), cur.cwd)
}
