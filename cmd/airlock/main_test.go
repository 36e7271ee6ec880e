package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/testdb"
)

// binary is the airlock binary the tests run, built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "airlock-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "airlock")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building airlock: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	testdb.Main(m, func() { os.RemoveAll(dir) })
}

// result is how one run of the binary ended.
type result struct {
	code           int
	stdout, stderr string
}

// runner runs the binary against one server with one token, in an
// environment of its own (its own config directory).
type runner struct {
	t     *testing.T
	url   string
	token string
	home  string
}

func newRunner(t *testing.T, url, token string) *runner {
	return &runner{t: t, url: url, token: token, home: t.TempDir()}
}

// env is the environment the binary sees: nothing of the test's own.
func (r *runner) env() []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + r.home, "XDG_CONFIG_HOME=" + filepath.Join(r.home, ".config"),
		"AIRLOCK_URL=" + r.url}
	if r.token != "" {
		env = append(env, "AIRLOCK_TOKEN="+r.token)
	}
	return env
}

// run runs the binary with stdin (a pipe, never a terminal) and waits.
func (r *runner) run(stdin string, args ...string) result {
	r.t.Helper()
	cmd := r.command(stdin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(r.t, err)
	}
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func (r *runner) command(stdin string, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	r.t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = r.env()
	cmd.Stdin = strings.NewReader(stdin)
	return cmd
}
