package audittool_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/audittool"
	"github.com/airlockhq/airlock/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// server is a running server with a chain of at least events events, all
// sealed, and what a test needs to look at and tamper with it.
type server struct {
	env   *apptest.Env
	token string            // an auditor's
	agent *client.Client    // whose actions the policy allows
	key   *audit.SigningKey // the server's audit key
	chain []audit.Record    // as exported in chain order (sealed)
}

func startServer(t *testing.T, events int) *server {
	t.Helper()
	env := apptest.Start(t)
	s := &server{env: env, token: env.Auditor("audrey").Token(),
		agent: env.Agent("billing", map[string]any{"rules": []map[string]any{{"id": "r", "tool": "fs.read", "effect": "allow"}}})}
	seed, err := os.ReadFile(filepath.Join(env.Config.DataDir, "audit.key"))
	require.NoError(t, err)
	raw, err := hex.DecodeString(strings.TrimSpace(string(seed)))
	require.NoError(t, err)
	s.key, err = audit.NewSigningKey(raw)
	require.NoError(t, err)
	for s.events(t) < events {
		s.submit(t, 1)
	}
	s.sealed(t)
	return s
}

// events counts the events in the database.
func (s *server) events(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, s.env.App.Pool().QueryRow(s.env.Ctx(), `SELECT count(*) FROM audit_events`).Scan(&n))
	return n
}

// submit has the agent submit n actions, each allowed.
func (s *server) submit(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		_, err := s.agent.Submit(s.env.Ctx(), client.SubmitRequest{Tool: "fs.read", Args: map[string]any{"path": "/srv/f", "n": i}})
		require.NoError(t, err)
	}
}

// sealed waits until every event is sealed and reads the chain.
func (s *server) sealed(t *testing.T) {
	t.Helper()
	c := client.New(s.env.URL, s.token)
	for deadline := time.Now().Add(30 * time.Second); ; {
		total := s.events(t)
		var buf bytes.Buffer
		require.NoError(t, c.ExportAudit(s.env.Ctx(), url.Values{"order": {"seq"}}, &buf))
		s.chain = s.chain[:0]
		sc := bufio.NewScanner(&buf)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var r audit.Record
			require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
			s.chain = append(s.chain, r)
		}
		if len(s.chain) >= total {
			return
		}
		require.True(t, time.Now().Before(deadline), "events left unsealed")
		time.Sleep(50 * time.Millisecond)
	}
}

// checkpointed waits until the sealer has signed a checkpoint of the
// chain's head.
func (s *server) checkpointed(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		var seq int64
		require.NoError(t, s.env.App.Pool().QueryRow(s.env.Ctx(), `SELECT coalesce(max(seq), 0) FROM audit_checkpoints`).Scan(&seq))
		if seq == int64(s.events(t)) {
			return
		}
		require.True(t, time.Now().Before(deadline), "no checkpoint of the head")
		time.Sleep(50 * time.Millisecond)
	}
}

// superuser connects to the server's database as the cluster's
// superuser: the tables' owner, who can switch their triggers off.
func (s *server) superuser(t *testing.T) *pgx.Conn {
	t.Helper()
	su, err := pgx.Connect(s.env.Ctx(), testdb.Cluster(t).URL(s.env.App.Pool().Config().ConnConfig.Database))
	require.NoError(t, err)
	t.Cleanup(func() { su.Close(context.Background()) })
	_, err = su.Exec(s.env.Ctx(), `SET session_replication_role = replica`)
	require.NoError(t, err)
	return su
}

// keepAll writes a kept file of a checkpoint of every event in recs,
// signed with the server's key, and returns its path.
func (s *server) keepAll(t *testing.T, recs []audit.Record) string {
	t.Helper()
	lines := make([]string, len(recs))
	for i := range recs {
		lines[i] = signed(t, s.key, recs[i])
	}
	return writeKept(t, lines...)
}

// rewrite changes the actor of the event at seq 2 in the database, as
// the tables' owner, seals the chain again from there, hashes and all,
// and deletes the stored checkpoints: a chain consistent in itself. It
// returns the chain as it now is.
func (s *server) rewrite(t *testing.T) []audit.Record {
	t.Helper()
	ctx := s.env.Ctx()
	su := s.superuser(t)
	for _, stmt := range []string{`DELETE FROM audit_checkpoints`,
		`UPDATE audit_events SET actor = 'mallory' WHERE id = (SELECT id FROM audit_seals WHERE seq = 2)`} {
		_, err := su.Exec(ctx, stmt)
		require.NoError(t, err)
	}
	out := append([]audit.Record(nil), s.chain...)
	var h audit.Hasher
	for i := 1; i < len(out); i++ {
		if out[i].Seq == 2 {
			out[i].Actor = "mallory"
		}
		out[i].PrevHash = out[i-1].Hash
		sum, err := h.Hash(out[i].PrevHash, &out[i])
		require.NoError(t, err)
		out[i].Hash = sum
		_, err = su.Exec(ctx, `UPDATE audit_seals SET prev_hash = $2, hash = $3 WHERE seq = $1`, out[i].Seq, []byte(out[i].PrevHash), sum)
		require.NoError(t, err)
	}
	return out
}

// requests records the verification requests a client sends, and their
// answers' status.
type requests struct {
	mu   sync.Mutex
	sent []*http.Request
	got  []int
}

func (r *requests) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if req.URL.Path == "/api/v1/audit/verify" && err == nil {
		r.mu.Lock()
		r.sent, r.got = append(r.sent, req), append(r.got, resp.StatusCode)
		r.mu.Unlock()
	}
	return resp, err
}

// verify verifies through the server with the kept file, recording the
// requests.
func (s *server) verify(t *testing.T, kept string) (*audittool.Report, *requests, error) {
	t.Helper()
	rec := &requests{}
	c := client.New(s.env.URL, s.token).WithHTTPClient(&http.Client{Transport: rec})
	r, err := audittool.Verify(s.env.Ctx(), func() (*client.Client, error) { return c, nil }, audittool.VerifyOptions{Checkpoints: kept})
	return r, rec, err
}

// TestOnlineHoldsEveryKeptCheckpoint: through the server, every kept
// checkpoint is held against the chain, as many a request as the
// server's limit on a request's line lets through, each request with the
// newest. Someone with the database and the audit key who rewrites the
// chain below a kept checkpoint, and signs one above it that the kept
// file takes in, is caught by the one below.
func TestOnlineHoldsEveryKeptCheckpoint(t *testing.T) {
	s := startServer(t, 220) // more kept checkpoints than the server takes in one request
	kept := s.keepAll(t, s.chain)
	newest := signed(t, s.key, s.chain[len(s.chain)-1])

	r, rec, err := s.verify(t, kept)
	require.NoError(t, err, "%+v", r)
	assert.True(t, r.Anchored)
	assert.Equal(t, len(s.chain), r.Kept)
	assert.Equal(t, s.chain[len(s.chain)-1].Seq, r.CoveredThrough)
	require.Greater(t, len(rec.sent), 1, "more kept checkpoints than one request carries")
	held := map[string]bool{}
	for i, req := range rec.sent {
		assert.Equal(t, http.StatusOK, rec.got[i])
		cps := req.URL.Query()["checkpoint"]
		for _, c := range cps {
			cp, err := audit.ParseCheckpoint(c)
			require.NoError(t, err)
			line, _ := json.Marshal(cp)
			held[string(line)] = true
		}
		last, err := audit.ParseCheckpoint(cps[len(cps)-1])
		require.NoError(t, err)
		assert.Equal(t, s.chain[len(s.chain)-1].Seq, last.Seq, "request %d ends with the newest", i)
	}
	assert.Len(t, held, len(s.chain), "every kept checkpoint was sent")

	// Too many for the server in one request: sent again in halves.
	audittool.SetMaxQuery(t, 1<<20)
	r, rec, err = s.verify(t, kept)
	require.NoError(t, err, "%+v", r)
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, rec.got[0])
	assert.Greater(t, len(rec.sent), 2)

	forged := s.rewrite(t)
	tampered := filepath.Join(t.TempDir(), "kept.ndjson")
	require.NoError(t, os.WriteFile(tampered, []byte(readFile(t, kept)+signed(t, s.key, forged[len(forged)-1])+"\n"), 0o600))
	require.NotEqual(t, newest, signed(t, s.key, forged[len(forged)-1]))
	// Whichever of the two at the newest seq goes with every request, and
	// however many requests it takes, the first fault is found: at seq 2.
	for name, file := range map[string]string{"the forged newest kept too": tampered, "the true newest only": kept} {
		for _, limit := range []int{1 << 20, 32 << 10, 1} {
			audittool.SetMaxQuery(t, limit)
			r, _, err = s.verify(t, file)
			require.ErrorIs(t, err, audittool.ErrNotIntact, "%s, limit %d", name, limit)
			rep := r.Report
			assert.EqualValues(t, 2, rep.FirstBadSeq, "%s, limit %d: the kept checkpoint at seq 2: %+v", name, limit, rep)
			assert.Contains(t, rep.Reason, "checkpoint mismatch")
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// TestAppendRefusesWhatDoesNotFollowTheKept: someone with the database
// and the audit key rewrites the chain at or below the newest kept
// checkpoint and signs its new head; the cron's checkpoints -append does
// not take the new checkpoint, whether the stored one at the kept seq is
// gone or signed again over the new chain.
func TestAppendRefusesWhatDoesNotFollowTheKept(t *testing.T) {
	t.Parallel()
	s := startServer(t, 8)
	s.checkpointed(t)
	ctx := s.env.Ctx()
	c := client.New(s.env.URL, s.token)
	kept := filepath.Join(t.TempDir(), "kept.ndjson")
	require.NoError(t, audittool.Checkpoints(ctx, c, kept, "", io.Discard))
	before := readFile(t, kept)
	lines := strings.Split(strings.TrimSpace(before), "\n")
	newest, err := audit.ParseCheckpoint(lines[len(lines)-1])
	require.NoError(t, err)
	s.submit(t, 2)
	s.sealed(t)

	forged := s.rewrite(t)
	su := s.superuser(t)
	sign := func(rec audit.Record) {
		cp := s.key.Sign(rec.Seq, rec.Hash, time.Now())
		_, err := su.Exec(ctx, `INSERT INTO audit_checkpoints VALUES ($1, $2, $3, $4, $5)`, cp.Seq, []byte(cp.Hash), cp.At, []byte(cp.PublicKey), cp.Signature)
		require.NoError(t, err)
	}
	sign(forged[len(forged)-1])
	err = audittool.Checkpoints(ctx, c, kept, "", io.Discard)
	require.ErrorContains(t, err, fmt.Sprintf("no stored checkpoint at seq %d", newest.Seq))
	require.ErrorContains(t, err, "nothing appended")
	require.Equal(t, before, readFile(t, kept))

	sign(forged[newest.Seq-1])
	err = audittool.Checkpoints(ctx, c, kept, "", io.Discard)
	require.ErrorIs(t, err, audittool.ErrNotIntact)
	require.ErrorContains(t, err, fmt.Sprintf("first bad seq %d: checkpoint mismatch", newest.Seq))
	require.Equal(t, before, readFile(t, kept))
}
