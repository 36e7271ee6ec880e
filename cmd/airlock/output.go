package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
)

// printJSON prints v as indented JSON, with the characters a terminal
// would act on that the encoder leaves raw (DEL, C1 controls such as CSI,
// bidi overrides: an agent chooses its arguments) written as \u escapes:
// the same JSON, nothing sent to the terminal.
func printJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("printing: %w", err)
	}
	var out strings.Builder
	out.Grow(buf.Len())
	for _, r := range buf.String() { // an invalid byte (in a raw message) comes out as U+FFFD
		// The encoder escapes C0 in strings, and its newlines are the
		// layout; DEL and beyond stand only inside strings.
		if r >= 0x7f && actsOnTerminal(r) {
			fmt.Fprintf(&out, `\u%04x`, r)
		} else {
			out.WriteRune(r)
		}
	}
	if _, err := io.WriteString(w, out.String()); err != nil {
		return fmt.Errorf("printing: %w", err)
	}
	return nil
}

// printTable prints rows under a header, aligned in columns.
func printTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		for i := range r {
			r[i] = cell(r[i])
		}
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("printing: %w", err)
	}
	return nil
}

// printFields prints name: value lines, aligned.
func printFields(w io.Writer, fields [][2]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	for _, f := range fields {
		fmt.Fprintf(tw, "%s:\t%s\n", f[0], cell(f[1]))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("printing: %w", err)
	}
	return nil
}

// cell keeps a table cell on one line, "-" when empty, with what could
// move a terminal's cursor or colour (control characters, escapes, bidi
// overrides: an agent chooses its arguments) shown escaped, never sent.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return safeText(s)
}

// safeText escapes the runes of s that a terminal would act on.
func safeText(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
		case actsOnTerminal(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// actsOnTerminal reports whether a terminal would act on r rather than
// show it: a control character (C0, DEL, C1), a bidi override, embedding,
// isolate or mark. Each is in the BMP: \uXXXX writes it.
func actsOnTerminal(r rune) bool {
	return unicode.IsControl(r) || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f
}

// when formats a time for a table, "-" when zero.
func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format(time.RFC3339)
}

// compactJSON is v as one line of JSON.
func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
