package audittool_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/audittool"
)

// sealedChain returns a chain of one event of each kind, sealed in format
// 2 as the sealer seals them (the tests here need no database).
func sealedChain(t *testing.T, kinds ...string) []audit.Record {
	t.Helper()
	var h audit.Hasher
	prev := audit.Genesis
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	recs := make([]audit.Record, len(kinds))
	for i, k := range kinds {
		r := audit.Record{ID: int64(i + 1), At: at.Add(time.Duration(i) * time.Second), Kind: k, Actor: "alice",
			Args: json.RawMessage(`{"amount": 10, "to": "acme"}`), Seq: int64(i + 1), PrevHash: prev, SealFormat: audit.FormatV2}
		sum, err := h.Seal(prev, &r)
		require.NoError(t, err)
		r.Hash, prev = sum, sum
		recs[i] = r
	}
	return recs
}

// writeExport writes recs as an export in chain order, each line as edit
// returns it (given the line's index and its JSON), and returns its path.
func writeExport(t *testing.T, recs []audit.Record, edit func(i int, line string) string) string {
	t.Helper()
	var b strings.Builder
	for i := range recs {
		line, err := json.Marshal(&recs[i])
		require.NoError(t, err)
		if edit != nil {
			line = []byte(edit(i, string(line)))
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	p := filepath.Join(t.TempDir(), "chain.ndjson")
	require.NoError(t, os.WriteFile(p, []byte(b.String()), 0o600))
	return p
}

// newKey returns a fresh audit signing key and its public half as -key
// takes it.
func newKey(t *testing.T) (*audit.SigningKey, string) {
	t.Helper()
	seed := make([]byte, 32)
	_, err := rand.Read(seed)
	require.NoError(t, err)
	k, err := audit.NewSigningKey(seed)
	require.NoError(t, err)
	return k, base64.StdEncoding.EncodeToString(k.Public())
}

// signed returns the checkpoint line key signs for rec's seq and hash.
func signed(t *testing.T, key *audit.SigningKey, rec audit.Record) string {
	t.Helper()
	b, err := json.Marshal(key.Sign(rec.Seq, rec.Hash, rec.At.Add(time.Second)))
	require.NoError(t, err)
	return string(b)
}

// writeKept writes the kept checkpoints' file and returns its path.
func writeKept(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kept.ndjson")
	require.NoError(t, os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	return p
}

// TestOfflineReadsEachLineAsEveryReaderDoes: an export line, or a kept
// checkpoint's, that Go would read otherwise than jq, Python or a SIEM
// (a key in another case, a key given twice, a key Go ignores) is refused
// rather than verified as Go reads it.
func TestOfflineReadsEachLineAsEveryReaderDoes(t *testing.T) {
	t.Parallel()
	key, pub := newKey(t)
	recs := sealedChain(t, "action.submitted", "action.approved", "action.result")
	kept := signed(t, key, recs[2])
	ctx := context.Background()

	// The export as made verifies, blank lines and all.
	path := writeExport(t, recs, func(i int, line string) string {
		if i == 1 {
			return line + "\n"
		}
		return line
	})
	_, err := audittool.Verify(ctx, nil, audittool.VerifyOptions{Offline: path, Checkpoints: writeKept(t, kept), Key: pub})
	require.NoError(t, err)

	for _, c := range []struct{ name, from, to, want string }{
		// jq shows a denial to mallory; Go read (and hashed) the approval.
		{"a key in another case", `"kind":"action.approved","actor":"alice","args":{"amount":10,"to":"acme"}`,
			`"kind":"action.denied","actor":"alice","args":{"amount":10,"to":"mallory"},"KIND":"action.approved","ARGS":{"amount":10,"to":"acme"}`,
			`duplicate key "KIND"`},
		{"a key given twice", `"actor":"alice"`, `"actor":"mallory","actor":"alice"`, `duplicate key "actor"`},
		{"a key given twice in args", `"to":"acme"`, `"to":"mallory","to":"acme"`, `duplicate key "to"`},
		{"a key spelled in another case only", `"actor":`, `"Actor":`, `"Actor" must be spelled "actor"`},
		{"a key Go ignores", `"actor":"alice"`, `"actor":"alice","approved_by":"bob"`, `unknown field "approved_by"`},
		{"a key written with escapes", `"actor":`, `"act\u006fr":`, `field "actor" is written with escapes`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeExport(t, recs, func(i int, line string) string {
				if i != 1 {
					return line
				}
				edited := strings.Replace(line, c.from, c.to, 1)
				require.NotEqual(t, line, edited)
				return edited
			})
			r, err := audittool.Verify(ctx, nil, audittool.VerifyOptions{Offline: path, Checkpoints: writeKept(t, kept), Key: pub})
			require.Error(t, err, "report %+v", r)
			require.ErrorContains(t, err, "line 2 of the export: ")
			require.ErrorContains(t, err, c.want)
		})
	}

	// A kept checkpoint whose seq jq reads as 99 and Go as 3.
	path = writeExport(t, recs, nil)
	ambiguous := strings.Replace(kept, `"seq":3`, `"seq":99,"SEQ":3`, 1)
	_, err = audittool.Verify(ctx, nil, audittool.VerifyOptions{Offline: path, Checkpoints: writeKept(t, ambiguous), Key: pub})
	require.ErrorContains(t, err, `duplicate key "SEQ"`)
}

// TestOfflineHoldsEveryKeptCheckpoint: someone with the database and the
// audit key rewrites the chain at or below a kept checkpoint and signs a
// new one above it, which the kept file takes in; or a replayed older
// checkpoint ends the kept file, and the chain's tail is cut. The earlier
// kept line shows either.
func TestOfflineHoldsEveryKeptCheckpoint(t *testing.T) {
	t.Parallel()
	key, pub := newKey(t)
	ctx := context.Background()
	real := sealedChain(t, "action.submitted", "action.denied", "action.result")
	forged := sealedChain(t, "action.submitted", "action.approved", "action.result", "auth.login")
	kept := writeKept(t, signed(t, key, real[1]), signed(t, key, forged[3]))

	r, err := audittool.Verify(ctx, nil, audittool.VerifyOptions{Offline: writeExport(t, forged, nil), Checkpoints: kept, Key: pub})
	require.ErrorIs(t, err, audittool.ErrNotIntact)
	rep := r.Report
	require.False(t, rep.OK)
	require.EqualValues(t, 2, rep.FirstBadSeq, "the kept checkpoint at seq 2: %+v", rep)
	require.Contains(t, rep.Reason, "checkpoint mismatch")

	// The real chain, its tail cut, against a kept file ending in a
	// replayed checkpoint below it.
	replayed := writeKept(t, signed(t, key, real[2]), signed(t, key, real[1]))
	r, err = audittool.Verify(ctx, nil, audittool.VerifyOptions{Offline: writeExport(t, real[:2], nil), Checkpoints: replayed, Key: pub})
	require.ErrorIs(t, err, audittool.ErrNotIntact)
	rep = r.Report
	require.EqualValues(t, 3, rep.FirstBadSeq, "%+v", rep)
	require.Contains(t, rep.Reason, "truncated")

	// Both kept lines, and the same line twice, hold on the real chain.
	r, err = audittool.Verify(ctx, nil, audittool.VerifyOptions{Offline: writeExport(t, real, nil), Checkpoints: replayed, Key: pub})
	require.NoError(t, err)
	require.True(t, r.OK)
	twice := writeKept(t, signed(t, key, real[1]), signed(t, key, real[1]), signed(t, key, real[2]))
	_, err = audittool.Verify(ctx, nil, audittool.VerifyOptions{Offline: writeExport(t, real, nil), Checkpoints: twice, Key: pub})
	require.NoError(t, err)
}

// TestOfflinePinsTheKeyFromItsFirstCheckpoint: after a rotation the kept
// file holds the old key's checkpoints, then the new key's; -key names
// the new one. A line signed otherwise after it is refused, and so is a
// key that did not sign the last line.
func TestOfflinePinsTheKeyFromItsFirstCheckpoint(t *testing.T) {
	t.Parallel()
	old, oldPub := newKey(t)
	cur, curPub := newKey(t)
	other, _ := newKey(t)
	ctx := context.Background()
	recs := sealedChain(t, "action.submitted", "action.approved", "action.result", "auth.login")
	export := writeExport(t, recs, nil)
	rotated := writeKept(t, signed(t, old, recs[0]), signed(t, old, recs[1]), signed(t, cur, recs[2]), signed(t, cur, recs[3]))

	_, err := audittool.Verify(ctx, nil, audittool.VerifyOptions{Offline: export, Checkpoints: rotated, Key: curPub})
	require.NoError(t, err)
	_, err = audittool.Verify(ctx, nil, audittool.VerifyOptions{Offline: export, Checkpoints: rotated, Key: oldPub})
	require.ErrorIs(t, err, audittool.ErrWrongKey, "the old key did not sign the newest")
	require.ErrorContains(t, err, "the one at seq 3 is signed by "+curPub)

	for name, kept := range map[string]string{
		"another key after it":   writeKept(t, signed(t, cur, recs[0]), signed(t, other, recs[1]), signed(t, cur, recs[2])),
		"the old key after it":   writeKept(t, signed(t, old, recs[0]), signed(t, cur, recs[1]), signed(t, old, recs[2])),
		"the key signed nothing": writeKept(t, signed(t, other, recs[0])),
	} {
		_, err := audittool.Verify(ctx, nil, audittool.VerifyOptions{Offline: export, Checkpoints: kept, Key: curPub})
		require.ErrorIs(t, err, audittool.ErrWrongKey, name)
	}
}

// fakeServer answers the checkpoints export with lines, and a
// verification with report, recording the verifications' queries.
type fakeServer struct {
	lines    []string
	report   string
	verified []url.Values
	after    []string
}

func (f *fakeServer) start(t *testing.T) *client.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/audit/checkpoints":
			f.after = append(f.after, r.URL.Query().Get("after"))
			for _, l := range f.lines {
				fmt.Fprintln(w, l)
			}
		case "/api/v1/audit/verify":
			f.verified = append(f.verified, r.URL.Query())
			fmt.Fprint(w, f.report)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return client.New(srv.URL, "token")
}

// TestAppendKeepsOnlyWhatFollowsTheNewestKept: checkpoints -append takes
// only checkpoints above the newest kept one, in seq order, and only once
// the server's walk from the newest kept one holds them all.
func TestAppendKeepsOnlyWhatFollowsTheNewestKept(t *testing.T) {
	t.Parallel()
	key, _ := newKey(t)
	recs := sealedChain(t, "action.submitted", "action.approved", "action.result", "auth.login", "auth.logout")
	cp := func(seq int) string { return signed(t, key, recs[seq-1]) }
	ok := `{"ok":true,"checked":2,"head":{"seq":5,"hash":"00"},"from":3}`
	ctx := context.Background()

	for _, c := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"an older checkpoint replayed", []string{cp(2)}, "the checkpoint at seq 2 after the one at seq 3"},
		{"the newest kept one again", []string{cp(3)}, "the checkpoint at seq 3 after the one at seq 3"},
		{"out of order", []string{cp(5), cp(4)}, "the checkpoint at seq 4 after the one at seq 5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			kept := writeKept(t, cp(1), cp(3))
			before := readFile(t, kept)
			fake := &fakeServer{lines: c.lines, report: ok}
			err := audittool.Checkpoints(ctx, fake.start(t), kept, "", io.Discard)
			require.ErrorContains(t, err, c.want)
			require.ErrorContains(t, err, "nothing appended")
			require.Equal(t, before, readFile(t, kept), "nothing appended")
		})
	}

	// The chain does not lead from the newest kept checkpoint to the new
	// ones: nothing appended.
	kept := writeKept(t, cp(3), cp(1)) // the newest is not the last line
	before := readFile(t, kept)
	fake := &fakeServer{lines: []string{cp(4), cp(5)},
		report: `{"ok":false,"checked":0,"head":{"seq":5,"hash":"00"},"from":3,"first_bad_seq":3,"reason":"checkpoint mismatch: …"}`}
	err := audittool.Checkpoints(ctx, fake.start(t), kept, "", io.Discard)
	require.ErrorIs(t, err, audittool.ErrNotIntact)
	require.ErrorContains(t, err, "first bad seq 3: checkpoint mismatch")
	require.Equal(t, before, readFile(t, kept))
	require.Equal(t, []string{"3"}, fake.after, "asked for those after the newest kept")
	require.Len(t, fake.verified, 1)
	assert.Equal(t, "3", fake.verified[0].Get("from"), "the walk starts from the newest kept checkpoint")
	var seqs []int64
	for _, v := range fake.verified[0]["checkpoint"] {
		c, err := audit.ParseCheckpoint(v)
		require.NoError(t, err)
		seqs = append(seqs, c.Seq)
	}
	assert.Equal(t, []int64{3, 4, 5}, seqs, "the newest kept and every new one")

	// It does: they are kept.
	fake.report = ok
	require.NoError(t, audittool.Checkpoints(ctx, fake.start(t), kept, "", io.Discard))
	assert.Equal(t, before+cp(4)+"\n"+cp(5)+"\n", readFile(t, kept))

	// An empty file takes what comes, as it comes.
	empty := filepath.Join(t.TempDir(), "kept.ndjson")
	fake = &fakeServer{lines: []string{cp(1), cp(2)}}
	require.NoError(t, audittool.Checkpoints(ctx, fake.start(t), empty, "", io.Discard))
	assert.Equal(t, cp(1)+"\n"+cp(2)+"\n", readFile(t, empty))
	assert.Empty(t, fake.verified)
}

// TestOfflineSaysWhatAnchorsTheChain: an export verified without kept
// checkpoints is only consistent (anyone can write one, hashes and all):
// the report says that nothing anchored it, and a key to pin, with no
// kept checkpoints to pin it on, is refused rather than ignored.
func TestOfflineSaysWhatAnchorsTheChain(t *testing.T) {
	t.Parallel()
	key, pub := newKey(t)
	ctx := context.Background()
	forged := sealedChain(t, "action.submitted", "action.denied") // no secret needed
	path := writeExport(t, forged, nil)

	r, err := audittool.Verify(ctx, nil, audittool.VerifyOptions{Offline: path, Key: pub})
	require.ErrorIs(t, err, audittool.ErrKeyWithoutCheckpoints, "report %+v", r)

	r, err = audittool.Verify(ctx, nil, audittool.VerifyOptions{Offline: path})
	require.NoError(t, err)
	b, err := json.Marshal(r)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"ok":true`)
	assert.Contains(t, string(b), `"kept":0,"anchored":false`)

	recs := sealedChain(t, "action.submitted", "action.approved", "action.result")
	kept := writeKept(t, signed(t, key, recs[0]), signed(t, key, recs[1]), signed(t, key, recs[1]))
	r, err = audittool.Verify(ctx, nil, audittool.VerifyOptions{Offline: writeExport(t, recs, nil), Checkpoints: kept, Key: pub})
	require.NoError(t, err)
	b, err = json.Marshal(r)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"kept":2,"covered_through":2,"anchored":true`, "the same checkpoint twice is one; seq 3 rests on nothing kept")
}
