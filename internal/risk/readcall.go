package risk

import "strings"

// IsReadCall reports whether a call of tool with args only looks: the tool's
// name files it under CategoryRead, and every SQL text in its args (under
// an SQL field anywhere, or a query or command field of a database tool:
// the fields where Classify reads SQL) is a single statement that reads.
// db.query {"sql": "DELETE FROM users WHERE id = 1"} is not a read,
// whatever its name says. The SQL test is deliberately narrow (readOnlySQL):
// a read it cannot tell from a write is not a read.
func IsReadCall(tool string, args map[string]any) bool {
	info := analyzeTool(tool)
	if info.cat != CategoryRead {
		return false
	}
	return sqlReadsOnly(info, args, "")
}

// sqlReadsOnly walks v, found under key, and reports whether every string
// where SQL is expected reads only.
func sqlReadsOnly(info toolInfo, v any, key string) bool {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if !sqlReadsOnly(info, e, strings.ToLower(k)) {
				return false
			}
		}
	case []any:
		for _, e := range t {
			if !sqlReadsOnly(info, e, key) {
				return false
			}
		}
	case string:
		if sqlKeys[key] || info.db && (dbSQLKeys[key] || commandKeys[key]) {
			return readOnlySQL(t)
		}
	}
	return true
}

// readFirstWords are the statements that read, when nothing else in the
// text says otherwise.
var readFirstWords = keySet("select", "with", "show", "describe", "desc", "explain", "values", "table")

// writeWords are words that, anywhere in an SQL text (a string literal
// included: the test cannot tell), make it more than a read: statements
// that change data, schema, grants or settings; SELECT … INTO and
// FOR UPDATE; EXPLAIN ANALYZE, which runs what it explains; and functions
// known to act (sequences, backends, large objects, files, other servers).
var writeWords = keySet(
	"insert", "update", "delete", "merge", "upsert", "replace", "drop", "alter", "create",
	"truncate", "grant", "revoke", "copy", "call", "do", "exec", "execute", "into", "for",
	"lock", "vacuum", "analyze", "analyse", "set", "reset", "comment", "refresh", "reindex",
	"cluster", "notify", "listen", "unlisten", "prepare", "deallocate", "load", "import",
	"attach", "detach", "pragma", "rename", "begin", "commit", "rollback", "savepoint",
	"discard", "checkpoint", "security", "handler", "install", "uninstall", "flush", "kill",
	"shutdown", "optimize", "repair", "purge", "restore", "backup", "dump", "outfile", "dumpfile",
	"nextval", "setval", "pg_terminate_backend", "pg_cancel_backend", "pg_reload_conf",
	"pg_rotate_logfile", "pg_switch_wal", "pg_promote", "lo_import", "lo_export", "lo_unlink",
	"lo_create", "lo_put", "dblink", "dblink_exec", "dblink_send_query", "pg_file_write",
	"xp_cmdshell", "sp_executesql", "load_file", "sys_exec", "sys_eval", "writefile",
	"pg_advisory_lock", "pg_advisory_xact_lock", "set_config", "txid_current", "pg_notify",
)

// readOnlySQL reports whether s is one SQL statement that reads: its first
// word is one of readFirstWords, no other statement follows a semicolon,
// and no word of writeWords appears anywhere in it (comments are not
// removed: a word in one counts too).
func readOnlySQL(s string) bool {
	s = strings.TrimSpace(s)
	s = strings.TrimSpace(strings.TrimSuffix(s, ";"))
	if s == "" || strings.Contains(s, ";") {
		return false
	}
	first := true
	for i := 0; i < len(s); {
		for i < len(s) && !isSQLWordByte(s[i]) {
			i++
		}
		start := i
		for i < len(s) && isSQLWordByte(s[i]) {
			i++
		}
		if start == i {
			break
		}
		w := strings.ToLower(s[start:i])
		if first && !readFirstWords[w] {
			return false
		}
		first = false
		if writeWords[w] {
			return false
		}
	}
	return !first
}

// isSQLWordByte: letters, digits and _ make an SQL word; any byte of a
// multi-byte character too, so that no letter outside ASCII splits a word
// into ones this test would read.
func isSQLWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
