package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
)

// TestTypedPhrase covers the typed path of approve: on a terminal the
// typed line is the confirmation; anything else is refused unread.
func TestTypedPhrase(t *testing.T) {
	t.Parallel()
	var prompt bytes.Buffer
	got, err := typedPhrase(strings.NewReader("  blue otter river \n"), true, &prompt, "blue otter river")
	require.NoError(t, err)
	assert.Equal(t, "blue otter river", got)
	assert.Contains(t, prompt.String(), "type the confirmation phrase: blue otter river")

	in := strings.NewReader("blue otter river\n")
	_, err = typedPhrase(in, false, &prompt, "blue otter river")
	assert.Equal(t, errNotTerminal, err)
	assert.Equal(t, 17, in.Len(), "nothing read from a pipe")

	_, err = typedPhrase(strings.NewReader("\n"), true, &prompt, "p")
	assert.Error(t, err, "nothing typed")
	_, err = typedPhrase(strings.NewReader(""), true, &prompt, "p")
	assert.Error(t, err, "end of input")

	prompt.Reset()
	_, _ = typedPhrase(strings.NewReader("x\n"), true, &prompt, "p\x1b[2Jq")
	assert.NotContains(t, prompt.String(), "\x1b", "escapes never reach the terminal")
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		code string
		exit int
	}{
		{&client.Error{Status: 404, Code: "not_found", Message: "no such\naction"}, "not_found", exitNotFound},
		{&client.Error{Status: 401, Code: "unauthorized", Message: "x"}, "unauthorized", exitForbidden},
		{&client.Error{Status: 403, Code: "forbidden", Message: "x"}, "forbidden", exitForbidden},
		{&client.Error{Status: 412, Code: "precondition_failed", Message: "x", Details: map[string]any{"current_version": 3}}, "precondition_failed", exitConflict},
		{&client.Error{Status: 500, Code: "internal", Message: "x"}, "internal", exitError},
		{usageError("bad"), "usage", exitUsage},
		{errors.New("other"), "error", exitError},
	} {
		code, msg, exit := describe(tc.err)
		assert.Equal(t, tc.code, code)
		assert.Equal(t, tc.exit, exit, tc.code)
		assert.NotContains(t, msg, "\n")
	}
	_, msg, _ := describe(&client.Error{Status: 412, Code: "precondition_failed", Message: "stale", Details: map[string]any{"current_version": 3}})
	assert.Equal(t, "stale (current version 3)", msg)
}

// TestDescribeHungServer: a server that accepts and never answers, or
// stops in the middle of an answer, is unreachable (exit 1) once the
// client's own timeout gives up on it; exit 7 is only actions wait's
// "still pending".
func TestDescribeHungServer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				req, err := http.ReadRequest(bufio.NewReader(conn))
				if err == nil && req.URL.Path == "/api/v1/agents" {
					// Headers, then a body that never comes.
					_, _ = conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"))
				}
				<-done
			}()
		}
	}()
	// The CLI's client with a short timeout in place of its 90 s.
	cl := client.New("http://"+ln.Addr().String(), "tok").WithHTTPClient(&http.Client{Timeout: 100 * time.Millisecond})
	for name, path := range map[string]string{"no answer": "/api/v1/users", "half an answer": "/api/v1/agents"} {
		_, err := cl.Do(context.Background(), http.MethodGet, path, nil, nil)
		require.Error(t, err, name)
		code, msg, exit := describe(err)
		assert.Equal(t, "unreachable", code, "%s: %s", name, msg)
		assert.Equal(t, exitError, exit, "%s: %s", name, msg)
	}
}

func TestUnifiedDiff(t *testing.T) {
	t.Parallel()
	assert.Empty(t, unifiedDiff("a", "b", "x\ny\n", "x\ny\n"))
	assert.Equal(t, "--- a\n+++ b\n@@ -1,3 +1,3 @@\n x\n-y\n+Y\n z\n", unifiedDiff("a", "b", "x\ny\nz\n", "x\nY\nz\n"))
	assert.Equal(t, "--- a\n+++ b\n@@ -0,0 +1,2 @@\n+x\n+y\n", unifiedDiff("a", "b", "", "x\ny\n"))
	long := strings.Repeat("same\n", 20)
	d := unifiedDiff("a", "b", "one\n"+long+"two\n", "ONE\n"+long+"TWO\n")
	assert.Equal(t, 2, strings.Count(d, "@@ -"), "two hunks: %s", d)
}

func TestSafeText(t *testing.T) {
	t.Parallel()
	assert.Equal(t, `a\u001b[31mb\u202e`, safeText("a\x1b[31mb\u202e"))
	assert.Equal(t, "plain é", safeText("plain é"))
}
