package store_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/audit"
)

// TestCheckedRangeIsChainRangeHashed: a verification reads the chain with
// CheckedRange, which hands each event to the check as it is read and
// keeps none of its content. Over a chain whose seals do not follow their
// events' ids (two seals' events swapped, one event sealed twice, one
// event deleted, a second row with one event's id, a thousand ids skipped
// in the middle of a range), every
// range must come back as ChainRange's records with their hashes checked:
// the same ids, seals and missing marks, the check called once per record
// with the record ChainRange returns, content and all. And each range's
// window of ids says which of its rows no seal accounts for: the forged
// row (a second row of seq 7's event) and the event seq 12 named before
// (now sealed nowhere).
func TestCheckedRangeIsChainRangeHashed(t *testing.T) {
	t.Parallel()
	tr := newTrail(t)
	ctx := ctxT(t)
	tr.append(8)
	su := tr.superuser()
	tr.exec(su, `SELECT setval('audit_events_id_seq', nextval('audit_events_id_seq') + 1000)`)
	tr.append(8)
	tr.checkpoint()
	require.True(t, tr.verify().OK)

	// seq 3 and 5 swap events; seq 12 names the event of seq 11; the event
	// of seq 14 is gone; a forged row has the id of seq 7's event, a later
	// time, and no seal (a seal names its event's id and time).
	var idOf [17]int64 // by seq, before
	for seq := 1; seq <= 16; seq++ {
		require.NoError(t, tr.pool.QueryRow(ctx, `SELECT id FROM audit_seals WHERE seq = $1`, seq).Scan(&idOf[seq]))
	}
	tr.exec(su, `UPDATE audit_seals SET id = -id WHERE seq IN (3, 5)`)
	tr.exec(su, `
		WITH a AS (SELECT id, at FROM audit_seals WHERE seq = 3), b AS (SELECT id, at FROM audit_seals WHERE seq = 5)
		UPDATE audit_seals s SET id = -CASE WHEN s.seq = 3 THEN b.id ELSE a.id END, at = CASE WHEN s.seq = 3 THEN b.at ELSE a.at END
		FROM a, b WHERE s.seq IN (3, 5)`)
	tr.exec(su, `ALTER TABLE audit_seals DROP CONSTRAINT audit_seals_event`)
	tr.exec(su, `UPDATE audit_seals SET id = s.id, at = s.at FROM audit_seals s WHERE s.seq = 11 AND audit_seals.seq = 12`)
	tr.exec(su, `DELETE FROM audit_events WHERE id = (SELECT id FROM audit_seals WHERE seq = 14)`)
	tr.exec(su, `INSERT INTO audit_events (id, at, kind, actor, agent_id, agent_instance, conversation_id, step_id, correlation_id,
			action_id, tool, args, risk, decision, data)
		SELECT id, at + interval '1 microsecond', kind, 'mallory', agent_id, agent_instance, conversation_id, step_id, correlation_id,
			action_id, tool, args, risk, decision, data
		FROM audit_events WHERE id = (SELECT id FROM audit_seals WHERE seq = 7)`)

	var h audit.Hasher
	for _, w := range [][2]int64{{0, 16}, {0, 5}, {2, 6}, {6, 12}, {10, 16}, {15, 40}, {16, 20}} {
		want, err := tr.store.ChainRange(ctx, w[0], w[1])
		require.NoError(t, err)
		seen := map[int64]audit.Record{} // by seq: what the check was given, copied
		page, err := tr.store.CheckedRange(ctx, w[0], w[1], func(r *audit.Record) bool {
			_, twice := seen[r.Seq]
			assert.False(t, twice, "seq %d checked twice", r.Seq)
			seen[r.Seq] = detached(*r)
			sum, err := h.Hash(r.PrevHash, r)
			return err == nil && bytes.Equal(sum, r.Hash)
		})
		require.NoError(t, err)
		got := page.Events
		require.Len(t, got, len(want), "range %v", w)
		var wantStrays [][2]int64 // id, seq of the seal of its id: read in the window, or with the page's seal of its id
		for _, st := range [][2]int64{{idOf[7], 7}, {idOf[12], 0}} {
			inWindow := !page.Window.Empty() && st[0] >= page.Window.Lo && st[0] <= page.Window.Hi
			if inWindow || st[1] > w[0] && st[1] <= w[1] {
				wantStrays = append(wantStrays, st)
			}
		}
		var strays [][2]int64
		for _, st := range page.Strays {
			strays = append(strays, [2]int64{st.ID, st.Seq})
		}
		assert.ElementsMatch(t, wantStrays, strays, "range %v, window %v", w, page.Window)
		for i, r := range want {
			g := got[i]
			assert.Equal(t, [2]int64{r.ID, r.Seq}, [2]int64{g.ID, g.Seq}, "range %v event %d", w, i)
			assert.Equal(t, [2][]byte{r.PrevHash, r.Hash}, [2][]byte{g.PrevHash, g.Hash})
			assert.Equal(t, r.Missing, g.Missing, "seq %d missing", r.Seq)
			if r.Missing {
				assert.NotContains(t, seen, r.Seq, "a missing event is not checked")
				assert.False(t, g.OK)
				continue
			}
			assert.Equal(t, r, seen[r.Seq], "the check gets ChainRange's record (seq %d)", r.Seq)
			sum, err := h.Hash(r.PrevHash, &r)
			assert.Equal(t, err == nil && bytes.Equal(sum, r.Hash), g.OK, "seq %d", r.Seq)
			// The tampered seals fail their check, the others pass.
			bad := r.Seq == 3 || r.Seq == 5 || r.Seq == 12 || r.Seq == 14
			assert.Equal(t, !bad, g.OK, "seq %d", r.Seq)
		}
	}
}

// detached returns r sharing no memory with the record it was copied from:
// a checked record's fields are valid only during the check.
func detached(r audit.Record) audit.Record {
	for _, f := range []*string{&r.Kind, &r.Actor, &r.AgentID, &r.AgentInstance, &r.ConversationID, &r.StepID, &r.CorrelationID, &r.ActionID, &r.Tool} {
		*f = strings.Clone(*f)
	}
	for _, f := range []*json.RawMessage{&r.Args, &r.Risk, &r.Decision, &r.Data} {
		*f = bytes.Clone(*f)
	}
	r.PrevHash, r.Hash = bytes.Clone(r.PrevHash), bytes.Clone(r.Hash)
	return r
}
