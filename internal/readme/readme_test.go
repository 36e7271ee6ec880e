// Package readme_test runs the README's shell examples, as a new user
// would paste them, against a fresh server, so that the README cannot
// drift from what Airlock does.
package readme_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// block is one fenced shell example.
type block struct {
	line int
	info string
	body string
}

// shellBlocks returns the README's ```sh blocks in order.
func shellBlocks(t *testing.T, readme []byte) []block {
	t.Helper()
	var out []block
	var cur *block
	sc := bufio.NewScanner(bytes.NewReader(readme))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```sh"):
			cur = &block{line: n, info: strings.TrimSpace(strings.TrimPrefix(line, "```"))}
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.body += line + "\n"
		}
	}
	require.NoError(t, sc.Err())
	require.Nil(t, cur, "an unclosed code block")
	return out
}

// TestREADMEExamplesRun runs every ```sh block of the README in order, in
// one shell as a user following it in one terminal would, against a fresh
// server whose address replaces localhost:8080. Blocks marked
// `sh long-running` start servers or the test suite and are not run (the
// test suite and the server itself cover them).
func TestREADMEExamplesRun(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README test needs %s (apt-get install %s): %v", tool, tool, err)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	blocks := shellBlocks(t, readme)
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	ran := 0
	for _, b := range blocks {
		switch b.info {
		case "sh":
			script.WriteString("# README line " + strconv.Itoa(b.line) + "\n" + b.body)
			ran++
		case "sh long-running":
		default:
			t.Fatalf("README line %d: a shell block must be ```sh (run by this test) or ```sh long-running, not ```%s", b.line, b.info)
		}
	}
	require.GreaterOrEqual(t, ran, 3, "the walkthrough, the worker token and auditctl")

	env := apptest.Start(t)
	host := strings.TrimPrefix(env.URL, "http://")
	text := strings.ReplaceAll(script.String(), "localhost:8080", host)
	require.Equal(t, apptest.AdminPassword, regexp.MustCompile(`PASSWORD='([^']*)'`).FindStringSubmatch(text)[1],
		"the walkthrough logs in with the password the README's make run sets")

	dir := t.TempDir()
	var out []byte
	for _, name := range []string{"auditctl", "airlock"} {
		build := exec.Command("go", "build", "-o", filepath.Join(dir, "bin", name), "./cmd/"+name)
		build.Dir = "../.."
		out, err = build.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", text)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8")
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "the README's examples failed:\n%s\n--- script ---\n%s", out, text)
	require.Contains(t, "\n"+string(out), "\napproved\n", "the walkthrough ends with the agent's action approved:\n%s", out)
	require.Equal(t, 4, strings.Count(string(out), `"ok": true`), "the audit chain verifies, online, from a checkpoint and offline, from the start and from a kept checkpoint:\n%s", out)
	require.Equal(t, 2, strings.Count(string(out), `"from": `), "the verifications from a checkpoint say so:\n%s", out)
}
