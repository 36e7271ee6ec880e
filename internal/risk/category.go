package risk

// Category is what kind of effect a tool has, derived from its name.
type Category string

// The tool categories. When a name mixes several (for example
// "payments.list"), the most sensitive one wins, in the order credential,
// payment, delete, exec, network, write, read.
const (
	// CategoryRead tools only look: fs.read, file.get, db.query, search.
	CategoryRead Category = "read"
	// CategoryWrite tools change local state: fs.write, worktree.*.
	CategoryWrite Category = "write"
	// CategoryExec tools run code: exec, shell.run, bash, python.exec.
	CategoryExec Category = "exec"
	// CategoryNetwork tools reach outside: http.get, web.fetch, email.send.
	CategoryNetwork Category = "network"
	// CategoryPayment tools move money: payments.send, stripe.charge, pay.
	CategoryPayment Category = "payment"
	// CategoryDelete tools destroy data: fs.delete, db.drop, rm.
	CategoryDelete Category = "delete"
	// CategoryCredential tools touch secrets: secrets.get, vault.read,
	// token.create.
	CategoryCredential Category = "credential"
	// CategoryUnknown is any tool whose name says nothing recognisable.
	CategoryUnknown Category = "unknown"
)

// BaseScore is the score a call to a tool of category c starts from before
// any argument signal: read 5, unknown 25, write 30, network 35, exec 50,
// payment 50, delete 55, credential 70. An unrecognised category scores like
// CategoryUnknown.
func (c Category) BaseScore() int {
	switch c {
	case CategoryRead:
		return 5
	case CategoryWrite:
		return 30
	case CategoryNetwork:
		return 35
	case CategoryExec:
		return 50
	case CategoryPayment:
		return 50
	case CategoryDelete:
		return 55
	case CategoryCredential:
		return 70
	}
	return 25
}

// catRank orders categories for "most sensitive wins".
func catRank(c Category) int {
	switch c {
	case CategoryRead:
		return 1
	case CategoryWrite:
		return 2
	case CategoryNetwork:
		return 3
	case CategoryExec:
		return 4
	case CategoryDelete:
		return 5
	case CategoryPayment:
		return 6
	case CategoryCredential:
		return 7
	}
	return 0
}

// CategoryOf derives a tool's category from its name. The name is split into
// words on '.', '_', '-', '/', ':', spaces and camelCase boundaries and
// compared case-insensitively against known verbs and nouns; the most
// sensitive match wins. Every worktree.* tool is a write. A name with no
// known word is CategoryUnknown.
func CategoryOf(tool string) Category { return analyzeTool(tool).cat }

// toolInfo is what the classifier learns from a tool name.
type toolInfo struct {
	cat   Category
	db    bool // talks to a database: SQL in its args is meaningful
	push  bool // pushes to a remote (git push)
	merge bool // merges branches
	later bool // schedules code to run later (cron, systemd, launchd)
}

const (
	traitDB uint8 = 1 << iota
	traitPush
	traitMerge
	traitLater
)

var categoryWords = map[string]Category{}

var traitWords = map[string]uint8{
	"db": traitDB, "sql": traitDB, "database": traitDB, "postgres": traitDB,
	"postgresql": traitDB, "pg": traitDB, "psql": traitDB, "mysql": traitDB,
	"sqlite": traitDB, "mariadb": traitDB, "mssql": traitDB, "oracle": traitDB,
	"bigquery": traitDB, "snowflake": traitDB, "redshift": traitDB,
	"clickhouse": traitDB, "duckdb": traitDB, "supabase": traitDB,
	"push":  traitPush,
	"merge": traitMerge,
	"cron":  traitLater, "crontab": traitLater, "systemd": traitLater,
	"launchd": traitLater, "autostart": traitLater,
}

// keyQualifiers make a following "key"/"keys" word a credential.
var keyQualifiers = map[string]bool{
	"api": true, "ssh": true, "private": true, "access": true, "secret": true,
	"signing": true, "gpg": true, "pgp": true, "encryption": true, "master": true,
}

func init() {
	add := func(c Category, words ...string) {
		for _, w := range words {
			categoryWords[w] = c
		}
	}
	add(CategoryRead, "read", "reads", "readdir", "readfile", "get", "list",
		"ls", "listdir", "query", "search", "find", "grep", "cat", "head",
		"tail", "view", "show", "describe", "stat", "lookup", "select",
		"count", "glob", "open", "load", "inspect", "status", "retrieve",
		"info", "peek", "preview", "diff", "logs", "tree")
	add(CategoryWrite, "write", "writefile", "put", "set", "create", "update",
		"edit", "patch", "insert", "upsert", "append", "save", "modify",
		"mkdir", "move", "mv", "rename", "copy", "cp", "commit", "merge",
		"push", "apply", "replace", "store", "install", "chmod", "chown",
		"touch", "add", "schedule", "deploy", "worktree")
	add(CategoryExec, "exec", "execute", "run", "shell", "sh", "bash", "zsh",
		"cmd", "command", "terminal", "console", "powershell", "pwsh",
		"python", "python3", "node", "nodejs", "ruby", "perl", "php",
		"script", "eval", "spawn", "subprocess", "repl", "interpreter",
		"jupyter", "notebook")
	add(CategoryNetwork, "http", "https", "web", "fetch", "url", "curl",
		"wget", "request", "browse", "browser", "navigate", "email", "mail",
		"gmail", "smtp", "send", "webhook", "slack", "sms", "twilio", "tweet",
		"post", "download", "upload", "net", "network", "socket", "dns",
		"ping", "api", "notify", "publish", "scrape", "crawl", "ftp",
		"telegram", "discord", "teams")
	add(CategoryPayment, "pay", "payment", "payments", "stripe", "paypal",
		"wallet", "charge", "refund", "payout", "payouts", "billing",
		"purchase", "buy", "checkout", "bank", "banking", "wire", "invoice",
		"invoices", "money", "spend", "funds", "venmo", "braintree", "adyen")
	add(CategoryDelete, "delete", "del", "remove", "rm", "rmdir", "unlink",
		"drop", "truncate", "destroy", "purge", "wipe", "erase", "shred")
	add(CategoryCredential, "secret", "secrets", "credential", "credentials",
		"cred", "creds", "token", "password", "passwords", "passwd", "vault",
		"keychain", "keyring", "apikey", "apikeys", "kms", "auth", "oauth",
		"login", "otp", "totp", "mfa")
}

// maxToolLen bounds the part of a tool name that is looked at.
const maxToolLen = 256

// analyzeTool splits a tool name into words and derives its category and
// traits, without allocating.
func analyzeTool(tool string) toolInfo {
	if len(tool) > maxToolLen {
		tool = tool[:maxToolLen]
	}
	info := toolInfo{cat: CategoryUnknown}
	var buf, prev [32]byte
	prevN, words := 0, 0
	worktree := false
	for i := 0; i < len(tool); {
		for i < len(tool) && !isToolWordByte(tool[i]) {
			i++
		}
		if i >= len(tool) {
			break
		}
		start := i
		i++
		for i < len(tool) && isToolWordByte(tool[i]) && !camelBreak(tool, i) {
			i++
		}
		n := lowerInto(buf[:], tool[start:i])
		if n == 0 {
			prevN = 0
			continue
		}
		word := buf[:n]
		if words == 0 && string(word) == "worktree" {
			worktree = true
		}
		words++
		c, ok := categoryWords[string(word)]
		if (string(word) == "key" || string(word) == "keys") && keyQualifiers[string(prev[:prevN])] {
			c, ok = CategoryCredential, true
		}
		if ok && catRank(c) > catRank(info.cat) {
			info.cat = c
		}
		t := traitWords[string(word)]
		info.db = info.db || t&traitDB != 0
		info.push = info.push || t&traitPush != 0
		info.merge = info.merge || t&traitMerge != 0
		info.later = info.later || t&traitLater != 0
		prevN = copy(prev[:], word)
	}
	if worktree {
		info.cat = CategoryWrite
	}
	if info.db && info.cat == CategoryExec {
		// db.execute, sql.run: running SQL changes data but runs no program.
		info.cat = CategoryWrite
	}
	return info
}

func isToolWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isLower(c byte) bool { return c >= 'a' && c <= 'z' }

// camelBreak reports whether a new word starts at s[i]: "readFile" splits
// before 'F', "HTTPGet" before 'G'.
func camelBreak(s string, i int) bool {
	if !isUpper(s[i]) {
		return false
	}
	if isLower(s[i-1]) || s[i-1] >= '0' && s[i-1] <= '9' {
		return true
	}
	return isUpper(s[i-1]) && i+1 < len(s) && isLower(s[i+1])
}

// lowerInto writes the ASCII-lowercased word into buf and returns its
// length, or 0 when the word does not fit (no known word is that long).
func lowerInto(buf []byte, word string) int {
	if len(word) > len(buf) {
		return 0
	}
	for i := 0; i < len(word); i++ {
		c := word[i]
		if isUpper(c) {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return len(word)
}
