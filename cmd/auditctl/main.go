// Command auditctl verifies and exports Airlock's audit trail. It is the
// same code as `airlock audit` (internal/audittool), kept with its own flags
// and exit codes for the scripts that already call it.
//
//	auditctl verify [-checkpoints FILE [-key KEY]] [-from SEQ]
//	                                                 the server walks the chain (and holds it against every checkpoint in FILE)
//	auditctl verify -offline EXPORT [-checkpoints FILE [-key KEY] [-from SEQ]]
//	                                                 walk an export made with `export -order seq` here, trusting no server
//	auditctl export [-order seq] [filters] [-o FILE]  NDJSON, one event per line
//	auditctl checkpoints [-append FILE [-accept-key KEY]]  the signed checkpoints; with -append, only the new ones, added to FILE
//
// It talks to the server's HTTP API as an auditor: AIRLOCK_URL (default
// http://127.0.0.1:8080) and either AIRLOCK_TOKEN or AIRLOCK_USERNAME and
// AIRLOCK_PASSWORD (flags -url, -token, -user, -password override them).
// verify exits 1 when the chain is not intact, checkpoints -append when it
// does not lead from the newest kept checkpoint to the new ones (nothing
// is appended); 2 on any other error. The report says whether a kept
// checkpoint anchored the chain ("anchored"); offline, when none did,
// verify warns: anyone can make an export that is consistent.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/audittool"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	code, err := run(ctx, os.Args[1:], os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "auditctl:", err)
	}
	os.Exit(code)
}

const usage = `usage: auditctl [-url URL] [-token T | -user U -password P] <command> [flags]

commands:
  verify [-checkpoints FILE [-key KEY]] [-from SEQ] the server verifies the chain (and against every checkpoint in FILE,
                                                    signed by KEY); -from starts after the stored checkpoint at SEQ
  verify -offline EXPORT [-checkpoints FILE [-key KEY] [-from SEQ]]
                                                    verify an export made with "export -order seq" locally;
                                                    -from starts after FILE's checkpoint at SEQ
  export [-order id|seq] [filters] [-o FILE]        NDJSON export; filters: -correlation-id -agent -conversation-id
                                                    -action-id -kind -since -until -cursor -limit
  checkpoints [-append FILE [-accept-key KEY]]      signed checkpoints as NDJSON (with -append: the new ones, added to FILE;
                                                    -accept-key: the new audit key after a rotation)`

func run(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	global := flag.NewFlagSet("auditctl", flag.ContinueOnError)
	global.Usage = func() { fmt.Fprintln(global.Output(), usage) }
	base := global.String("url", env("AIRLOCK_URL", "http://127.0.0.1:8080"), "server URL (AIRLOCK_URL)")
	token := global.String("token", os.Getenv("AIRLOCK_TOKEN"), "auditor token (AIRLOCK_TOKEN)")
	user := global.String("user", os.Getenv("AIRLOCK_USERNAME"), "log in as (AIRLOCK_USERNAME)")
	password := global.String("password", os.Getenv("AIRLOCK_PASSWORD"), "password (AIRLOCK_PASSWORD)")
	if err := global.Parse(args); err != nil {
		return 2, nil
	}
	if global.NArg() == 0 {
		global.Usage()
		return 2, nil
	}
	connect := func() (*client.Client, error) {
		c := client.New(*base, *token)
		if *token == "" && *user != "" {
			logged, _, err := c.Login(ctx, *user, *password)
			return logged, err
		}
		if *token == "" {
			return nil, errors.New("set AIRLOCK_TOKEN, or AIRLOCK_USERNAME and AIRLOCK_PASSWORD")
		}
		return c, nil
	}
	var err error
	cmd, rest := global.Arg(0), global.Args()[1:]
	switch cmd {
	case "verify":
		err = verify(ctx, rest, stdout, connect)
	case "export":
		err = export(ctx, rest, stdout, connect)
	case "checkpoints":
		err = checkpoints(ctx, rest, stdout, connect)
	default:
		global.Usage()
		return 2, fmt.Errorf("unknown command %q", cmd)
	}
	switch {
	case errors.Is(err, audittool.ErrNotIntact) && cmd == "verify":
		return 1, nil // the report says why
	case errors.Is(err, audittool.ErrNotIntact):
		return 1, err
	case errors.Is(err, flag.ErrHelp):
		return 2, nil
	case errors.As(err, new(warning)):
		return 0, err
	case err != nil:
		return 2, err
	}
	return 0, nil
}

func verify(ctx context.Context, args []string, stdout io.Writer, connect audittool.Connect) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	var o audittool.VerifyOptions
	fs.StringVar(&o.Offline, "offline", "", "verify this export (made with export -order seq) locally instead of asking the server")
	fs.StringVar(&o.Checkpoints, "checkpoints", "", "NDJSON file of checkpoints kept elsewhere (each line is held against the chain)")
	fs.StringVar(&o.Key, "key", "", "with -checkpoints: the audit public key (base64) the kept checkpoints must be signed with (from its first on)")
	fs.Int64Var(&o.From, "from", 0, "start after the checkpoint at this seq (the events up to it archived): the stored one, or with -offline the kept one in -checkpoints")
	if err := fs.Parse(args); err != nil {
		return err
	}
	report, err := audittool.Verify(ctx, connect, o)
	switch {
	case errors.Is(err, audittool.ErrWrongKey):
		return errors.New("the kept checkpoints are not signed by -key" + strings.TrimPrefix(err.Error(), audittool.ErrWrongKey.Error()))
	case errors.Is(err, audittool.ErrKeyWithoutCheckpoints):
		return errors.New("-key pins the key of the kept checkpoints: name their file (-checkpoints)")
	}
	if report != nil {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return err
		}
	}
	if err == nil && o.Offline != "" && !report.Anchored {
		return warning("no kept checkpoint anchors the export: it is consistent, as anyone can make one (hold it against the kept checkpoints: -checkpoints)")
	}
	return err
}

// warning is said on stderr, and the command succeeds.
type warning string

func (w warning) Error() string { return "warning: " + string(w) }

func export(ctx context.Context, args []string, stdout io.Writer, connect audittool.Connect) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	out := fs.String("o", "", "write to this file instead of stdout")
	q := url.Values{}
	for _, name := range audittool.ExportFilters {
		fs.Func(strings.ReplaceAll(name, "_", "-"), "the "+name+" query parameter", func(v string) error {
			q.Set(name, v)
			return nil
		})
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := connect()
	if err != nil {
		return err
	}
	return audittool.Export(ctx, c, q, *out, stdout)
}

func checkpoints(ctx context.Context, args []string, stdout io.Writer, connect audittool.Connect) error {
	fs := flag.NewFlagSet("checkpoints", flag.ContinueOnError)
	appendTo := fs.String("append", "", "add the checkpoints after this file's newest to it, once the chain is seen to lead from it to them")
	acceptKey := fs.String("accept-key", "", "with -append: the audit public key (base64) the server's key was rotated to; the kept checkpoints change to it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := connect()
	if err != nil {
		return err
	}
	return audittool.Checkpoints(ctx, c, *appendTo, *acceptKey, stdout)
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
