package risk

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIsReadCall: a call is a read when its tool's name says read and no
// SQL in its args does more than read. Before, the name alone decided:
// db.query {"sql": "DELETE …"} was a read, so plan mode let it through to
// the policy.
func TestIsReadCall(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tool, args string
		want       bool
	}{
		{"fs.read", `{"path":"README.md"}`, true},
		{"search", `{"q":"delete old files"}`, true}, // not SQL: a search's words
		{"search", `{"query":"update my notes"}`, true},
		{"fs.write", `{"path":"x"}`, false},
		{"db.query", `{"sql":"SELECT id FROM users WHERE id = 4"}`, true},
		{"db.query", `{"query":"  select count(*) from t;  "}`, true},
		{"db.query", `{"query":"WITH r AS (SELECT 1) SELECT * FROM r"}`, true},
		{"db.query", `{"query":"SHOW search_path"}`, true},
		{"db.query", `{"query":"EXPLAIN SELECT 1"}`, true},
		{"db.query", `{"queries":["SELECT 1","SELECT 2"]}`, true},
		{"db.query", `{"sql":"DELETE FROM users WHERE id = 4"}`, false},
		{"db.query", `{"query":"UPDATE users SET admin = true WHERE id = 4"}`, false},
		{"db.query", `{"query":"INSERT INTO t VALUES (1)"}`, false},
		{"db.query", `{"query":"SELECT 1; DROP TABLE users"}`, false},
		{"db.query", `{"query":"WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d"}`, false},
		{"db.query", `{"query":"EXPLAIN ANALYZE DELETE FROM t"}`, false},
		{"db.query", `{"query":"SELECT * INTO t2 FROM t"}`, false},
		{"db.query", `{"query":"SELECT * FROM t FOR UPDATE"}`, false},
		{"db.query", `{"query":"SELECT nextval('s')"}`, false},
		{"db.query", `{"query":"SELECT pg_terminate_backend(42)"}`, false},
		{"db.query", `{"query":"/* c */ SELECT 1"}`, false}, // not sure what it is: not a read
		{"db.query", `{"query":"ſelect 1"}`, false},
		{"db.query", `{"query":""}`, false},
		{"db.query", `{"queries":["SELECT 1","DELETE FROM t"]}`, false},
		{"db.query", `{"opts":{"SQL":"TRUNCATE t"}}`, false}, // nested, any case
		{"search", `{"sql":"DELETE FROM t"}`, false},         // an SQL field of any tool
		{"search", `{"statement":"SELECT 1"}`, true},
		// Found by a review: SQL the walker did not look at.
		{"db.query", `{"query":{"text":"DELETE FROM users"}}`, false}, // nested under an SQL field
		{"db.query", `{"command-line":"DELETE FROM users"}`, false},   // keys read as the classifier reads them
		{"db.query", `{"sql_query":"DROP TABLE users"}`, false},       // a key naming sql
		{"read_query", `{"query":"DROP TABLE users"}`, false},         // a statement that writes, in any field
		{"read_query", `{"query":"SELECT 1\ndelete from users"}`, false},
		{"read_query", `{"query":"update users set admin = true"}`, false},
		{"read_query", `{"query":"INSERT INTO t VALUES (1)"}`, false},
		{"read_query", `{"query":"DEL\u200bETE FROM users"}`, false}, // normalised
		{"search", `{"q":"update my notes"}`, true},
		{"search", `{"q":"drop shipping suppliers"}`, true},
		{"db.query", `{"sql":"SELECT pg_drop_replication_slot('r')"}`, false}, // a function not known to read
		{"db.query", `{"sql":"SELECT purge_accounts()"}`, false},
		{"db.query", `{"sql":"SELECT load_extension('/tmp/x.so')"}`, false},
		{"db.query", `{"sql":"SELECT U&\"\\0073etval\"('users_id_seq', 42)"}`, false},
		{"db.query", `{"sql":"SELECT \"nextval\"('s')"}`, false},
		{"db.query", `{"sql":"SELECT query_to_xml('x', true, true, '')"}`, false},
		{"db.query", `{"sql":"SELECT count(*), max(id), coalesce(name, 'x') FROM users WHERE id IN (1, 2)"}`, true},
		{"db.query", `{"sql":"SELECT name FROM users WHERE id = $1","args":["alice"]}`, true}, // bound values are not SQL
		{"db.query", `{"sql":"SELECT name FROM users WHERE id = $1","args":["DELETE FROM users"]}`, false},
		// Found by a second review: what a comment or a form feed hid, where
		// statements start in other fields, and reads refused.
		{"db.query", `{"sql":"SELECT nextval/**/('users_id_seq')"}`, false},
		{"db.query", `{"sql":"SELECT pg_terminate_backend\f(123)"}`, false},
		{"read_query", `{"query":"/* x */ DROP TABLE users"}`, false},
		{"read_query", `{"query":"SELECT 1; DROP TABLE users"}`, false},
		{"read_query", `{"query":"WITH d AS (DELETE FROM users RETURNING *) SELECT * FROM d"}`, false},
		{"search", `{"q":"grant access to a repo"}`, true},
		{"db.query", `{"sql":"SELECT version()"}`, true},
		{"db.query", `{"sql":"SELECT pg_size_pretty(pg_database_size(current_database()))"}`, true},
		{"db.query", `{"sql":"WITH RECURSIVE t(n) AS (VALUES (1) UNION ALL SELECT n + 1 FROM t WHERE n < 5) SELECT sum(n) FROM t"}`, true},
		{"db.query", `{"sql":"SELECT * FROM (VALUES (1, 'a')) AS v(id, name)"}`, true},
		{"db.query", `{"sql":"SELECT jsonb_array_elements(data), regexp_replace(name, 'a', 'b') FROM t"}`, true},
		// Found by a third review: a name's AS taken from a literal, and
		// queries in fields that are not SQL fields.
		{"db.query", `{"sql":"SELECT 'as', lo_from_bytea(0, 'x')"}`, false},
		{"db.query", `{"sql":"SELECT 1 AS \"as\", pg_try_advisory_lock(1)"}`, false},
		{"read_query", `{"query":"WITH x AS (SELECT 1) DELETE FROM users"}`, false},
		{"read_query", `{"query":"EXPLAIN ANALYZE DELETE FROM users"}`, false},
		{"read_query", `{"query":"SELECT * INTO backup FROM users"}`, false},
		{"read_query", `{"query":"SELECT setval('users_id_seq', 1)"}`, false},
		{"read_query", `{"query":"COPY (SELECT 1) TO PROGRAM 'touch /tmp/x'"}`, false},
		{"read_query", `{"query":"DO $$ BEGIN DELETE FROM users; END $$"}`, false},
		{"read_query", `{"query":"PREPARE p AS DELETE FROM users; EXECUTE p"}`, false},
		{"read_query", `{"query":"INSERT users VALUES (1, 'x')"}`, false},
		{"read_query", `{"query":"SELECT id, name FROM users WHERE id = 4"}`, true},
		{"search", `{"q":"show me the weather"}`, true},
	} {
		var args map[string]any
		require.NoError(t, json.Unmarshal([]byte(tc.args), &args))
		assert.Equal(t, tc.want, IsReadCall(tc.tool, args), "%s %s", tc.tool, tc.args)
	}
}
