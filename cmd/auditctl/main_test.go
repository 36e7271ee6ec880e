package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// auditctl runs the command and returns its exit code and output (and
// error message).
func auditctl(t *testing.T, env *apptest.Env, token string, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code, err := run(context.Background(), append([]string{"-url", env.URL, "-token", token}, args...), &out)
	if err != nil {
		out.WriteString(err.Error())
	}
	return code, out.String()
}

// TestAuditctl keeps checkpoints, verifies through the server and offline
// from an export, and sees tampering both ways.
func TestAuditctl(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	auditor := env.Auditor("audrey")
	agent := env.Agent("billing", map[string]any{"rules": []map[string]any{{"id": "r", "tool": "fs.read", "effect": "allow"}}})
	for i := range 5 {
		_, err := agent.Submit(ctx, client.SubmitRequest{Tool: "fs.read", Args: map[string]any{"path": "/srv/f", "n": i}})
		require.NoError(t, err)
	}
	// Once the chain is quiet the sealer signs its head.
	waitCheckpointed(t, env)
	var total int64
	require.NoError(t, env.App.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_events`).Scan(&total))
	head, err := auditor.VerifyAudit(ctx)
	require.NoError(t, err)
	require.True(t, head.OK)
	require.Equal(t, total, head.Head.Seq)

	dir := t.TempDir()
	kept := filepath.Join(dir, "kept.ndjson")
	chain := filepath.Join(dir, "chain.ndjson")
	tok := auditor.Token()

	code, _ := auditctl(t, env, tok, "checkpoints", "-append", kept)
	require.Equal(t, 0, code)
	code, _ = auditctl(t, env, tok, "checkpoints", "-append", kept) // nothing new: nothing added twice
	require.Equal(t, 0, code)
	keptLines := strings.Split(strings.TrimSpace(readFile(t, kept)), "\n")
	cp, err := audit.ParseCheckpoint(keptLines[len(keptLines)-1])
	require.NoError(t, err)
	require.Equal(t, total, cp.Seq)
	seqs := map[string]bool{}
	for _, l := range keptLines {
		assert.False(t, seqs[l], "a checkpoint kept twice")
		seqs[l] = true
	}

	code, out := auditctl(t, env, tok, "verify", "-checkpoints", kept)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, `"ok": true`)
	// From the stored checkpoint the kept one copies: the events after it.
	code, out = auditctl(t, env, tok, "verify", "-checkpoints", kept, "-from", strconv.FormatInt(cp.Seq, 10))
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, `"ok": true`)
	assert.Contains(t, out, fmt.Sprintf(`"from": %d`, cp.Seq))
	code, out = auditctl(t, env, tok, "verify", "-from", "1", "-offline", kept)
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "one of the kept checkpoints")

	// Logging in instead of a token.
	var login bytes.Buffer
	code, err = run(ctx, []string{"-url", env.URL, "-user", "audrey", "-password", "audrey-password-123", "verify"}, &login)
	require.NoError(t, err)
	require.Equal(t, 0, code, login.String())

	waitSealed(t, env)
	code, _ = auditctl(t, env, tok, "export", "-order", "seq", "-o", chain)
	require.Equal(t, 0, code)
	key := "-key=" + encodeKey(cp)
	code, out = auditctl(t, env, tok, "verify", "-offline", chain, "-checkpoints", kept, key)
	require.Equal(t, 0, code, out)
	var rep audit.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	lines := strings.Split(strings.TrimSpace(readFile(t, chain)), "\n")
	assert.EqualValues(t, len(lines), rep.Checked)
	assert.Greater(t, rep.Checked, total, "the login since is in the chain too")
	assert.Contains(t, out, fmt.Sprintf(`"kept": %d,`, len(keptLines)))
	assert.Contains(t, out, fmt.Sprintf(`"covered_through": %d,`, cp.Seq))
	assert.Contains(t, out, `"anchored": true`)
	// Without kept checkpoints an export is only consistent: anyone can
	// write one that is. A key with nothing to pin it on is refused.
	code, out = auditctl(t, env, tok, "verify", "-offline", chain)
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, `"anchored": false`)
	assert.Contains(t, out, "warning: no kept checkpoint anchors the export")
	code, out = auditctl(t, env, tok, "verify", "-offline", chain, key)
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "-key pins the key of the kept checkpoints: name their file (-checkpoints)")
	assert.NotContains(t, out, `"ok"`)

	// Offline from a kept checkpoint: the whole export, or one made after
	// it (-cursor), its events up to the checkpoint archived.
	from := strconv.FormatInt(cp.Seq, 10)
	rest := filepath.Join(dir, "rest.ndjson")
	code, out = auditctl(t, env, tok, "export", "-order", "seq", "-cursor", from, "-o", rest)
	require.Equal(t, 0, code, out)
	for _, export := range []string{chain, rest} {
		code, out = auditctl(t, env, tok, "verify", "-offline", export, "-checkpoints", kept, "-from", from, key)
		require.Equal(t, 0, code, out)
		rep = audit.Report{}
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		assert.Equal(t, cp.Seq, rep.From)
		assert.EqualValues(t, int64(len(lines))-cp.Seq, rep.Checked, "the events after the checkpoint")
	}
	restLines := strings.Split(strings.TrimSpace(readFile(t, rest)), "\n")
	require.EqualValues(t, int64(len(lines))-cp.Seq, len(restLines))
	restLines[0] = strings.Replace(restLines[0], `"actor":"`, `"actor":"mallory-`, 1)
	writeFile(t, rest, strings.Join(restLines, "\n"))
	code, out = auditctl(t, env, tok, "verify", "-offline", rest, "-checkpoints", kept, "-from", from)
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, `"first_bad_seq": `+jsonInt(cp.Seq+1))
	assert.Contains(t, out, "hash mismatch")
	code, out = auditctl(t, env, tok, "verify", "-offline", rest, "-checkpoints", kept, "-from", "999999")
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "holds no checkpoint at seq 999999")

	// Offline, an edited export and a shortened one are caught.
	edited := append([]string{}, lines...)
	edited[2] = strings.Replace(edited[2], `"actor":"`, `"actor":"mallory-`, 1)
	writeFile(t, chain, strings.Join(edited, "\n"))
	code, out = auditctl(t, env, tok, "verify", "-offline", chain, "-checkpoints", kept)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, `"first_bad_seq": 3`)
	writeFile(t, chain, strings.Join(lines[:cp.Seq-1], "\n"))
	code, out = auditctl(t, env, tok, "verify", "-offline", chain, "-checkpoints", kept)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "truncated")
	code, out = auditctl(t, env, tok, "verify", "-offline", chain, "-checkpoints", kept, "-key=AAAA")
	assert.Equal(t, 2, code)
	assert.Contains(t, out, "not signed by -key", "a kept checkpoint signed by another key than the pinned one")

	// In the database: rewrite the whole chain consistently from seq 2 and
	// drop the stored checkpoints. Only the kept checkpoint sees it.
	su, err := pgx.Connect(ctx, testdb.Cluster(t).URL(env.App.Pool().Config().ConnConfig.Database))
	require.NoError(t, err)
	defer su.Close(context.Background())
	for _, stmt := range []string{`SET session_replication_role = replica`, `DELETE FROM audit_checkpoints`,
		`UPDATE audit_events SET actor = 'mallory' WHERE id = (SELECT id FROM audit_seals WHERE seq = 2)`} {
		_, err := su.Exec(ctx, stmt)
		require.NoError(t, err)
	}
	var prev []byte
	require.NoError(t, su.QueryRow(ctx, `SELECT hash FROM audit_seals WHERE seq = 1`).Scan(&prev))
	var h audit.Hasher
	for _, l := range lines[1:] {
		var rec audit.Record
		require.NoError(t, json.Unmarshal([]byte(l), &rec))
		if rec.Seq == 2 {
			rec.Actor = "mallory"
		}
		sum, err := h.Hash(prev, &rec)
		require.NoError(t, err)
		_, err = su.Exec(ctx, `UPDATE audit_seals SET prev_hash = $2, hash = $3 WHERE seq = $1`, rec.Seq, prev, sum)
		require.NoError(t, err)
		prev = sum
	}
	code, out = auditctl(t, env, tok, "verify")
	assert.Equal(t, 0, code, "consistent, and no stored checkpoint left to contradict it: %s", out)
	code, out = auditctl(t, env, tok, "verify", "-checkpoints", kept)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "checkpoint mismatch")
	changed := total // every kept checkpoint is held: the first one the rewrite changed shows it
	for _, l := range keptLines {
		c, err := audit.ParseCheckpoint(l)
		require.NoError(t, err)
		if c.Seq >= 2 {
			changed = min(changed, c.Seq)
		}
	}
	assert.Contains(t, out, `"first_bad_seq": `+jsonInt(changed))

	code, _ = auditctl(t, env, tok, "nonsense")
	assert.Equal(t, 2, code)
}

// waitSealed waits until every event in the database is sealed.
func waitSealed(t *testing.T, env *apptest.Env) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; {
		var unsealed int
		require.NoError(t, env.App.Pool().QueryRow(env.Ctx(), `SELECT count(*) FROM audit_events e WHERE NOT EXISTS (SELECT FROM audit_seals s WHERE s.id = e.id)`).Scan(&unsealed))
		if unsealed == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "events left unsealed")
		time.Sleep(50 * time.Millisecond)
	}
}

func encodeKey(cp audit.Checkpoint) string {
	b, _ := json.Marshal(cp.PublicKey)
	return strings.Trim(string(b), `"`)
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(s+"\n"), 0o600))
}

// TestAuditctlAcrossAKeyRotation rotates the server's audit key: the
// checkpoints the old key signed keep verifying while it is listed in
// AIRLOCK_AUDIT_PREVIOUS_KEYS (and not once it is dropped), and the file of
// kept checkpoints changes to the new key only when told to.
func TestAuditctlAcrossAKeyRotation(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	auditor := env.Auditor("audrey")
	agent := env.Agent("billing", map[string]any{"rules": []map[string]any{{"id": "r", "tool": "fs.read", "effect": "allow"}}})
	submit := func(n int) {
		for i := range n {
			_, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "fs.read", Args: map[string]any{"path": "/srv/f", "n": i}})
			require.NoError(t, err)
		}
		waitCheckpointed(t, env)
	}
	dir := t.TempDir()
	kept := filepath.Join(dir, "kept.ndjson")
	tok := auditor.Token()
	lastKept := func() audit.Checkpoint {
		lines := strings.Split(strings.TrimSpace(readFile(t, kept)), "\n")
		cp, err := audit.ParseCheckpoint(lines[len(lines)-1])
		require.NoError(t, err)
		return cp
	}

	submit(3)
	code, out := auditctl(t, env, tok, "checkpoints", "-append", kept)
	require.Equal(t, 0, code, out)
	oldKey := lastKept().PublicKey
	keptBefore := lastKept().Seq
	submit(2) // a checkpoint by the old key that is not kept yet

	// The rotation: a new key file, the old key's public half listed.
	env.Config.AuditKeyFile = filepath.Join(dir, "audit-2.key")
	env.Config.AuditPreviousKeys = []ed25519.PublicKey{oldKey}
	env.Restart()
	submit(3)
	var newest bytes.Buffer
	code, err := run(env.Ctx(), []string{"-url", env.URL, "-token", tok, "checkpoints"}, &newest)
	require.NoError(t, err)
	require.Equal(t, 0, code)
	lines := strings.Split(strings.TrimSpace(newest.String()), "\n")
	cp, err := audit.ParseCheckpoint(lines[len(lines)-1])
	require.NoError(t, err)
	newKey := encodeKey(cp)
	require.False(t, cp.PublicKey.Equal(oldKey), "signed by the new key")

	code, out = auditctl(t, env, tok, "verify", "-checkpoints", kept)
	require.Equal(t, 0, code, "the old key's checkpoints, stored and kept, still verify: %s", out)
	assert.Contains(t, out, `"ok": true`)

	// The kept file does not change keys on its own…
	before := readFile(t, kept)
	code, out = auditctl(t, env, tok, "checkpoints", "-append", kept)
	assert.Equal(t, 2, code)
	assert.Contains(t, out, "signed by another key")
	assert.Contains(t, out, newKey)
	assert.Equal(t, before, readFile(t, kept), "nothing appended")
	code, out = auditctl(t, env, tok, "checkpoints", "-append", kept, "-accept-key", "AAAA")
	assert.Equal(t, 2, code)
	assert.Contains(t, out, "not an audit public key")
	// … only to the key it is told the server's was rotated to: the old
	// key's last checkpoints, then the new key's.
	code, out = auditctl(t, env, tok, "checkpoints", "-append", kept, "-accept-key", newKey)
	require.Equal(t, 0, code, out)
	assert.Equal(t, encodeKey(lastKept()), newKey)
	assert.Equal(t, cp.Seq, lastKept().Seq)
	var signers []string
	for _, l := range strings.Split(strings.TrimSpace(readFile(t, kept)), "\n") {
		c, err := audit.ParseCheckpoint(l)
		require.NoError(t, err)
		if c.Seq > keptBefore && (len(signers) == 0 || signers[len(signers)-1] != encodeKey(c)) {
			signers = append(signers, encodeKey(c))
		}
	}
	assert.Equal(t, []string{encodeKey(audit.Checkpoint{PublicKey: oldKey}), newKey}, signers, "appended: the old key's, then the new key's")

	// The old key (it leaked, say) signs a checkpoint after the new one's:
	// the kept file does not go back to it, and verification refuses it.
	seed, err := os.ReadFile(filepath.Join(env.Config.DataDir, "audit.key"))
	require.NoError(t, err)
	raw, err := hex.DecodeString(strings.TrimSpace(string(seed)))
	require.NoError(t, err)
	leaked, err := audit.NewSigningKey(raw)
	require.NoError(t, err)
	require.True(t, leaked.Public().Equal(oldKey))
	su, err := pgx.Connect(env.Ctx(), testdb.Cluster(t).URL(env.App.Pool().Config().ConnConfig.Database))
	require.NoError(t, err)
	defer su.Close(context.Background())
	submit(3)     // the new key's next checkpoint, above cp
	var seq int64 // between two of the new key's checkpoints
	var hash []byte
	require.NoError(t, su.QueryRow(env.Ctx(), `SELECT s.seq, s.hash FROM audit_seals s WHERE s.seq > $1
		AND s.seq < (SELECT max(seq) FROM audit_checkpoints) AND NOT EXISTS (SELECT FROM audit_checkpoints c WHERE c.seq = s.seq)
		ORDER BY s.seq LIMIT 1`, cp.Seq).Scan(&seq, &hash))
	forged := leaked.Sign(seq, hash, time.Now()) // over the chain's true hash
	// Below the newest checkpoint: past the triggers (migration 00036 keeps
	// checkpoints in seq order), as the owner can.
	_, err = su.Exec(env.Ctx(), `SET session_replication_role = replica`)
	require.NoError(t, err)
	_, err = su.Exec(env.Ctx(), `INSERT INTO audit_checkpoints VALUES ($1, $2, $3, $4, $5)`, forged.Seq, hash, forged.At, []byte(forged.PublicKey), forged.Signature)
	require.NoError(t, err)
	code, out = auditctl(t, env, tok, "checkpoints", "-append", kept, "-accept-key", newKey)
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, fmt.Sprintf("checkpoint %d is signed by another key", forged.Seq))
	assert.Equal(t, cp.Seq, lastKept().Seq, "nothing appended")
	code, out = auditctl(t, env, tok, "verify")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, fmt.Sprintf("the stored checkpoint at seq %d is signed by a retired audit key, after its successor signed", seq))
	_, err = su.Exec(env.Ctx(), `DELETE FROM audit_checkpoints WHERE seq = $1`, forged.Seq)
	require.NoError(t, err)

	chain := filepath.Join(dir, "chain.ndjson")
	waitSealed(t, env)
	code, out = auditctl(t, env, tok, "export", "-order", "seq", "-o", chain)
	require.Equal(t, 0, code, out)
	code, out = auditctl(t, env, tok, "verify", "-offline", chain, "-checkpoints", kept, "-key="+newKey)
	require.Equal(t, 0, code, out)

	// Without the old key listed, its checkpoints are nobody's.
	env.Config.AuditPreviousKeys = nil
	env.Restart()
	code, out = auditctl(t, env, tok, "verify")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "not signed by the audit key")
}

// waitCheckpointed waits until the sealer has signed a checkpoint of every
// event in the database.
func waitCheckpointed(t *testing.T, env *apptest.Env) {
	t.Helper()
	ctx := env.Ctx()
	for deadline := time.Now().Add(15 * time.Second); ; {
		var total, cpSeq int64
		require.NoError(t, env.App.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_events`).Scan(&total))
		require.NoError(t, env.App.Pool().QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM audit_checkpoints`).Scan(&cpSeq))
		if cpSeq == total {
			return
		}
		require.True(t, time.Now().Before(deadline), "no checkpoint of the head")
		time.Sleep(100 * time.Millisecond)
	}
}

// TestAuditctlAppendSaysWhyNothingWasKept: when the chain does not lead
// from the newest kept checkpoint to the server's new ones, checkpoints
// -append keeps nothing, says why and exits 1.
func TestAuditctlAppendSaysWhyNothingWasKept(t *testing.T) {
	t.Parallel()
	seed := make([]byte, ed25519.SeedSize)
	key, err := audit.NewSigningKey(seed)
	require.NoError(t, err)
	line := func(seq int64) string {
		b, err := json.Marshal(key.Sign(seq, bytes.Repeat([]byte{byte(seq)}, audit.HashSize), time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
		require.NoError(t, err)
		return string(b)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/audit/checkpoints":
			fmt.Fprintln(w, line(4))
		case "/api/v1/audit/verify":
			fmt.Fprint(w, `{"ok":false,"checked":0,"head":{"seq":4,"hash":"00"},"from":3,"first_bad_seq":3,"reason":"checkpoint mismatch: the chain's hash at seq 3 differs"}`)
		}
	}))
	defer srv.Close()
	kept := filepath.Join(t.TempDir(), "kept.ndjson")
	writeFile(t, kept, line(3))
	var out bytes.Buffer
	code, err := run(context.Background(), []string{"-url", srv.URL, "-token", "t", "checkpoints", "-append", kept}, &out)
	assert.Equal(t, 1, code)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "first bad seq 3: checkpoint mismatch")
	assert.Contains(t, err.Error(), "nothing appended")
	assert.Equal(t, line(3)+"\n", readFile(t, kept))
}
