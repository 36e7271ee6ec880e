// Package risk classifies the tool calls agents submit to Airlock.
//
// Classify turns a tool name and its JSON arguments into an Assessment: a
// level (low, medium, high, critical), a 0–100 score and human-readable
// reasons that a reviewer reads next to the action. The inputs are the tool's
// category (derived from its name), signals in the arguments (destructive
// commands, paths that run code later or hold secrets, amounts over a cap,
// network destinations outside an allowlist) and a prompt-injection scan of
// every string in the arguments, after undoing the usual disguises
// (look-alike letters, leetspeak, spacing, rot13, reversal, base64, hex,
// percent-encoding) and in nine languages. Destructive commands are looked
// for in command fields and in every line of any other string that starts
// like a command line or an SQL statement, as written and as the shell
// would read it. Network destinations are read from the arguments as
// written, never folded, the way the clients that fetch them read them,
// and their hosts compared with the allowlist in IDNA ASCII form.
//
// Everything here is pure and deterministic: no I/O, no clock, no global
// state beyond patterns and tables built once at package initialisation. The
// classifier runs on every submit, so it is bounded in time and memory on any
// input: recursion stops at 32 levels, at most 1 MiB of text is scanned per
// call, decoding peels at most two layers and produces at most 512 KiB,
// shell parsing is limited to 64 lines of 8 KiB, and whatever could not be
// scanned raises the risk instead of being silently ignored.
package risk
