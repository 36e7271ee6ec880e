// Command auditctl verifies and exports Airlock's audit trail.
//
//	auditctl verify [-checkpoints FILE]               the server walks the chain (and holds it against FILE's newest checkpoint)
//	auditctl verify -offline EXPORT [-checkpoints FILE] [-key KEY]
//	                                                 walk an export made with `export -order seq` here, trusting no server
//	auditctl export [-order seq] [filters] [-o FILE]  NDJSON, one event per line
//	auditctl checkpoints [-append FILE]               the signed checkpoints; with -append, only the new ones, added to FILE
//
// It talks to the server's HTTP API as an auditor: AIRLOCK_URL (default
// http://127.0.0.1:8080) and either AIRLOCK_TOKEN or AIRLOCK_USERNAME and
// AIRLOCK_PASSWORD (flags -url, -token, -user, -password override them).
// verify exits 1 when the chain is not intact, 2 on any other error.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/audit"
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
  verify [-checkpoints FILE]                        the server verifies the chain (and against FILE's newest checkpoint)
  verify -offline EXPORT [-checkpoints FILE] [-key KEY]
                                                    verify an export made with "export -order seq" locally
  export [-order id|seq] [filters] [-o FILE]        NDJSON export; filters: -correlation-id -agent -conversation-id
                                                    -action-id -kind -since -until -cursor -limit
  checkpoints [-append FILE]                        signed checkpoints as NDJSON (with -append: the new ones, added to FILE)`

// errBad marks a verification that ran and found the chain broken.
var errBad = errors.New("the audit chain is not intact")

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
	switch cmd, rest := global.Arg(0), global.Args()[1:]; cmd {
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
	case errors.Is(err, errBad):
		return 1, nil
	case errors.Is(err, flag.ErrHelp):
		return 2, nil
	case err != nil:
		return 2, err
	}
	return 0, nil
}

func verify(ctx context.Context, args []string, stdout io.Writer, connect func() (*client.Client, error)) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	offline := fs.String("offline", "", "verify this export (made with export -order seq) locally instead of asking the server")
	kept := fs.String("checkpoints", "", "NDJSON file of checkpoints kept elsewhere (its newest line is used)")
	key := fs.String("key", "", "offline: the audit public key (base64) the kept checkpoint must be signed with")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var cpLine string
	if *kept != "" {
		var err error
		if cpLine, err = lastLine(*kept); err != nil {
			return err
		}
	}
	var report any
	bad := false
	if *offline != "" {
		r, err := verifyOffline(ctx, *offline, cpLine, *key)
		if err != nil {
			return err
		}
		report, bad = r, !r.OK
	} else {
		c, err := connect()
		if err != nil {
			return err
		}
		var lines []string
		if cpLine != "" {
			lines = append(lines, cpLine)
		}
		r, err := c.VerifyAudit(ctx, lines...)
		if err != nil {
			return err
		}
		report, bad = r, !r.OK
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(report); err != nil {
		return err
	}
	if bad {
		return errBad
	}
	return nil
}

// verifyOffline walks an export in chain order with the same code the
// server uses.
func verifyOffline(ctx context.Context, path, cpLine, key string) (audit.Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return audit.Report{}, err
	}
	defer f.Close()
	var external []audit.Checkpoint
	if cpLine != "" {
		cp, err := audit.ParseCheckpoint(cpLine)
		if err != nil {
			return audit.Report{}, err
		}
		if key != "" {
			pk, err := base64.StdEncoding.DecodeString(key)
			if err != nil || !ed25519.PublicKey(pk).Equal(cp.PublicKey) {
				return audit.Report{}, errors.New("the kept checkpoint is not signed by -key")
			}
		}
		external = append(external, cp)
	}
	src := &fileChain{dec: json.NewDecoder(bufio.NewReaderSize(f, 1<<20))}
	return audit.Verify(ctx, src, audit.VerifyOptions{External: external})
}

// fileChain reads an export in chain order as an audit.ChainSource. It has
// no stored checkpoints: offline, only the kept one counts.
type fileChain struct {
	dec  *json.Decoder
	mu   sync.Mutex // guards last: Verify reads ahead in another goroutine
	last audit.Link
}

func (f *fileChain) ChainPage(_ context.Context, _ int64, limit int) ([]audit.Record, error) {
	var page []audit.Record
	for len(page) < limit {
		var r audit.Record
		if err := f.dec.Decode(&r); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading the export: %w", err)
		}
		if r.Seq == 0 {
			return nil, fmt.Errorf("event %d in the export is not sealed: export with -order seq", r.ID)
		}
		page = append(page, r)
		f.mu.Lock()
		f.last = audit.Link{Seq: r.Seq, Hash: r.Hash}
		f.mu.Unlock()
	}
	return page, nil
}

func (f *fileChain) CheckpointPage(context.Context, int64, int) ([]audit.Checkpoint, error) {
	return nil, nil
}

func (f *fileChain) Head(context.Context) (audit.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last, nil
}

func export(ctx context.Context, args []string, stdout io.Writer, connect func() (*client.Client, error)) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	out := fs.String("o", "", "write to this file instead of stdout")
	q := url.Values{}
	for _, name := range []string{"order", "correlation_id", "agent", "conversation_id", "action_id", "kind", "since", "until", "cursor", "limit"} {
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
	w := stdout
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	if err := c.ExportAudit(ctx, q, bw); err != nil {
		return err
	}
	return bw.Flush()
}

func checkpoints(ctx context.Context, args []string, stdout io.Writer, connect func() (*client.Client, error)) error {
	fs := flag.NewFlagSet("checkpoints", flag.ContinueOnError)
	appendTo := fs.String("append", "", "add the checkpoints newer than this file's last line to it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := connect()
	if err != nil {
		return err
	}
	if *appendTo == "" {
		return c.AuditCheckpoints(ctx, 0, stdout)
	}
	var prev *audit.Checkpoint
	if line, err := lastLine(*appendTo); err == nil && line != "" {
		cp, err := audit.ParseCheckpoint(line)
		if err != nil {
			return fmt.Errorf("%s: %w", *appendTo, err)
		}
		prev = &cp
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var after int64
	if prev != nil {
		after = prev.Seq
	}
	var buf bytes.Buffer
	if err := c.AuditCheckpoints(ctx, after, &buf); err != nil {
		return err
	}
	// Check what is about to be kept: well signed, and by the key that
	// signed what was kept before (a new key means a new data dir, or
	// somebody else signing: look before appending).
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		cp, err := audit.ParseCheckpoint(line)
		if err != nil {
			return err
		}
		if prev != nil && !prev.PublicKey.Equal(cp.PublicKey) {
			return fmt.Errorf("checkpoint %d is signed by another key than %s's: nothing appended", cp.Seq, *appendTo)
		}
	}
	f, err := os.OpenFile(*appendTo, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// lastLine returns the last non-empty line of the file at path.
func lastLine(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	last := ""
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			last = l
		}
	}
	return last, sc.Err()
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
