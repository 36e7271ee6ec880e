package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/airlockhq/airlock/internal/app"
)

// adminUsage is printed for a missing or unknown admin command.
const adminUsage = `usage: airlock-server admin reset-password [--password-stdin] [--data-dir DIR | --database-url URL]

reset-password gives the user admin a new password, enables it (creating
it again if it was deleted) and ends its sessions; audited. Without
--password-stdin the password is generated and printed once; with it, the
first line of standard input is the password. It works on the database the
server uses: AIRLOCK_DATABASE_URL, or the embedded one under the data dir
(stop the server first)`

// maxPasswordLine bounds what --password-stdin reads: more than any
// password the identity rules accept, which judge the length.
const maxPasswordLine = 4096

// adminCommand runs `airlock-server admin ARGS`: the flags of the server
// (AIRLOCK_* and --data-dir, --database-url, ...) choose the database.
func adminCommand(ctx context.Context, log *slog.Logger, args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "reset-password" {
		return errors.New(adminUsage)
	}
	fromStdin := false
	var rest []string
	for _, a := range args[1:] {
		switch a {
		case "--password-stdin", "-password-stdin":
			fromStdin = true
		case "-h", "--help", "-help":
			_, err := fmt.Fprintln(stdout, adminUsage)
			return err
		default:
			rest = append(rest, a)
		}
	}
	cfg, err := app.FromEnv(rest)
	if err != nil {
		return err
	}
	chosen := ""
	if fromStdin {
		if chosen, err = readPassword(stdin); err != nil {
			return err
		}
	}
	password, err := app.ResetAdminPassword(ctx, cfg, log, chosen)
	if err != nil {
		return err
	}
	if fromStdin {
		_, err = fmt.Fprintf(stdout, "\nThe password of admin is now the one read from standard input; its sessions have ended.\n\n")
	} else {
		_, err = fmt.Fprintf(stdout, "\nThe password of admin is reset; its sessions have ended.\n  log in as:       admin / %s   (generated now and shown only once)\n\n", password)
	}
	return err
}

// readPassword reads the first line of r (without its line ending), at
// most maxPasswordLine bytes of it.
func readPassword(r io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, maxPasswordLine)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading the password from standard input: %w", err)
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return "", errors.New("no password on standard input (give it as the first line)")
	}
	return line, nil
}
