package store

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// insertManySQL is insertActionSQL for many calls at once: the group commit
// runs a batch made only of plain submits (no budget, rate, route or
// worktree: insertShape.plain) as this one statement instead of one
// statement each. PostgreSQL's cost of a statement is mostly its own
// (executor start, the guards' plans, the three tables' indexes opened):
// shared by the batch's calls it costs about half as much per call (issue
// 14: ~150 → ~80 µs per allowed submit, throwaway benchmark).
//
// It is built from insertActionSQL, so that the guards and the rows written
// are stated once: every $N becomes r.pN, a column of the call's row in $1,
// a JSON array of rows (manyRow: key "pN" is parameter N of the one-call
// statement, "n" the row's place); the token is joined per row; the rows
// of the pending calls' agents, then their tokens', then their
// agent_pending rows are locked before the guards, each in id order (so
// that two batches never wait on each other in a cycle), and the pending
// counts added per agent. A
// call's room under max_pending is read from its agent's count as the
// batch found it: calls of one agent merged into one statement do not see
// each other's.
// Every guard runs per row: the shape-specialised statements leave out
// what cannot refuse a shape's call, here each row's own parameters
// short-circuit it. A marker the statement no longer holds stops the server
// at start (patchStatement).
var insertManySQL = func() string {
	q := regexp.MustCompile(`\$(\d+)`).ReplaceAllString(insertActionSQL, "r.p$1")
	edit := func(from, to string) { q = patchStatement("insertManySQL", q, from, to) }
	head, rest, ok := strings.Cut(q, "\n), g AS (\n\tSELECT ")
	head, found := strings.CutPrefix(strings.TrimSpace(head), "WITH t AS (\n\t")
	token, locks, split := strings.Cut(head, "\n), l AS (\n\t")
	if !ok || !found || !split {
		panic("store: insertManySQL: the insert statement no longer starts with the token's row, the agent's locks and the guards")
	}
	// The rows of the pending calls' agents, then their tokens', then
	// their pending counts, each locked in id order (the lock order,
	// store.go) before any guard reads them.
	locks = patchStatement("insertManySQL", locks, "SELECT id, suspended_at IS NOT NULL AS suspended FROM agents WHERE id = r.p2 AND r.p10 = 'pending' FOR",
		"SELECT id, suspended_at IS NOT NULL AS suspended FROM agents WHERE id IN (SELECT r.p2 FROM r WHERE r.p10 = 'pending') ORDER BY id COLLATE \"C\" FOR")
	locks = patchStatement("insertManySQL", locks, "WHERE id = r.p28 AND (SELECT count(*) FROM l) > 0 FOR",
		"WHERE id IN (SELECT r.p28 FROM r WHERE r.p10 = 'pending') AND (SELECT count(*) FROM l) > 0 ORDER BY id COLLATE \"C\" FOR")
	locks = patchStatement("insertManySQL", locks, "SELECT pending FROM agent_pending WHERE agent_id = (SELECT id FROM l) AND",
		"SELECT agent_id, pending FROM agent_pending WHERE agent_id IN (SELECT id FROM l) AND")
	locks = patchStatement("insertManySQL", locks, "(SELECT count(*) FROM lt) >= 0 FOR",
		"(SELECT count(*) FROM lt) >= 0 ORDER BY agent_id COLLATE \"C\" FOR")
	cols := make([]string, len(manyColumnTypes))
	for i, typ := range manyColumnTypes {
		cols[i] = fmt.Sprintf("p%d %s", i+1, typ)
	}
	q = "WITH r AS (\n\tSELECT * FROM jsonb_to_recordset($1::jsonb) AS r(" + strings.Join(cols, ", ") + ", n integer)\n" +
		"), l AS (\n\t" + locks + "\n" +
		"), g AS (\n\tSELECT r.n, r.p1 AS id, " + rest
	edit(`(SELECT active FROM t)`, `t.active`)
	edit(`(SELECT live AND subject = r.p2 FROM lt)`, `(SELECT live AND subject = r.p2 FROM lt WHERE lt.id = r.p28)`)
	edit(`(SELECT agent_suspended FROM t)`, `t.agent_suspended`)
	edit(`(SELECT suspended FROM l)`, `(SELECT suspended FROM l WHERE l.id = r.p2)`)
	edit(`(SELECT pending FROM lp)`, `(SELECT pending FROM lp WHERE lp.agent_id = r.p2)`)
	edit(" AS plan_ok\n), a AS (", " AS plan_ok\n\tFROM r LEFT JOIN LATERAL ("+token+") t ON true\n), a AS (")
	edit("FROM g WHERE g.token_ok", "FROM g JOIN r USING (n) WHERE g.token_ok")
	edit(`), p AS (
	UPDATE agent_pending SET pending = pending + 1 FROM a WHERE agent_id = r.p2 AND r.p10 = 'pending'
`, `), c AS (
	SELECT r.p2 AS agent_id, count(*) AS n FROM a JOIN r ON r.p1 = a.id WHERE r.p10 = 'pending' GROUP BY r.p2
), p AS (
	UPDATE agent_pending SET pending = pending + c.n FROM c
	WHERE agent_pending.agent_id = c.agent_id AND (SELECT count(*) FROM lp) >= 0 -- every row locked first, in order (room_ok reads lp only under a max_pending)
`)
	edit("FROM a WHERE r.p24 <> ''", "FROM a JOIN r ON r.p1 = a.id WHERE r.p24 <> ''")
	edit("r.p23::jsonb, r.p37 FROM a\n)", "r.p23::jsonb, r.p37 FROM a JOIN r ON r.p1 = a.id\n)")
	edit("EXISTS (SELECT FROM a) FROM g", "EXISTS (SELECT FROM a WHERE a.id = g.id) FROM g ORDER BY g.n")
	return q
}()

// manyColumnTypes are the types of the one-call statement's parameters
// $1…$37, in order (InsertAction's params).
var manyColumnTypes = [...]string{
	"uuid", "text", "text", "text", "text", "text", "text", "jsonb", "text", // id … reason
	"text", "jsonb", "jsonb", "jsonb", "integer", "text", "timestamptz", // status … expires_at
	"text", "bytea", "integer", "timestamptz", // idempotency_key … created_at
	"text", "text", "jsonb", "text", "text", "integer", "uuid", // the event's kind, actor, data; the job
	"text", "integer", "integer", "boolean", "text", "text", "text", "integer", "boolean", // the guard
	"bytea", // the event's digest
}

// manyRow encodes a plain submit's parameters (InsertAction's, $1…$37) as
// its row of insertManySQL's $1: a JSON object, "pN" for parameter N, left
// open for the group commit to add "n", the row's place in the batch. It
// returns nil for parameters JSON would not carry exactly (a string that is
// not UTF-8, a time JSON cannot spell): that call runs as its own
// statement, which refuses or writes it as it always has.
func manyRow(params []any) []byte {
	if len(params) != len(manyColumnTypes) {
		panic(fmt.Sprintf("store: a merged submit takes %d parameters, not %d", len(manyColumnTypes), len(params)))
	}
	b := make([]byte, 0, 1024)
	b = append(b, '{')
	for i, p := range params {
		b = append(b, `"p`...)
		b = strconv.AppendInt(b, int64(i+1), 10)
		b = append(b, `":`...)
		switch v := p.(type) {
		case []byte:
			switch {
			case v == nil:
				b = append(b, "null"...)
			case manyColumnTypes[i] == "bytea":
				b = append(b, `"\\x`...)
				b = hex.AppendEncode(b, v)
				b = append(b, '"')
			case json.Valid(v): // jsonb: the JSON text itself, one value (never more keys of the row)
				b = append(b, v...)
			default:
				return nil
			}
		case string:
			if !utf8.ValidString(v) {
				return nil
			}
			b = appendJSON(b, v)
		case *string:
			if v != nil && !utf8.ValidString(*v) {
				return nil
			}
			b = appendJSON(b, v)
		case time.Time: // to the microsecond, truncated as pgx sends a time alone (PostgreSQL would round the text)
			b = appendJSON(b, v.Truncate(time.Microsecond))
		case *time.Time:
			if v != nil {
				b = appendJSON(b, v.Truncate(time.Microsecond))
			} else {
				b = append(b, "null"...)
			}
		default:
			b = appendJSON(b, v)
		}
		if b == nil {
			return nil
		}
		b = append(b, ',')
	}
	return b
}

// appendJSON appends v's JSON to b, or returns nil when v has none.
func appendJSON(b []byte, v any) []byte {
	enc, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return append(b, enc...)
}
