package hitl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/policy"
	"github.com/airlockhq/airlock/internal/risk"
)

// The built-ins of the coding loop: lifecycle commands and file changes
// without a shell.
const (
	// ToolWorktreeRun runs one of the commands the repository declares in
	// CommandsFile inside the worktree's sandbox: {worktree, command}.
	ToolWorktreeRun = "worktree.run"
	// ToolFSWrite writes a file: {worktree|workspace, path, content}.
	ToolFSWrite = "fs.write"
	// ToolFSPatch applies a unified diff: {worktree|workspace, patch}.
	ToolFSPatch = "fs.patch"
)

// CommandsFile is where a repository declares its lifecycle commands, one
// "name: command line" a line (a YAML map of strings).
const CommandsFile = ".airlock/commands.yaml"

// MaxCommandsBytes bounds CommandsFile.
const MaxCommandsBytes = 64 << 10

// GateCommands is the Decision.Gate of a worktree.run the policy allowed:
// it runs only once the exact command set is approved for its repository.
const GateCommands = "commands"

// KindCommandsApproved is the audit event of a command set approved for a
// repository.
const KindCommandsApproved audit.Kind = "commands.approved"

// Command is one lifecycle command.
type Command struct {
	Name string `json:"name"`
	Run  string `json:"run"`
}

// ParseCommands reads the content of CommandsFile: a map of command names
// to command lines, returned sorted by name. Anything else is refused.
//
// What a reviewer reads in the file must be what runs, so only YAML whose
// text is its value is accepted: a mapping of names to command lines, each
// written plain, single-quoted or double-quoted on its line, or as a
// literal block (|). Refused are whatever makes the value differ from the
// text: tags (!!binary, !!str, custom ones), anchors, aliases and merge
// keys, escapes in double-quoted scalars, folded blocks (>) and plain or
// quoted scalars folded over several lines; and duplicate names, more than
// one document, control characters and the line breaks YAML reads but a
// reader may not see (U+0085, U+2028, U+2029).
func ParseCommands(content []byte) ([]Command, error) {
	if len(content) > MaxCommandsBytes {
		return nil, fmt.Errorf("%s is over %d KiB", CommandsFile, MaxCommandsBytes>>10)
	}
	if err := commandsText(content); err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(content))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s must map command names to command lines: %w", CommandsFile, err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s must be one YAML document, a map of command names to command lines", CommandsFile)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s declares no command", CommandsFile)
	}
	m := doc.Content[0]
	if err := literalNode(m, "the file"); err != nil {
		return nil, err
	}
	if m.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s must map command names to command lines", CommandsFile)
	}
	if len(m.Content) == 0 {
		return nil, fmt.Errorf("%s declares no command", CommandsFile)
	}
	lines := strings.Split(string(content), "\n")
	out := make([]Command, 0, len(m.Content)/2)
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if err := literalNode(k, "a command name"); err != nil {
			return nil, err
		}
		if k.Kind != yaml.ScalarNode || !validName(k.Value) || !asWritten(k, lines) {
			return nil, fmt.Errorf("%s: command name %q (line %d) must be 1-64 letters, digits, . _ -", CommandsFile, k.Value, k.Line)
		}
		name := k.Value
		if seen[name] {
			return nil, fmt.Errorf("%s: command %q is declared twice", CommandsFile, name)
		}
		seen[name] = true
		if err := literalNode(v, fmt.Sprintf("command %q", name)); err != nil {
			return nil, err
		}
		if v.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("%s: command %q must be a command line (a string)", CommandsFile, name)
		}
		if v.Style&yaml.DoubleQuotedStyle != 0 && strings.Contains(lineAt(lines, v.Line), `\`) {
			return nil, fmt.Errorf("%s: command %q uses an escape sequence (\\) in a double-quoted string: write the command as it runs (plain, in single quotes, or as a literal block |)", CommandsFile, name)
		}
		if v.Style&yaml.FoldedStyle != 0 {
			return nil, fmt.Errorf("%s: command %q is a folded block (>), which joins its lines: write it on one line or as a literal block (|)", CommandsFile, name)
		}
		run := v.Value
		if v.Tag == "!!null" || strings.TrimSpace(run) == "" {
			return nil, fmt.Errorf("%s: command %q is empty", CommandsFile, name)
		}
		if !asWritten(v, lines) {
			return nil, fmt.Errorf("%s: command %q (line %d) must read as it runs: on one line (plain, in single quotes, or in double quotes without escapes) or as a literal block (|)", CommandsFile, name, v.Line)
		}
		out = append(out, Command{Name: name, Run: run})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// commandsText refuses a commands file holding what a reader cannot see
// but YAML or the shell reads: control characters other than tab, line
// feed and a carriage return ending a line, invalid UTF-8, and the line
// breaks U+0085, U+2028 and U+2029.
func commandsText(content []byte) error {
	s := string(content)
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s is not UTF-8 text", CommandsFile)
	}
	for i, r := range s {
		switch {
		case r == '\t' || r == '\n':
		case r == '\r' && i+1 < len(s) && s[i+1] == '\n':
		case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f || r == 0x2028 || r == 0x2029:
			return fmt.Errorf("%s holds the control character or line break U+%04X (line %d): a command must be text a reviewer can read",
				CommandsFile, r, strings.Count(s[:i], "\n")+1)
		}
	}
	return nil
}

// literalNode refuses the YAML features that make a value other than its
// text: an explicit tag, an anchor, an alias (and so a merge key's).
func literalNode(n *yaml.Node, what string) error {
	switch {
	case n.Kind == yaml.AliasNode:
		return fmt.Errorf("%s line %d: %s is a YAML alias (*%s): aliases are refused, write every command out", CommandsFile, n.Line, what, n.Value)
	case n.Anchor != "":
		return fmt.Errorf("%s line %d: %s sets a YAML anchor (&%s): anchors are refused, write every command out", CommandsFile, n.Line, what, n.Anchor)
	case n.Style&yaml.TaggedStyle != 0:
		return fmt.Errorf("%s line %d: %s has the YAML tag %s: tags are refused, write the command line as it runs", CommandsFile, n.Line, what, n.Tag)
	case n.Kind == yaml.ScalarNode && n.Tag == "!!merge":
		return fmt.Errorf("%s line %d: %s is a YAML merge key (<<): merge keys are refused, write every command out", CommandsFile, n.Line, what)
	}
	return nil
}

// lineAt returns line n (1-based) of lines, less a carriage return ending
// it; "" past the end.
func lineAt(lines []string, n int) string {
	if n < 1 || n > len(lines) {
		return ""
	}
	l := strings.TrimSuffix(lines[n-1], "\r")
	if n == 1 {
		l = strings.TrimPrefix(l, "\ufeff") // a byte order mark YAML skips
	}
	return l
}

// asWritten reports whether the scalar n reads in the file as its value:
// a plain or quoted scalar is its value written on its line at its column
// (single quotes doubling a quote, double quotes without escapes), a
// literal block is its value's lines, indented, on the lines that follow.
func asWritten(n *yaml.Node, lines []string) bool {
	if n.Kind != yaml.ScalarNode {
		return false
	}
	line := []rune(lineAt(lines, n.Line))
	if n.Column < 1 || n.Column > len(line) {
		return false
	}
	at := string(line[n.Column-1:])
	switch {
	case n.Style&yaml.LiteralStyle != 0:
		if !strings.HasPrefix(at, "|") {
			return false
		}
		body := strings.TrimRight(n.Value, "\n")
		if body == "" {
			return false
		}
		for i, want := range strings.Split(body, "\n") {
			src := lineAt(lines, n.Line+1+i)
			indent, ok := strings.CutSuffix(src, want)
			if want == "" {
				indent, ok = src, true
			}
			if !ok || strings.Trim(indent, " ") != "" {
				return false
			}
		}
		return true
	case n.Style&yaml.SingleQuotedStyle != 0:
		return strings.HasPrefix(at, "'"+strings.ReplaceAll(n.Value, "'", "''")+"'")
	case n.Style&yaml.DoubleQuotedStyle != 0:
		return !strings.ContainsAny(n.Value, `\"`) && strings.HasPrefix(at, `"`+n.Value+`"`)
	case n.Style&^yaml.FlowStyle == 0:
		return strings.HasPrefix(at, n.Value)
	}
	return false
}

// CommandSetFlags names what in a command set a reviewer must not miss:
// each command is judged as a line a diff adds is (risk.CommandFlags), since
// approving one run approves them all.
func CommandSetFlags(cmds []Command) risk.PreviewFlags {
	return risk.CommandFlags(CommandsFile, func(yield func(string, string) bool) {
		for _, c := range cmds {
			if !yield(c.Name, c.Run) {
				return
			}
		}
	})
}

// shownSet refuses a worktree.run preview whose command set (the file
// shown, p.Diff) is not the one its hash (p.Commit) names, or holds a
// command that does not read as it runs (ParseCommands).
func shownSet(p Preview) error {
	if CommandsHash([]byte(p.Diff)) != p.Commit {
		return errors.New("the command set shown is not the one its hash names")
	}
	if _, err := ParseCommands([]byte(p.Diff)); err != nil {
		return fmt.Errorf("the command set is refused (%w)", err)
	}
	return nil
}

// CommandsHash identifies a command set: the SHA-256 of the file's bytes,
// in hex. Any change to the file is another command set.
func CommandsHash(content []byte) string {
	h := sha256.Sum256(content)
	return hex.EncodeToString(h[:])
}

// CommandSetApproval records that a reviewer approved the exact command
// set (Hash, the file's content) of a repository: every worktree.run of
// that repository whose file has this hash runs without asking again.
type CommandSetApproval struct {
	Repo       string    `json:"repo"`
	Hash       string    `json:"hash"`
	Content    string    `json:"content"`
	ApprovedBy string    `json:"approved_by"`
	ActionID   string    `json:"action_id"`
	ApprovedAt time.Time `json:"approved_at"`
}

// CommandSetStore persists command set approvals.
type CommandSetStore interface {
	// CommandSetApproval returns the approval of repo's command set hash,
	// or nil when there is none.
	CommandSetApproval(ctx context.Context, repo, hash string) (*CommandSetApproval, error)
}

// The preview of a worktree.run reuses Preview: Commit carries the command
// set's hash and Diff the content of CommandsFile, so that the reviewer
// sees every command before approving.

// HasPreview reports whether a pending call of tool gets a preview job:
// a merge (the commit and its diff), a worktree.run (the command set), an
// fs.write or fs.patch (the diff it makes).
func HasPreview(tool string) bool {
	switch tool {
	case ToolWorktreeMerge, ToolWorktreeRun, ToolFSWrite, ToolFSPatch:
		return true
	}
	return false
}

// runPin returns the command set hash a worktree.run approval pins, and
// the approval to record: the one in the preview the reviewer saw.
func runPin(a *Action, reviewer string, now time.Time) (string, *CommandSetApproval, error) {
	var p Preview
	if len(a.Preview) == 0 || json.Unmarshal(a.Preview, &p) != nil {
		return "", nil, apperr.Conflict("the command set is not read yet; a reviewer must see every command before approving")
	}
	if p.Error != "" || len(p.Commit) != 64 {
		return "", nil, apperr.Conflict("reading the command set failed (%s); deny this run", p.Error)
	}
	// What is approved is what the reviewer read: the file shown, whose
	// hash is pinned, holding only commands that read as they run.
	if err := shownSet(p); err != nil {
		return "", nil, apperr.Conflict("%s; deny this run", err)
	}
	repo, _ := WorktreeRepo(WorktreeOf(a.Tool, a.Args))
	return p.Commit, &CommandSetApproval{Repo: repo, Hash: p.Commit, Content: p.Diff, ApprovedBy: reviewer,
		ActionID: a.ID, ApprovedAt: now}, nil
}

// commandSetEvent is the audit event of an approved command set.
func commandSetEvent(a *Action, c *CommandSetApproval) audit.Event {
	return a.AuditEvent(KindCommandsApproved, c.ApprovedBy, map[string]any{
		"repo": c.Repo, "hash": c.Hash, "commands": c.Content})
}

// gateRun makes a worktree.run the policy allowed wait for its command set:
// pending until the preview shows a command set approved for the
// repository (or a reviewer approves it).
func gateRun(a *Action, d *policy.Decision, settings policy.EffectiveSettings) {
	if a.Tool != ToolWorktreeRun || d.Effect != policy.Allow {
		return
	}
	d.Effect = policy.Approve
	d.Approvals = max(d.Approvals, 1)
	if d.Timeout <= 0 {
		d.Timeout = settings.DefaultTimeout
	}
	a.Decision.Effect = string(policy.Approve)
	a.Decision.Gate = GateCommands
	a.Decision.Reason += "; worktree.run runs only a command set (" + CommandsFile + ") a reviewer approved for the repository"
}

// approveByCommandSet approves a gated worktree.run whose preview shows a
// command set already approved for its repository. It is a no-op for any
// other action, or when the command set is not approved: the run stays
// pending with the command set shown.
func (s *Service) approveByCommandSet(ctx context.Context, a *Action) (*Action, error) {
	if a.Tool != ToolWorktreeRun || a.Decision.Gate != GateCommands || a.Status != StatusPending || len(a.Approvals) > 0 {
		return a, nil
	}
	var p Preview
	if json.Unmarshal(a.Preview, &p) != nil || p.Error != "" || len(p.Commit) != 64 {
		return a, nil
	}
	if shownSet(p) != nil {
		return a, nil // a set approved before it was refused runs no more: it waits, showing why
	}
	repo, _ := WorktreeRepo(WorktreeOf(a.Tool, a.Args))
	approval, err := s.store.CommandSetApproval(ctx, repo, p.Commit)
	if err != nil || approval == nil {
		return a, err
	}
	out, err := s.mutate(ctx, a.ID, func(a *Action, now time.Time) (*change, error) {
		if a.Status != StatusPending || len(a.Approvals) > 0 {
			return nil, notPending(a)
		}
		var cur Preview
		if json.Unmarshal(a.Preview, &cur) != nil || cur.Commit != approval.Hash {
			return nil, notPending(a)
		}
		a.Status = StatusApproved
		a.Decision = Decision{Effect: string(policy.Allow), By: "policy", RuleID: a.Decision.RuleID,
			PolicyVersion: a.Decision.PolicyVersion, Source: "commands", Gate: GateCommands,
			Reason: fmt.Sprintf("command set %s of repository %s approved by %s (action %s)", short(approval.Hash), repo, approval.ApprovedBy, approval.ActionID)}
		job := JobFor(a)
		job.Pin = approval.Hash
		return &change{fx: Effects{Job: job, NotInPlanMode: true}, events: []audit.Event{a.AuditEvent(audit.KindActionApproved, "system",
			map[string]any{"commands_hash": approval.Hash, "commands_approved_by": approval.ApprovedBy, "commands_action": approval.ActionID})}}, nil
	})
	if err != nil && (apperr.CodeOf(err) == apperr.CodeConflict || errors.Is(err, ErrPlanMode)) {
		return s.store.Action(ctx, a.ID) // decided meanwhile, or plan mode: it stays as it is
	}
	return out, err
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// PatchPaths returns the paths a unified diff touches, as git apply (run
// at the top of the tree, without -p) reads them: the names of the "diff
// --git" line, of the ---/+++ lines (one leading component stripped,
// whatever it is), and of the extended headers "copy from", "copy to",
// "rename from", "rename to", "rename old" and "rename new" (taken whole:
// git apply honours them whatever the diff --git line says, so a copy
// from a denied file or a rename of a read-only one is named here), with
// git's C-style quoting undone. /dev/null is left out. It errs on the side
// of naming more: where git apply would strip no component (once a
// traditional patch names a file without a slash), the names unstripped
// are returned too, and an absolute name is returned as written.
func PatchPaths(patch string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string, ok bool) {
		if ok && p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	lines := strings.Split(patch, "\n")
	// git apply guesses -p0 for a traditional patch (a --- line, a +++
	// line, a hunk) naming a file without a slash, and keeps it for the
	// rest of the input (guess_p_value).
	guess := func(rest string) int {
		if isDevNull(rest) {
			return -1
		}
		if n, ok := findNameTraditional(rest, 0); ok && !strings.Contains(n, "/") {
			return 0
		}
		return -1
	}
	p0 := false
	for i := 0; i+2 < len(lines); i++ {
		first, ok1 := strings.CutPrefix(lines[i], "--- ")
		second, ok2 := strings.CutPrefix(lines[i+1], "+++ ")
		if ok1 && ok2 && strings.HasPrefix(lines[i+2], "@@ -") {
			p, q := guess(first), guess(second)
			if p < 0 {
				p = q
			}
			if p == 0 && q == 0 {
				p0 = true
			}
		}
	}
	for _, line := range lines {
		if rest, ok := cutAny(line, "--- ", "+++ "); ok {
			if isDevNull(rest) {
				continue
			}
			// As a git diff reads it (up to a tab) and as a traditional
			// one does (without a trailing timestamp).
			add(findName(rest, 1, termTab))
			add(findNameTraditional(rest, 1))
			if n, ok := findNameTraditional(rest, 0); ok && (p0 || !strings.Contains(n, "/") || strings.HasPrefix(n, "/")) {
				add(n, ok)
				add(findName(rest, 0, termTab))
			}
			continue
		}
		if rest, ok := cutAny(line, "copy from ", "copy to ", "rename from ", "rename to ", "rename old ", "rename new "); ok {
			add(findName(rest, 0, 0))
			continue
		}
		if rest, ok := strings.CutPrefix(line, "diff --git "); ok {
			add(gitHeaderName(rest, 1))
			for _, n := range headerNames(rest) {
				if n == "/dev/null" {
					continue
				}
				add(skipTreePrefix(n, 1))
				if p0 || !strings.Contains(n, "/") || strings.HasPrefix(n, "/") {
					add(n, true)
				}
			}
		}
	}
	return out
}

// The rest of this file reads names as git's apply.c does (find_name,
// find_name_traditional, git_header_name), for PatchPaths.

const (
	termSpace = 1
	termTab   = 2
)

func cutAny(line string, prefixes ...string) (string, bool) {
	for _, p := range prefixes {
		if rest, ok := strings.CutPrefix(line, p); ok {
			return rest, true
		}
	}
	return "", false
}

// gitSpace is git's isspace: space, tab, newline and carriage return.
func gitSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isDevNull(s string) bool {
	rest, ok := strings.CutPrefix(s, "/dev/null")
	return ok && (rest == "" || gitSpace(rest[0]))
}

// unquoteC undoes git's C-style quoting of s, which starts with '"'; it
// returns the name and what follows the closing quote.
func unquoteC(s string) (name, rest string, ok bool) {
	if !strings.HasPrefix(s, `"`) {
		return "", "", false
	}
	var b strings.Builder
	for i := 1; i < len(s); {
		c := s[i]
		i++
		switch c {
		case '"':
			return b.String(), s[i:], true
		case '\\':
		default:
			b.WriteByte(c)
			continue
		}
		if i >= len(s) {
			return "", "", false
		}
		c = s[i]
		i++
		switch c {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '\\', '"':
			b.WriteByte(c)
		case '0', '1', '2', '3':
			if i+2 > len(s) || s[i] < '0' || s[i] > '7' || s[i+1] < '0' || s[i+1] > '7' {
				return "", "", false
			}
			b.WriteByte((c-'0')<<6 | (s[i]-'0')<<3 | (s[i+1] - '0'))
			i += 2
		default:
			return "", "", false
		}
	}
	return "", "", false
}

// squashSlash collapses runs of slashes, as git apply does to names.
func squashSlash(s string) string {
	for strings.Contains(s, "//") {
		s = strings.ReplaceAll(s, "//", "/")
	}
	return s
}

// findName is apply.c's find_name: a quoted name, less p leading
// components, or else the text up to a space (git's isspace) that ends a
// name under terminate, less p leading components.
func findName(line string, p, terminate int) (string, bool) {
	if strings.HasPrefix(line, `"`) {
		if n, ok := findNameGNU(line, p); ok {
			return n, true
		}
	}
	return findNameCommon(line, p, terminate)
}

func findNameGNU(line string, p int) (string, bool) {
	name, _, ok := unquoteC(line)
	if !ok {
		return "", false
	}
	for ; p > 0; p-- {
		i := strings.IndexByte(name, '/')
		if i < 0 {
			return "", false
		}
		name = name[i+1:]
	}
	return squashSlash(name), true
}

// findNameCommon is apply.c's find_name_common without a default name;
// terminate < 0 reads the whole line.
func findNameCommon(line string, p, terminate int) (string, bool) {
	start := -1
	if p == 0 {
		start = 0
	}
	i := 0
	for ; i < len(line); i++ {
		c := line[i]
		if terminate >= 0 && gitSpace(c) {
			if c == '\n' || !(c == ' ' && terminate&termSpace == 0 || c == '\t' && terminate&termTab == 0) {
				break
			}
		}
		if c == '/' {
			p--
			if p == 0 {
				start = i + 1
			}
		}
	}
	if start < 0 || start >= i {
		return "", false
	}
	return squashSlash(line[start:i]), true
}

// findNameTraditional is apply.c's find_name_traditional: the name of a
// ---/+++ line less a trailing diff timestamp.
func findNameTraditional(line string, p int) (string, bool) {
	if strings.HasPrefix(line, `"`) {
		if n, ok := findNameGNU(line, p); ok {
			return n, true
		}
	}
	if n := diffTimestampLen(line); n > 0 {
		return findNameCommon(line[:len(line)-n], p, -1)
	}
	return findNameCommon(line, p, termTab)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// diffTimestampLen is apply.c's diff_timestamp_len: the length of a
// trailing "<tab or spaces>2010-07-05 19:41:17[.620000023] [-0500]".
func diffTimestampLen(line string) int {
	end := len(line)
	if end == 0 || !isDigit(line[end-1]) {
		return 0
	}
	// Time zone: " +0500" or " +08:00".
	if n := len(" +0500"); end >= n && line[end-n] == ' ' && (line[end-n+1] == '+' || line[end-n+1] == '-') &&
		allDigits(line[end-n+2:end]) {
		end -= n
	} else if n := len(" +08:00"); end >= n && line[end-n] == ' ' && (line[end-n+1] == '+' || line[end-n+1] == '-') &&
		isDigit(line[end-5]) && isDigit(line[end-4]) && line[end-3] == ':' && isDigit(line[end-2]) && isDigit(line[end-1]) {
		end -= n
	}
	// Time: " 07:01:32" or " 19:41:17.620000023".
	if n := shortTimeLen(line[:end]); n > 0 {
		end -= n
	} else if end > 0 && isDigit(line[end-1]) {
		q := end - 1
		for q > 0 && isDigit(line[q]) {
			q--
		}
		if line[q] == '.' {
			if n := shortTimeLen(line[:q]); n > 0 {
				end = q - n
			}
		}
	}
	// Date: "72-02-05" or "1972-02-05".
	n := len("72-02-05")
	if end < n {
		return 0
	}
	d := line[end-n : end]
	if !isDigit(d[0]) || !isDigit(d[1]) || d[2] != '-' || !isDigit(d[3]) || !isDigit(d[4]) || d[5] != '-' || !isDigit(d[6]) || !isDigit(d[7]) {
		return 0
	}
	end -= n
	if end >= 2 && isDigit(line[end-1]) && isDigit(line[end-2]) {
		end -= 2
	}
	if end == 0 {
		return 0
	}
	if line[end-1] == '\t' {
		return len(line) - (end - 1)
	}
	if line[end-1] != ' ' {
		return 0
	}
	for end > 0 && line[end-1] == ' ' {
		end--
	}
	return len(line) - end
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

func shortTimeLen(line string) int {
	n := len(" 07:01:32")
	if len(line) < n {
		return 0
	}
	t := line[len(line)-n:]
	if t[0] != ' ' || !isDigit(t[1]) || !isDigit(t[2]) || t[3] != ':' || !isDigit(t[4]) || !isDigit(t[5]) || t[6] != ':' ||
		!isDigit(t[7]) || !isDigit(t[8]) {
		return 0
	}
	return n
}

// skipTreePrefix strips p leading components from name; an absolute name
// (or one with too few components) has none to strip.
func skipTreePrefix(name string, p int) (string, bool) {
	if p == 0 {
		return name, !strings.HasPrefix(name, "/")
	}
	for i := 0; i < len(name); i++ {
		if name[i] == '/' {
			if p--; p <= 0 {
				if i == 0 {
					return "", false
				}
				return name[i+1:], true
			}
		}
	}
	return "", false
}

// gitHeaderName is apply.c's git_header_name: the name of a "diff --git"
// line (given without that prefix) when both sides name the same file.
func gitHeaderName(line string, p int) (string, bool) {
	if strings.HasPrefix(line, `"`) {
		first, second, ok := unquoteC(line)
		if !ok {
			return "", false
		}
		if first, ok = skipTreePrefix(first, p); !ok {
			return "", false
		}
		second = strings.TrimLeft(second, " \t\r")
		if second == "" {
			return "", false
		}
		if strings.HasPrefix(second, `"`) {
			sp, _, ok := unquoteC(second)
			if !ok {
				return "", false
			}
			if sp, ok = skipTreePrefix(sp, p); !ok || sp != first {
				return "", false
			}
			return first, true
		}
		if sp, ok := skipTreePrefix(second, p); !ok || sp != first {
			return "", false
		}
		return first, true
	}
	name, ok := skipTreePrefix(line, p)
	if !ok {
		return "", false
	}
	if i := strings.IndexByte(name, '"'); i >= 0 {
		sp, _, ok := unquoteC(name[i:])
		if !ok {
			return "", false
		}
		if np, ok := skipTreePrefix(sp, p); ok && len(np) < i && strings.HasPrefix(name, np) && gitSpace(name[len(np)]) {
			return np, true
		}
		return "", false
	}
	for l := 0; l < len(name); l++ {
		if name[l] != ' ' && name[l] != '\t' {
			continue
		}
		if l+1 == len(name) {
			return "", false
		}
		second, ok := skipTreePrefix(name[l+1:], p)
		if ok && len(second) == l && second == name[:l] {
			return name[:l], true
		}
	}
	return "", false
}

// headerNames splits a "diff --git" line (without that prefix) into its
// names, quoted or up to a space.
func headerNames(line string) []string {
	var out []string
	for {
		line = strings.TrimLeft(line, " \t\r")
		if line == "" {
			return out
		}
		if strings.HasPrefix(line, `"`) {
			if n, rest, ok := unquoteC(line); ok {
				out = append(out, n)
				line = rest
				continue
			}
		}
		i := strings.IndexAny(line, " \t\r")
		if i < 0 {
			i = len(line)
		}
		out = append(out, line[:i])
		line = line[i:]
	}
}

// checkPatch runs the hard path tier on every path an fs.patch touches, as
// for an fs.write of each.
func (h *hardPaths) checkPatch(args map[string]any, settings policy.EffectiveSettings) *hardPathMatch {
	patch, _ := args["patch"].(string)
	for _, p := range PatchPaths(patch) {
		if m := h.check(ToolFSWrite, map[string]any{"path": p}, settings); m != nil {
			m.reason = strings.Replace(m.reason, "args.path", "the patch", 1)
			return m
		}
	}
	return nil
}

// fsTarget is TargetOf for fs.write and fs.patch.
func fsTarget(tool string, args map[string]any) (string, error) {
	str := func(k string) (string, bool) { s, ok := args[k].(string); return s, ok }
	switch tool {
	case ToolFSWrite:
		if p, _ := str("path"); p == "" {
			return "", apperr.Invalid("fs.write needs args.path, a path relative to the workspace or worktree")
		}
		if _, ok := str("content"); !ok {
			return "", apperr.Invalid("fs.write needs args.content, a string")
		}
	case ToolFSPatch:
		p, _ := str("patch")
		if len(PatchPaths(p)) == 0 {
			return "", apperr.Invalid("fs.patch needs args.patch, a unified diff naming the files it changes")
		}
	}
	ws, _ := str("workspace")
	wt, _ := str("worktree")
	return rootTarget(tool, ws, wt)
}

// FSPathProblem says why an fs.write or fs.patch must not run because a
// path it names is not a file inside its workspace or worktree (absolute,
// "~", climbing out with ".."), or "". The submit validator denies such a
// call, as it denies an exec naming such a path; the worker checks again.
func FSPathProblem(tool string, args map[string]any) string {
	var paths []string
	switch tool {
	case ToolFSWrite:
		p, _ := args["path"].(string)
		paths = []string{p}
	case ToolFSPatch:
		p, _ := args["patch"].(string)
		paths = PatchPaths(p)
	}
	for _, p := range paths {
		if !insideRoot(p) {
			return fmt.Sprintf("%s names %q: paths must be files inside the workspace or worktree (relative, not climbing out with ..)", tool, p)
		}
	}
	return ""
}

// insideRoot reports whether p names a file under a root: relative, not
// climbing out with "..", not the root itself, no NUL byte.
func insideRoot(p string) bool {
	if strings.ContainsRune(p, 0) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") || strings.Contains(p, "\\") {
		return false
	}
	c := path.Clean(p)
	return c != "." && c != ".." && !strings.HasPrefix(c, "../")
}

// runTarget is TargetOf for worktree.run.
func runTarget(args map[string]any) (string, error) {
	wt, _ := args["worktree"].(string)
	repo, ok := WorktreeRepo(wt)
	if !ok || !validName(repo) {
		return "", apperr.Invalid("worktree.run needs args.worktree, a name returned by worktree.create")
	}
	if c, _ := args["command"].(string); !validName(c) {
		return "", apperr.Invalid("worktree.run needs args.command, the name of a command in %s", CommandsFile)
	}
	return "repo:" + repo, nil
}
