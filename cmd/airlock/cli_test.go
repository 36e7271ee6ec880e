package main

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
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
	"github.com/airlockhq/airlock/internal/policy"
	"github.com/airlockhq/airlock/internal/testdb"
)

const policyYAML = `# billing's policy
default: deny
rules:
  - id: read
    tool: fs.read
    effect: allow
  - id: pay
    tool: payments.send
    effect: approve
    approvals: 1
    timeout: 15m
settings:
  max_pending: 7
`

// TestPolicyApplyRoundTrips applies a YAML file, reads it back, and
// refuses a stale --if-version.
func TestPolicyApplyRoundTrips(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	require.NoError(t, env.Admin.CreateAgent(env.Ctx(), "billing", "Billing"))
	r := newRunner(t, env.URL, env.Admin.Token())
	dir := t.TempDir()
	file := filepath.Join(dir, "billing.yaml")
	require.NoError(t, os.WriteFile(file, []byte(policyYAML), 0o600))

	res := r.run("", "policy", "apply", "--agent", "billing", "-f", file)
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "+++ "+file)
	assert.Contains(t, res.stdout, "+- effect: allow\n+  id: read\n")
	assert.Contains(t, res.stdout, "applied agent billing version 1 (was 0)")

	// get returns what was applied, in both outputs.
	want, err := policy.ParseDocument([]byte(policyYAML))
	require.NoError(t, err)
	res = r.run("", "policy", "get", "--agent", "billing", "--output", "json")
	require.Equal(t, 0, res.code, "%+v", res)
	var pv client.PolicyVersion
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &pv))
	assert.Equal(t, 1, pv.Version)
	js, err := json.Marshal(pv.Document)
	require.NoError(t, err)
	got, err := policy.ParseDocument(js)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	res = r.run("", "policy", "get", "--agent", "billing")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.True(t, strings.HasPrefix(res.stdout, "# agent billing policy, version 1, by admin"), res.stdout)
	got, err = policy.ParseDocument([]byte(res.stdout))
	require.NoError(t, err, res.stdout)
	assert.Equal(t, want, got, "the YAML that get prints applies as is")

	// Unchanged: nothing to write.
	res = r.run("", "policy", "diff", "--agent", "billing", "-f", file)
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "no change from agent billing version 1")

	// A stale --if-version is refused by the server (412) and nothing is written.
	changed := strings.Replace(policyYAML, "max_pending: 7", "max_pending: 9", 1)
	require.NoError(t, os.WriteFile(file, []byte(changed), 0o600))
	res = r.run("", "policy", "apply", "--agent", "billing", "-f", file, "--if-version", "0")
	assert.Equal(t, 5, res.code, "%+v", res)
	assert.Equal(t, "airlock: precondition_failed: ", res.stderr[:len("airlock: precondition_failed: ")], res.stderr)
	assert.Contains(t, res.stderr, "(current version 1)")
	assert.Equal(t, 1, strings.Count(res.stderr, "\n"), "one line: %q", res.stderr)
	cur, err := env.Admin.AgentPolicy(env.Ctx(), "billing")
	require.NoError(t, err)
	assert.Equal(t, 1, cur.Version)

	// The current version applies, and the diff shows the change.
	res = r.run("", "policy", "apply", "--agent", "billing", "-f", file, "--if-version", "1", "--output", "json")
	require.Equal(t, 0, res.code, "%+v", res)
	var change policyChange
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &change))
	assert.True(t, change.Changed)
	assert.Contains(t, change.Diff, "-  max_pending: 7\n+  max_pending: 9\n")
	require.NotNil(t, change.Applied)
	assert.Equal(t, 2, change.Applied.Version)

	// The fleet policy, from stdin; a bad document is refused before any write.
	res = r.run("rules: []\nsettings:\n  max_pending: 50\n", "policy", "apply", "--fleet", "-f", "-")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "applied fleet version 1 (was 0)")
	res = r.run("rules:\n  - id: x\n    tool: a\n    effect: allow\n    bogus: 1\n", "policy", "apply", "--fleet", "-f", "-")
	assert.Equal(t, 1, res.code, "%+v", res)
	assert.True(t, strings.HasPrefix(res.stderr, "airlock: invalid: "), res.stderr)
	res = r.run("", "policy", "get")
	assert.Equal(t, 2, res.code, "no scope named: %+v", res)
	assert.Contains(t, res.stderr, "--agent ID or --fleet")
}

// TestAuditVerifyFindsTampering verifies the chain through the server and
// offline, then edits a row as the table's owner and sees it caught.
func TestAuditVerifyFindsTampering(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	auditor := env.Auditor("audrey")
	agent := env.Agent("billing", map[string]any{"rules": []map[string]any{{"id": "r", "tool": "fs.read", "effect": "allow"}}})
	for i := range 3 {
		_, err := agent.Submit(ctx, client.SubmitRequest{Tool: "fs.read", Args: map[string]any{"path": "/srv/f", "n": i}})
		require.NoError(t, err)
	}
	waitSealed(t, env)
	r := newRunner(t, env.URL, auditor.Token())

	res := r.run("", "audit", "verify")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "intact: ")

	export := filepath.Join(t.TempDir(), "chain.ndjson")
	res = r.run("", "audit", "export", "--order", "seq", "--file", export)
	require.Equal(t, 0, res.code, "%+v", res)
	res = r.run("", "audit", "verify", "--offline", export, "--output", "json")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Contains(t, res.stdout, `"ok": true`)
	assert.Contains(t, res.stdout, `"anchored": false`)
	res = r.run("", "audit", "verify", "--offline", export)
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "consistent, but not anchored: ")
	assert.Contains(t, res.stderr, "no kept checkpoint anchors the export")
	res = r.run("", "audit", "verify", "--offline", export, "--key", "AAAA")
	assert.Equal(t, 2, res.code, "%+v", res)
	assert.Contains(t, res.stderr, "--key pins the key of the kept checkpoints: name their file (--checkpoints)")

	res = r.run("", "audit", "query", "--agent", "billing", "--kind", "action.submitted")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Equal(t, 3, strings.Count(res.stdout, "action.submitted"), res.stdout)

	// Offline: an edited export.
	b, err := os.ReadFile(export)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	lines[1] = strings.Replace(lines[1], `"actor":"`, `"actor":"mallory-`, 1)
	require.NoError(t, os.WriteFile(export, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	res = r.run("", "audit", "verify", "--offline", export)
	assert.Equal(t, 6, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "NOT INTACT: first bad seq 2")
	assert.Equal(t, "airlock: not_intact: the audit chain is not intact\n", res.stderr)

	// A stored checkpoint covering seq 3, signed before the change below
	// (the sealer makes one within a second of the chain's growth).
	var cpSeq int64
	require.Eventually(t, func() bool {
		require.NoError(t, env.App.Pool().QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM audit_checkpoints`).Scan(&cpSeq))
		return cpSeq >= 3
	}, 15*time.Second, 50*time.Millisecond)

	// In the database, as the table's owner (triggers off).
	su, err := pgx.Connect(ctx, testdb.Cluster(t).URL(env.App.Pool().Config().ConnConfig.Database))
	require.NoError(t, err)
	defer su.Close(ctx)
	for _, stmt := range []string{`SET session_replication_role = replica`, `UPDATE audit_events SET actor = 'mallory' WHERE id = (SELECT id FROM audit_seals WHERE seq = 3)`} {
		_, err := su.Exec(ctx, stmt)
		require.NoError(t, err)
	}
	res = r.run("", "audit", "verify")
	assert.Equal(t, 6, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "NOT INTACT: first bad seq 3")

	// From the stored checkpoint signed before the change, at or after
	// its seq (as if the events up to it had been archived): what follows
	// it is intact.
	from := strconv.FormatInt(cpSeq, 10)
	res = r.run("", "audit", "verify", "--from", from)
	assert.Equal(t, 0, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "intact after the checkpoint at seq "+from+": ")
	res = r.run("", "audit", "verify", "--from", from, "--offline", export)
	assert.Equal(t, 2, res.code, "%+v", res)
	res = r.run("", "audit", "verify", "--from", "999999")
	assert.Equal(t, 1, res.code, "no stored checkpoint there: %+v", res)
	assert.Contains(t, res.stderr, "no stored checkpoint at seq 999999")

	// Keeping checkpoints; after a key rotation, --accept-key names the
	// new key (TestAuditctlAcrossAKeyRotation rotates one).
	kept := filepath.Join(t.TempDir(), "kept.ndjson")
	res = r.run("", "audit", "checkpoints", "--append", kept)
	require.Equal(t, 0, res.code, "%+v", res)
	cp, err := audit.ParseCheckpoint(lastLine(t, kept))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, cp.Seq, cpSeq)
	res = r.run("", "audit", "checkpoints", "--append", kept, "--accept-key", "AAAA")
	assert.Equal(t, 2, res.code, "%+v", res)
	assert.Contains(t, res.stderr, "--accept-key: bad key to change to")
	res = r.run("", "audit", "checkpoints", "--accept-key", base64.StdEncoding.EncodeToString(cp.PublicKey))
	assert.Equal(t, 2, res.code, "without a file to keep them in: %+v", res)
}

func lastLine(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// TestAuditVerifyReportsUnsealedEvents: an event the sealer will never
// reach (the owner's, backdated, under an id below the sealer's
// watermark) makes the verification not intact once it is older than the
// grace, with no bad seq: the chain itself is whole.
func TestAuditVerifyReportsUnsealedEvents(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	auditor := env.Auditor("audrey")
	waitSealed(t, env)
	r := newRunner(t, env.URL, auditor.Token())
	res := r.run("", "audit", "verify")
	require.Equal(t, 0, res.code, "%+v", res)

	su, err := pgx.Connect(ctx, testdb.Cluster(t).URL(env.App.Pool().Config().ConnConfig.Database))
	require.NoError(t, err)
	defer su.Close(ctx)
	_, err = su.Exec(ctx, `INSERT INTO audit_events (id, at, kind, actor) VALUES (-5, now() - interval '1 hour', 'action.approved', 'reviewer:backdated')`)
	require.NoError(t, err)
	res = r.run("", "audit", "verify")
	assert.Equal(t, 6, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "NOT INTACT: unsealed: 1 events older than 5s are not sealed (the first: event -5, at ")
	res = r.run("", "audit", "verify", "--output", "json")
	assert.Equal(t, 6, res.code, "%+v", res)
	assert.Contains(t, res.stdout, `"unsealed": 1`)
	assert.NotContains(t, res.stdout, "first_bad_seq")
}

// waitSealed waits until every event in the database is sealed.
func waitSealed(t *testing.T, env *apptest.Env) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		var unsealed int
		require.NoError(t, env.App.Pool().QueryRow(env.Ctx(), `SELECT count(*) FROM audit_events e WHERE NOT EXISTS (SELECT FROM audit_seals s WHERE s.id = e.id)`).Scan(&unsealed))
		if unsealed == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "events left unsealed")
		time.Sleep(50 * time.Millisecond)
	}
}

// TestApproveRefusesAPhraseNotTyped pipes the right phrase into approve:
// refused, and the action stays pending.
func TestApproveRefusesAPhraseNotTyped(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("billing", map[string]any{"rules": []map[string]any{{"id": "pay", "tool": "payments.send", "effect": "approve"}}})
	reviewer := env.Reviewer("rita")
	a, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "payments.send", Args: map[string]any{"amount": 5}})
	require.NoError(t, err)
	seen, err := reviewer.Get(env.Ctx(), a.ID)
	require.NoError(t, err)
	require.NotEmpty(t, seen.ConfirmationPhrase)

	r := newRunner(t, env.URL, reviewer.Token())
	res := r.run(seen.ConfirmationPhrase+"\n", "actions", "approve", a.ID)
	assert.Equal(t, 2, res.code, "%+v", res)
	assert.True(t, strings.HasPrefix(res.stderr, "airlock: not_a_terminal: "), res.stderr)
	assert.Equal(t, 1, strings.Count(res.stderr, "\n"))
	res = r.run("", "actions", "approve", a.ID, "--confirmation", seen.ConfirmationPhrase)
	assert.Equal(t, 2, res.code, "no flag takes the phrase: %+v", res)
	assert.True(t, strings.HasPrefix(res.stderr, "airlock: usage: "), res.stderr)
	still, err := reviewer.Get(env.Ctx(), a.ID)
	require.NoError(t, err)
	assert.Equal(t, "pending", still.Status)

	// The other commands on the same action.
	res = r.run("", "actions", "list", "--status", "pending", "--output", "json")
	require.Equal(t, 0, res.code, "%+v", res)
	var page client.ActionPage
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &page))
	require.Len(t, page.Actions, 1)
	assert.Equal(t, a.ID, page.Actions[0].ID)
	res = r.run("", "actions", "wait", a.ID, "--timeout", "200ms")
	assert.Equal(t, 7, res.code, "still pending: %+v", res)
	res = r.run("", "actions", "deny", a.ID, "--reason", "not today")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "denied")
	res = r.run("", "actions", "wait", a.ID)
	assert.Equal(t, 2, res.code, "%+v", res)
	assert.Contains(t, res.stderr, "airlock: denied: ")
	res = r.run("", "actions", "get", "no-such-action")
	assert.Equal(t, 3, res.code, "%+v", res)
	assert.True(t, strings.HasPrefix(res.stderr, "airlock: not_found: "), res.stderr)
}

// TestLoginAndAgents logs in with the password on stdin (not a terminal),
// keeps the token 0600 and uses it; then drives agents and tokens.
func TestLoginAndAgents(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	r := newRunner(t, env.URL, "")
	res := r.run("", "agents", "list")
	assert.Equal(t, 4, res.code, "no token: %+v", res)
	assert.Contains(t, res.stderr, "airlock login")

	res = r.run(apptest.AdminPassword+"\n", "login", "--username", "admin")
	require.Equal(t, 0, res.code, "%+v", res)
	path := filepath.Join(r.home, ".config", "airlock", "token")
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	res = r.run("", "agents", "create", "billing", "--name", "Billing bot", "--description", "pays")
	require.Equal(t, 0, res.code, "%+v", res)
	res = r.run("", "agents", "list", "--output", "json")
	require.Equal(t, 0, res.code, "%+v", res)
	var list client.AgentList
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &list))
	require.Len(t, list.Agents, 1)
	assert.Equal(t, "Billing bot", list.Agents[0].Name)
	assert.Equal(t, "admin", list.Agents[0].Owner)

	res = r.run("", "tokens", "issue", "billing", "--ttl", "1h", "--output", "json")
	require.Equal(t, 0, res.code, "%+v", res)
	var tok client.AgentToken
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &tok))
	agent := env.Client(tok.Token)
	_, err = agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "fs.read", Args: map[string]any{}})
	require.NoError(t, err)

	res = r.run("", "agents", "suspend", "billing")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "billing: suspended")
	res = r.run("", "agents", "get", "billing")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "owner:       admin")
	assert.Contains(t, res.stdout, "state:       suspended since ")
	res = r.run("", "agents", "resume", "billing")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "billing: active")

	res = r.run("", "tokens", "revoke", tok.TokenID)
	require.Equal(t, 0, res.code, "%+v", res)
	_, err = agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "fs.read", Args: map[string]any{}})
	assert.Equal(t, 401, client.StatusOf(err))

	res = r.run("", "grants", "list")
	require.Equal(t, 0, res.code, "%+v", res)
	res = r.run("", "version")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.True(t, strings.HasPrefix(res.stdout, "airlock "), res.stdout)

	// AIRLOCK_TOKEN comes first.
	r.token = "not-a-token"
	res = r.run("", "agents", "list")
	assert.Equal(t, 4, res.code, "%+v", res)
	assert.True(t, strings.HasPrefix(res.stderr, "airlock: unauthorized: "), res.stderr)
	r.token = ""

	res = r.run("", "logout")
	require.Equal(t, 0, res.code, "%+v", res)
	_, err = os.Stat(path)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestHelpAndCompletion: --help on every command, and the completion
// scripts and candidates.
func TestHelpAndCompletion(t *testing.T) {
	t.Parallel()
	r := newRunner(t, "http://127.0.0.1:1", "")
	for _, args := range [][]string{{}, {"policy"}, {"policy", "apply"}, {"actions", "approve"}, {"hook", "claude-code"}, {"audit", "verify"}} {
		res := r.run("", append(args, "--help")...)
		assert.Equal(t, 0, res.code, "%v: %+v", args, res)
		assert.Contains(t, res.stdout, "Usage: airlock", args)
	}
	for _, shell := range []string{"bash", "zsh"} {
		res := r.run("", "completion", shell)
		require.Equal(t, 0, res.code, "%+v", res)
		assert.Contains(t, res.stdout, "airlock __complete")
	}
	// The bash script, as bash runs it.
	script := r.run("", "completion", "bash").stdout
	bash := exec.Command("bash", "-c", script+`COMP_WORDS=(airlock policy ap); COMP_CWORD=2; _airlock; echo "${COMPREPLY[@]}"`)
	bash.Env = append(r.env(), "PATH="+filepath.Dir(binary)+":"+os.Getenv("PATH"))
	out, err := bash.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "apply\n", string(out))

	res := r.run("", "__complete", "policy")
	assert.Equal(t, []string{"--help", "--output", "--url", "apply", "diff", "get"}, strings.Fields(res.stdout))
	res = r.run("", "__complete", "actions", "approve", "--scope")
	assert.Equal(t, []string{"once", "conversation", "always"}, strings.Fields(res.stdout))
	res = r.run("", "no-such-command")
	assert.Equal(t, 2, res.code)
	assert.True(t, strings.HasPrefix(res.stderr, "airlock: usage: "), res.stderr)
}

// TestProxyResultCapHeldToTheScan: the proxy refuses to give the model
// more of a result than the injection scan reads (1 MiB), rather than
// cutting silently; the server's setting refuses the same.
func TestProxyResultCapHeldToTheScan(t *testing.T) {
	t.Parallel()
	r := newRunner(t, "http://127.0.0.1:1", "unused")
	for _, n := range []string{"4194304", "100"} {
		res := r.run("", "mcp", "proxy", "--server", "up", "--max-result-bytes", n)
		assert.Equal(t, exitUsage, res.code, "%s: %+v", n, res)
		assert.Contains(t, res.stderr, "--max-result-bytes must be between 1024 and 1048576", n)
	}
}
