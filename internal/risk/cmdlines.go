package risk

import (
	"path"
	"strings"
)

// Command lines outside command fields. An agent can put a destructive
// command in any argument of any tool ("note", "content", "body") and a
// later step may run it; a write's content may be a script. Every line of
// such a string that starts like a command line or an SQL statement is
// checked with the command rules; prose that only mentions a command
// ("never run drop table in production") is not.

// commandWords are programs whose name at the start of a line makes the
// line a command line.
var commandWords = keySet("rm", "rmdir", "unlink", "dd", "chmod", "chown", "git", "sudo", "doas", "su",
	"curl", "wget", "bash", "sh", "zsh", "dash", "ksh", "fish", "eval", "exec", "env", "nohup", "xargs",
	"find", "shred", "shutdown", "reboot", "halt", "poweroff", "init", "systemctl", "kubectl", "oc",
	"terraform", "tofu", "helm", "aws", "gcloud", "gsutil", "az", "psql", "mysql", "sqlite3", "docker",
	"nc", "ncat", "netcat", "socat", "python", "python3", "perl", "ruby", "node", "crontab", "wipefs",
	"mke2fs", "echo", "cat", "base64", "ssh", "mv", "cp", "tee", "truncate", "fdisk", "parted")

// sqlVerbs start the SQL statements the command rules look at.
var sqlVerbs = keySet("drop", "truncate", "delete")

// maxSQLStatement bounds the text taken for one SQL statement.
const maxSQLStatement = 4 << 10

// Kinds of line.
const (
	lineProse = iota
	lineShell
	lineSQL
)

// commandLines runs the command rules over the lines of norm (a value that
// is not a command field) that look like command lines or SQL statements.
func (a *assessor) commandLines(norm string, w *walker) {
	var b strings.Builder
	full := false
lines:
	for start := 0; start < len(norm); {
		end := strings.IndexByte(norm[start:], '\n')
		if end < 0 {
			end = len(norm)
		} else {
			end += start
		}
		line := norm[start:end]
		switch lineKind(line) {
		case lineShell:
			if b.Len()+len(line) >= maxCommandText {
				full = true
				break lines
			}
			b.WriteString(line)
			b.WriteByte('\n')
		case lineSQL:
			// The statement runs to its ';', over line breaks: a WHERE
			// on the next line belongs to it.
			stmt := norm[start:min(len(norm), start+maxSQLStatement)]
			if i := strings.IndexByte(stmt, ';'); i >= 0 {
				stmt = stmt[:i]
			}
			if b.Len()+len(stmt) >= maxCommandText {
				full = true
				break lines
			}
			b.WriteString(stmt)
			b.WriteString(";\n")
		}
		start = end + 1
	}
	if b.Len() > 0 {
		a.commandSignals(b.String(), true, w)
	}
	if full {
		a.signal(kindNotScanned, groupLimits, weightNotScanned, Medium,
			"args not fully scanned: command lines over 64 KiB ("+w.pathString()+")")
	}
}

// lineKind tells whether a line starts like a command line (a known
// program, after prompt characters, assignments and shell quoting) or an
// SQL statement.
func lineKind(line string) int {
	i := 0
	for i < len(line) && strings.IndexByte(" \t>$*-", line[i]) >= 0 {
		i++
	}
	for range 3 {
		j := i
		for j < len(line) && strings.IndexByte(" \t;|&()<>", line[j]) < 0 {
			j++
		}
		if j == i {
			return lineProse
		}
		tok := line[i:j]
		if strings.ContainsAny(tok, "\\'\"$") {
			tok = unescapeShell(tok)
			if k := strings.IndexByte(tok, ' '); k >= 0 {
				tok = tok[:k]
			}
		}
		if k := strings.IndexByte(tok, '='); k > 0 && !strings.ContainsRune(tok[:k], '/') {
			// VAR=value cmd ...
			i = j
			for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
				i++
			}
			continue
		}
		if strings.IndexByte(tok, '/') >= 0 {
			tok = path.Base(tok)
		}
		switch {
		case commandWords[tok], strings.HasPrefix(tok, "mkfs"):
			return lineShell
		case sqlVerbs[tok]:
			return lineSQL
		}
		return lineProse
	}
	return lineProse
}
