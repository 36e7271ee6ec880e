package risk

import "strings"

// IsReadCall reports whether a call of tool with args only looks: the tool's
// name files it under CategoryRead, and nothing in its args is SQL that
// does more than read. Two places are looked at:
//
//   - a field that holds SQL (sql, statement, stmt, any key naming sql,
//     and for a database tool query, q and the command fields), with
//     everything nested under it: each string there must be one statement
//     that reads (readOnlySQL);
//   - every other string, as written or normalised: one that starts as a
//     query (SELECT, WITH, EXPLAIN, …) must be one that reads, and none may
//     start a statement that writes (DELETE FROM, DROP TABLE, INSERT … INTO,
//     UPDATE … SET, …: writeStatementLine) wherever a statement can start
//     (writesSQL).
//
// db.query {"sql": "DELETE FROM users WHERE id = 1"} is not a read, whatever
// its name says. The test is deliberately narrow: a read it cannot tell
// from a write is not a read.
func IsReadCall(tool string, args map[string]any) bool {
	info := analyzeTool(tool)
	if info.cat != CategoryRead {
		return false
	}
	return readsOnly(info, args, false, 0)
}

// maxReadDepth bounds the walk; deeper args are not a read.
const maxReadDepth = 64

// readsOnly walks v; inSQL says it sits under a field that holds SQL.
func readsOnly(info toolInfo, v any, inSQL bool, depth int) bool {
	if depth > maxReadDepth {
		return false
	}
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if !readsOnly(info, e, inSQL || sqlField(info, keyName(k)), depth+1) {
				return false
			}
		}
	case []any:
		for _, e := range t {
			if !readsOnly(info, e, inSQL, depth+1) {
				return false
			}
		}
	case string:
		if inSQL {
			return readOnlySQL(t) // as written: a letter it does not know is no read
		}
		norm, _ := normalizeText(t, false)
		return !writesSQL(t) && (norm == t || !writesSQL(norm))
	}
	return true
}

// sqlField reports whether a field named key (keyName) holds SQL. A
// database tool's args, arguments and params are the values bound to a
// statement's placeholders, not SQL (writesSQL still reads them).
func sqlField(info toolInfo, key string) bool {
	return sqlKeys[key] || strings.Contains(key, "sql") ||
		info.db && (dbSQLKeys[key] || commandKeys[key] && !bindKeys[key])
}

// bindKeys are fields of placeholder values.
var bindKeys = keySet("args", "arguments", "params", "parameters", "bind", "binds", "values")

// writesSQL reports whether a statement that writes starts anywhere in s
// a statement can start: at its beginning, after a line break, a
// semicolon or an opening parenthesis (a CTE's body), comments aside.
func writesSQL(s string) bool {
	s = stripSQLComments(strings.ToLower(s))
	if w := sqlWords(strings.TrimLeft(s, " \t\r\n("), 1); len(w) == 1 && readFirstWords[w[0]] {
		// It starts as a query: it must be one (WITH … DELETE, SELECT …
		// INTO, EXPLAIN ANALYZE, setval(…) all start so).
		return !readOnlySQL(strings.TrimLeft(s, " \t\r\n"))
	}
	for _, stmt := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == ';' }) {
		if writeStatementLine(stmt) {
			return true
		}
		for _, part := range strings.FieldsFunc(stmt, func(r rune) bool { return r == '(' || r == ')' }) {
			if writeStatementLine(part) {
				return true
			}
		}
	}
	return false
}

// stripSQLComments replaces /* … */ and -- … comments of s with a space.
func stripSQLComments(s string) string {
	if !strings.Contains(s, "/*") && !strings.Contains(s, "--") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return b.String() + " "
			}
			b.WriteByte(' ')
			i += 2 + end + 2
		case strings.HasPrefix(s[i:], "--"):
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				return b.String() + " "
			}
			b.WriteByte(' ')
			i += end
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String()
}

// sqlObjects are what CREATE and ALTER make or change.
var sqlObjects = keySet("table", "view", "index", "schema", "database", "function", "procedure",
	"trigger", "sequence", "role", "user", "type", "extension", "materialized", "or", "unique",
	"temp", "temporary", "policy", "domain", "rule", "system", "default", "event", "server")

// writeStatementLine reports whether a lowercased line starts a statement
// that writes, with the word its grammar needs next: DELETE … FROM, DROP
// <object>, TRUNCATE [TABLE] name, INSERT/UPSERT/MERGE/
// REPLACE … INTO, UPDATE … SET, CREATE/ALTER <object>, GRANT/REVOKE … ON|TO,
// COPY … FROM|TO, CALL name(.
func writeStatementLine(line string) bool {
	words := sqlWords(line, 12)
	if len(words) < 2 {
		return false
	}
	has := func(ws ...string) bool {
		for _, w := range words[1:] {
			for _, x := range ws {
				if w == x {
					return true
				}
			}
		}
		return false
	}
	switch words[0] {
	case "delete":
		return has("from")
	case "drop":
		return sqlObjects[words[1]] || words[1] == "if" || words[1] == "owned" || words[1] == "tablespace"
	case "truncate":
		return words[1] == "table" || len(words) == 2 || has("restart", "continue", "cascade", "restrict")
	case "insert":
		return has("into", "values", "set", "select") // MySQL: INTO is optional
	case "upsert", "merge", "replace":
		return has("into")
	case "do": // DO $$ … $$, DO '…'
		rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "do"))
		return strings.HasPrefix(rest, "$") || strings.HasPrefix(rest, "'")
	case "prepare":
		return has("as")
	case "update":
		return has("set")
	case "create", "alter":
		return sqlObjects[words[1]]
	case "grant":
		return has("on") && has("to")
	case "revoke":
		return has("on") && has("from")
	case "copy":
		return has("from", "to")
	case "call":
		return strings.Contains(line, "(")
	}
	return false
}

// sqlWords returns up to n lowercased SQL words of s, in order.
func sqlWords(s string, n int) []string {
	var out []string
	for i := 0; i < len(s) && len(out) < n; {
		for i < len(s) && !isSQLWordByte(s[i]) {
			i++
		}
		start := i
		for i < len(s) && isSQLWordByte(s[i]) {
			i++
		}
		if start < i {
			out = append(out, strings.ToLower(s[start:i]))
		}
	}
	return out
}

// readFirstWords are the statements that read, when nothing else in the
// text says otherwise.
var readFirstWords = keySet("select", "with", "show", "describe", "desc", "explain", "values", "table")

// writeWords are words that, anywhere in an SQL text (a string literal or
// a comment included: the test cannot tell), make it more than a read:
// statements that change data, schema, grants or settings; SELECT … INTO
// and FOR UPDATE; EXPLAIN ANALYZE, which runs what it explains.
var writeWords = keySet(
	"insert", "update", "delete", "merge", "upsert", "replace", "drop", "alter", "create",
	"truncate", "grant", "revoke", "copy", "call", "do", "exec", "execute", "into", "for",
	"lock", "vacuum", "analyze", "analyse", "set", "reset", "comment", "refresh", "reindex",
	"cluster", "notify", "listen", "unlisten", "prepare", "deallocate", "load", "import",
	"attach", "detach", "pragma", "rename", "begin", "commit", "rollback", "savepoint",
	"discard", "checkpoint", "security", "handler", "install", "uninstall", "flush", "kill",
	"shutdown", "optimize", "repair", "purge", "restore", "backup", "dump", "outfile", "dumpfile",
	// functions known to act, whatever is written between them and "("
	"nextval", "setval", "pg_terminate_backend", "pg_cancel_backend", "pg_reload_conf",
	"pg_rotate_logfile", "pg_switch_wal", "pg_promote", "lo_import", "lo_export", "lo_unlink",
	"lo_create", "lo_put", "dblink", "dblink_exec", "pg_file_write", "xp_cmdshell",
	"sp_executesql", "load_file", "load_extension", "sys_exec", "sys_eval", "query_to_xml",
	"pg_advisory_lock", "pg_advisory_xact_lock", "set_config", "pg_notify", "pg_sleep",
)

// readFuncs are the functions (and the keywords written before a
// parenthesis) a query that reads may call: aggregates, window functions,
// and functions of strings, numbers, dates and JSON that only compute.
// Any other name before "(" (nextval, pg_terminate_backend, dblink,
// query_to_xml, a function of the database's own, …) is not a read.
var readFuncs = keySet(
	// keywords
	"in", "exists", "any", "all", "some", "values", "on", "using", "over", "filter", "within",
	"and", "or", "not", "as", "from", "join", "where", "when", "then", "else", "cast", "extract",
	"interval", "lateral", "row", "array", "between", "is", "select", "with", "by", "having",
	"group", "order", "partition", "distinct", "case", "like", "ilike", "union", "intersect",
	"except", "limit", "offset", "returning", "window", "table",
	// aggregates and windows
	"count", "sum", "avg", "min", "max", "array_agg", "string_agg", "json_agg", "jsonb_agg",
	"json_object_agg", "jsonb_object_agg", "bool_and", "bool_or", "every", "stddev", "variance",
	"percentile_cont", "percentile_disc", "mode", "group_concat", "total", "row_number", "rank",
	"dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead", "first_value", "last_value",
	"nth_value",
	// values
	"coalesce", "nullif", "greatest", "least", "ifnull", "iif", "isnull",
	"lower", "upper", "length", "char_length", "character_length", "octet_length", "substr",
	"substring", "trim", "ltrim", "rtrim", "btrim", "concat", "concat_ws", "left", "right",
	"position", "strpos", "instr", "split_part", "lpad", "rpad", "reverse", "initcap", "format",
	"to_char", "to_number", "to_date", "to_timestamp", "round", "abs", "floor", "ceil", "ceiling",
	"trunc", "mod", "power", "sqrt", "sign", "date_trunc", "date_part", "age", "now", "date",
	"time", "datetime", "julianday", "strftime", "unixepoch", "make_date", "make_interval",
	"json_extract", "jsonb_extract_path", "json_extract_path", "jsonb_extract_path_text",
	"json_extract_path_text", "jsonb_array_length", "json_array_length", "jsonb_typeof",
	"json_typeof", "jsonb_build_object", "json_build_object", "jsonb_build_array",
	"json_build_array", "to_json", "to_jsonb", "typeof", "unnest", "generate_series",
	"array_length", "cardinality", "md5", "numeric", "decimal", "int", "integer", "bigint",
	"varchar", "char", "text", "timestamp", "timestamptz",
	"version", "current_database", "current_schema", "current_schemas", "current_user",
	"session_user", "pg_size_pretty", "pg_database_size", "pg_relation_size",
	"pg_total_relation_size", "pg_table_size", "pg_indexes_size", "pg_column_size",
	"jsonb_array_elements", "json_array_elements", "jsonb_array_elements_text",
	"json_array_elements_text", "jsonb_each", "json_each", "jsonb_each_text", "json_each_text",
	"jsonb_object_keys", "json_object_keys", "jsonb_path_query", "jsonb_pretty", "json_object",
	"json_array", "regexp_replace", "regexp_matches", "regexp_match", "regexp_like",
	"regexp_substr", "regexp_split_to_array", "regexp_split_to_table", "string_to_array",
	"array_to_string", "array_position", "array_remove", "array_append", "array_cat",
	"date_format", "from_unixtime", "unix_timestamp", "datediff", "dateadd", "getdate",
	"convert", "nvl", "nvl2", "char_index", "charindex", "len", "datalength", "hex", "quote",
	"ascii", "chr", "repeat", "translate", "encode", "sha256", "exp", "ln", "log", "pi",
	"random", "width_bucket", "clock_timestamp", "statement_timestamp", "current_timestamp",
	"localtime", "localtimestamp", "justify_interval", "isfinite", "bit_length",
	"has_table_privilege", "has_schema_privilege", "to_regclass", "pg_typeof", "format_type",
	"obj_description", "col_description", "quote_ident", "quote_literal", "quote_nullable",
)

// namingWords are the words after which a name and "(" are an alias's or a
// CTE's column list, not a call: AS v(id, name), WITH RECURSIVE t(n).
var namingWords = keySet("as", "with", "recursive")

// readOnlySQL reports whether s is one SQL statement that reads: its first
// word is one of readFirstWords, no other statement follows a semicolon,
// no word of writeWords appears anywhere in it, it calls no function but
// readFuncs (a name after AS, WITH or RECURSIVE is an alias's column
// list), it holds no comment, and it spells nothing with Unicode escapes
// (U&"…", which could name any function).
func readOnlySQL(s string) bool {
	s = strings.TrimSpace(s)
	s = strings.TrimSpace(strings.TrimSuffix(s, ";"))
	if s == "" || strings.Contains(s, ";") || strings.Contains(strings.ToLower(s), "u&") ||
		strings.Contains(s, "/*") || strings.Contains(s, "--") || strings.ContainsAny(s, "#\f\v") {
		return false // comments (and MySQL's #) could stand between a name and its "("
	}
	first := true
	prev, end := "", 0 // the word before, when only space parts them, and where it ended
	for i := 0; i < len(s); {
		for i < len(s) && !isSQLWordByte(s[i]) {
			i++
		}
		start := i
		if strings.TrimSpace(s[end:start]) != "" {
			prev = "" // a quote, a comma, an operator: not a name's AS
		}
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
		j := i
		for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r' || s[j] == '"' || s[j] == '`' || s[j] == ']') {
			j++
		}
		if j < len(s) && s[j] == '(' && !readFuncs[w] && !namingWords[prev] {
			return false
		}
		prev, end = w, i
	}
	return !first
}

// isSQLWordByte: letters, digits, _ and $ make an SQL word; any byte of a
// multi-byte character too, so that no letter outside ASCII splits a word
// into ones this test would read.
func isSQLWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
