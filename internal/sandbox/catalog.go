package sandbox

// catalog holds every built-in validator by program name. DefaultPolicy
// takes DefaultCommands from it; Policy.Enable adds others.
var catalog = map[string]Validator{
	"find": validateFind,
	"git":  validateGit,
	"grep": validateGrep,
	"rg":   validateRg,
	"sed":  validateSed,
	"awk":  validateAwk,
	"tar":  validateTar,
}

func init() {
	for name, sc := range simpleCommands {
		catalog[name] = simpleValidator(lazyFlags(sc.flags), sc.operands)
	}
}

// simpleCommand is a program checked by its flag list alone.
type simpleCommand struct {
	flags    string // see FlagSet
	operands OperandKind
}

// simpleCommands are the catalog's programs without a custom validator:
// cat, cp, diff, head, ls, printenv, pwd, sort, tail, wc and which of the
// default list (VT Code's, completed: cp's operands are write paths,
// confined to the workspace and never under .git), and the others for
// Policy.Enable.
var simpleCommands = map[string]simpleCommand{
	"basename":  {"-a -s= -z --multiple --suffix= --zero", OperandsText},
	"cat":       {catFlags, OperandsPaths},
	"cmp":       {"-b -l -s -n# -i= --print-bytes --verbose --quiet --silent --bytes# --ignore-initial=", OperandsPaths},
	"comm":      {"-1 -2 -3 -z --check-order --nocheck-order --output-delimiter= --total --zero-terminated", OperandsPaths},
	"cp":        {cpFlags, OperandsWritePaths},
	"cut":       {"-b= -c= -d= -f= -n -s -z --bytes= --characters= --delimiter= --fields= --complement --only-delimited --output-delimiter= --zero-terminated", OperandsPaths},
	"date":      {"-u -I? -R --utc --universal --iso-8601? --rfc-email --rfc-3339=", OperandsText},
	"diff":      {diffFlags, OperandsPaths},
	"dirname":   {"-z --zero", OperandsText},
	"du":        {"-a -b -c -h -k -m -s -x -d# --all --bytes --total --human-readable --summarize --max-depth# --apparent-size --one-file-system --si", OperandsPaths},
	"echo":      {"-n -e -E", OperandsText},
	"false":     {"", OperandsText},
	"head":      {headFlags, OperandsPaths},
	"ls":        {lsFlags, OperandsPaths},
	"md5sum":    {"-b -t -z --binary --text --zero", OperandsPaths},
	"mkdir":     {"-p -v --parents --verbose", OperandsWritePaths},
	"mv":        {mvFlags, OperandsWritePaths},
	"nl":        {"-b= -n= -s= -v# -w# -i# --body-numbering= --number-format= --number-separator= --starting-line-number# --number-width# --line-increment#", OperandsPaths},
	"printenv":  {"-0 --null", OperandsText},
	"pwd":       {"-L -P", OperandsNone},
	"realpath":  {"-e -m -s -q -z --canonicalize-existing --canonicalize-missing --no-symlinks --strip --quiet --zero --relative-to@ --relative-base@", OperandsPaths},
	"rm":        {"-f -r -R -d -v -i --force --recursive --dir --verbose", OperandsWritePaths},
	"rmdir":     {"-p -v --parents --verbose --ignore-fail-on-non-empty", OperandsWritePaths},
	"seq":       {"-w -s= -f= --equal-width --separator= --format=", OperandsText},
	"sha256sum": {"-b -t -z --binary --text --zero", OperandsPaths},
	"sleep":     {"", OperandsText},
	"sort":      {sortFlags, OperandsPaths},
	"stat":      {"-c= -f -t -L --format= --printf= --file-system --terse --dereference", OperandsPaths},
	"tac":       {"-b -r -s= --before --regex --separator=", OperandsPaths},
	"tail":      {tailFlags, OperandsPaths},
	"touch":     {"-a -c -m -d= -t= -h --no-create --date= --no-dereference --time=", OperandsWritePaths},
	"tr":        {"-c -C -d -s -t --complement --delete --squeeze-repeats --truncate-set1", OperandsText},
	"true":      {"", OperandsText},
	"uniq":      {"-c -d -D -f# -i -s# -u -w# -z --count --repeated --all-repeated? --skip-fields# --ignore-case --skip-chars# --unique --check-chars# --zero-terminated --group?", OperandsPaths},
	"wc":        {wcFlags, OperandsPaths},
	"which":     {"-a -s", OperandsText},
}

// Flag lists of the simple programs. Flags that run another program, write
// to an arbitrary place or follow symlinks out of the tree are absent on
// purpose (ls -L, sort --compress-program, diff --paginate, tail -f …).
const (
	catFlags = "-A -b -e -E -n -s -t -T -u -v --show-all --number-nonblank --number --squeeze-blank --show-ends --show-tabs --show-nonprinting"

	headFlags = "-# -n# -c# -q -v -z --lines# --bytes# --quiet --silent --verbose --zero-terminated"

	tailFlags = "-# -n# -c# -q -v -z --lines# --bytes# --quiet --silent --verbose --zero-terminated"

	wcFlags = "-c -m -l -L -w --bytes --chars --lines --max-line-length --words"

	lsFlags = "-a -A -b -B -c -C -d -f -F -g -G -h -i -I= -k -l -m -n -N -o -p -q -Q -r -R -s -S -t -T# -u -U -v -w# -x -X -Z -1 " +
		"--all --almost-all --author --escape --block-size= --ignore-backups --directory --classify? --file-type --format= " +
		"--full-time --group-directories-first --no-group --human-readable --si --hide= --hyperlink? --indicator-style= --inode " +
		"--ignore= --kibibytes --literal --numeric-uid-gid --hide-control-chars --show-control-chars --quote-name " +
		"--quoting-style= --reverse --recursive --size --sort= --time= --time-style= --tabsize# --width# --context --zero --color?"

	sortFlags = "-b -d -f -g -h -i -M -n -R -r -V -c -C -k= -t= -u -z -s -S= -o> -m " +
		"--ignore-leading-blanks --dictionary-order --ignore-case --general-numeric-sort --human-numeric-sort " +
		"--ignore-nonprinting --month-sort --numeric-sort --random-sort --reverse --version-sort --sort= " +
		"--check? --key= --field-separator= --unique --zero-terminated --stable --buffer-size= --output> " +
		"--parallel# --debug --merge --batch-size#"

	diffFlags = "-a -b -B -c -C# -d -e -E -i -I= -n -N -p -q -r -s -t -T -u -U# -w -W# -x= -X@ -y -Z " +
		"--text --ignore-space-change --ignore-blank-lines --context? --minimal --ed --ignore-tab-expansion " +
		"--ignore-case --ignore-matching-lines= --rcs --new-file --show-c-function --brief --report-identical-files " +
		"--expand-tabs --initial-tab --unified? --ignore-all-space --width# --exclude= --exclude-from@ " +
		"--side-by-side --ignore-trailing-space --strip-trailing-cr --label= --normal --no-dereference " +
		"--recursive --speed-large-files --suppress-common-lines --suppress-blank-empty --tabsize# " +
		"--unidirectional-new-file --ignore-file-name-case --no-ignore-file-name-case --from-file@ --to-file@ " +
		"--horizon-lines# --color? --left-column --show-function-line= --line-format="

	cpFlags = "-a -b -d -f -i -n -p -P -r -R -t> -T -u -v -x --archive --backup? --force --interactive " +
		"--no-clobber --no-dereference --preserve? --no-preserve= --parents --recursive --remove-destination " +
		"--strip-trailing-slashes --target-directory> --no-target-directory --update? --verbose --one-file-system"

	mvFlags = "-b -f -i -n -t> -T -u -v --backup? --force --interactive --no-clobber --strip-trailing-slashes " +
		"--target-directory> --no-target-directory --update? --verbose"
)
