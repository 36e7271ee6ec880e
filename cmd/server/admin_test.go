package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/app"
	"github.com/airlockhq/airlock/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// printed is the password line reset-password prints.
var printed = regexp.MustCompile(`log in as: +admin / (\S+) +\(generated now and shown only once\)`)

// TestAdminResetPasswordCommand runs `airlock-server admin reset-password`
// as main does, on a database whose admin password no one knows: the
// generated password it prints logs in; then --password-stdin sets a
// chosen one, and bad input is refused with a clear error.
func TestAdminResetPasswordCommand(t *testing.T) {
	t.Setenv("AIRLOCK_DATABASE_URL", "")
	ctx := context.Background()
	dbURL, dir := testdb.URL(t), t.TempDir()
	flags := []string{"--database-url", dbURL, "--data-dir", dir}
	cfg := app.Config{Addr: "127.0.0.1:0", DatabaseURL: dbURL, DataDir: dir, Worker: "off", AdminPassword: "nobody-knows-this-one"}
	a, err := app.Start(ctx, cfg, quiet)
	require.NoError(t, err)
	defer a.Shutdown(ctx)
	anon := client.New(a.URL(), "")

	var out bytes.Buffer
	require.NoError(t, adminCommand(ctx, quiet, append([]string{"reset-password"}, flags...), strings.NewReader(""), &out))
	m := printed.FindStringSubmatch(out.String())
	require.NotNil(t, m, "the new password is printed: %s", out.String())
	_, _, err = anon.Login(ctx, "admin", m[1])
	require.NoError(t, err, "the printed password logs in")

	out.Reset()
	args := append([]string{"reset-password", "--password-stdin"}, flags...)
	require.NoError(t, adminCommand(ctx, quiet, args, strings.NewReader("my chosen passphrase\r\nignored\n"), &out))
	assert.NotContains(t, out.String(), "my chosen passphrase", "a chosen password is not echoed")
	_, _, err = anon.Login(ctx, "admin", "my chosen passphrase")
	require.NoError(t, err, "the first line of stdin, without its line ending, is the password")

	for name, tc := range map[string]struct {
		args  []string
		stdin string
		want  string
	}{
		"no command":      {nil, "", "usage: airlock-server admin reset-password"},
		"unknown command": {[]string{"delete-everything"}, "", "usage:"},
		"empty stdin":     {args, "", "no password on standard input"},
		"empty line":      {args, "\n", "no password on standard input"},
		"short password":  {args, "short\n", "password must be"},
		"long password":   {args, strings.Repeat("x", 5000), "password must be"},
		"unknown flag":    {[]string{"reset-password", "--bogus"}, "", "bogus"},
	} {
		err := adminCommand(ctx, quiet, tc.args, strings.NewReader(tc.stdin), io.Discard)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), tc.want, name)
	}
	_, _, err = anon.Login(ctx, "admin", "my chosen passphrase")
	require.NoError(t, err, "a refused reset changes nothing")
}
