package worker

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/airlockhq/airlock/internal/sandbox"
)

// TestResultSaysWhatWasNotWrittenBack: a run whose write-back left out
// files that deny_paths or read_only_paths cover says so at the end of
// its stderr, so that the agent and the reviewer do not read a clean
// success. Before, the list stayed in the sandbox's result (found by a
// review).
func TestResultSaysWhatWasNotWrittenBack(t *testing.T) {
	t.Parallel()
	r := resultOf(sandbox.Result{ExitCode: 0, Stderr: []byte("warning: x"), NotWrittenBack: []string{".env", "sub/.git"}})
	assert.Equal(t, "warning: x\nairlock: not written back (deny_paths or read_only_paths cover them): .env, sub/.git\n", r.Stderr)
	assert.Empty(t, r.Error, "the run itself succeeded")
	clean := resultOf(sandbox.Result{Stdout: []byte("ok\n"), Stderr: []byte("")})
	assert.Equal(t, "", clean.Stderr)
	assert.Equal(t, "ok\n", clean.Stdout)
}
