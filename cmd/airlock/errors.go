package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/audittool"
)

// Exit codes, documented in the README ("The airlock CLI").
const (
	exitOK        = 0 // done
	exitError     = 1 // any other error: server unreachable, 5xx, bad input, ...
	exitUsage     = 2 // bad command line, no terminal to ask on; denied (actions wait, hooks)
	exitNotFound  = 3 // no such agent, action, grant, policy, ...
	exitForbidden = 4 // no token, a bad or revoked one, or a role that may not
	exitConflict  = 5 // stale --if-version (412), already decided (409)
	exitNotIntact = 6 // audit verify found the chain broken
	exitTimeout   = 7 // actions wait: still pending when --timeout ran out
)

// cliError is an error of the command line itself, with its code.
type cliError struct {
	code    string
	message string
	exit    int
}

func (e *cliError) Error() string { return e.code + ": " + e.message }

// usageError is a bad command line.
func usageError(format string, args ...any) error {
	return &cliError{code: "usage", message: fmt.Sprintf(format, args...), exit: exitUsage}
}

// describe returns err's code, one-line message (errorLine) and exit
// code.
func describe(err error) (code, message string, exit int) {
	var ce *cliError
	var ae *client.Error
	var ue *url.Error
	var ne net.Error
	switch {
	case errors.As(err, &ce):
		code, message, exit = ce.code, ce.message, ce.exit
	case errors.As(err, &ae):
		code, message, exit = ae.Code, ae.Message, exitError
		switch {
		case ae.Status == 404:
			exit = exitNotFound
		case ae.Status == 401 || ae.Status == 403:
			exit = exitForbidden
		case ae.Status == 409 || ae.Status == 412:
			exit = exitConflict
		}
		if cv, ok := ae.Details["current_version"]; ok {
			message += fmt.Sprintf(" (current version %v)", cv)
		}
		if code == "" {
			code = "http_error"
		}
		if message == "" {
			message = fmt.Sprintf("HTTP %d", ae.Status)
		}
	case errors.Is(err, audittool.ErrNotIntact):
		code, message, exit = "not_intact", err.Error(), exitNotIntact
	case errors.Is(err, context.Canceled):
		code, message, exit = "cancelled", err.Error(), exitError
	case errors.As(err, &ue), errors.As(err, &ne):
		// Before DeadlineExceeded: the HTTP client's own timeout on a
		// server that does not answer is one (net/http's timeoutError),
		// and that server is unreachable, not an action still pending.
		code, message, exit = "unreachable", err.Error(), exitError
	case errors.Is(err, context.DeadlineExceeded):
		// exitTimeout is actions wait's own cliError, never a deadline.
		code, message, exit = "timeout", err.Error(), exitError
	default:
		code, message, exit = "error", err.Error(), exitError
	}
	return safeText(code), errorLine(message), exit
}

// maxMessage bounds an error's message, in bytes before escaping: an
// answer that is not Airlock's (a proxy's whole page) is cut.
const maxMessage = 1024

// errorLine is message as the one error line shows it: on one line, cut
// at maxMessage, with what a terminal would act on shown escaped
// (safeText). The server's code and message, a decision's reason, a
// proxy's body: none is this command's own text.
func errorLine(message string) string {
	if len(message) > maxMessage {
		cut := maxMessage
		for cut > 0 && !utf8.RuneStart(message[cut]) {
			cut--
		}
		message = message[:cut] + "…"
	}
	return safeText(oneLine(message))
}

// report prints err as one line and returns its exit code.
func report(stderr io.Writer, err error) int {
	code, message, exit := describe(err)
	fmt.Fprintf(stderr, "airlock: %s: %s\n", code, message)
	return exit
}

// oneLine folds s onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
