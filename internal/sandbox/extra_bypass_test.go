package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func extraPolicy(t *testing.T) Policy {
	t.Helper()
	p := DefaultPolicy()
	if err := p.Enable("awk", "tar"); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAwkRegexDivisionAmbiguity: the awk scanner must not take for a regex
// (or a string) text that some awk reads as code. gawk reads "/" after
// x++, "$" and "\<newline>" as division, after "if (c)" as a regex; mawk
// reads it as a regex after "++" and "length"; gawk lets "/" sit in a
// bracket expression. Every reading is scanned.
func TestAwkRegexDivisionAmbiguity(t *testing.T) {
	ws, _ := newWorkspace(t)
	pol := extraPolicy(t)
	refused := []string{
		`BEGIN { x++ / (system("id")+1) / 1 }`,
		`BEGIN { x-- / (system("id")) / 1 }`,
		`BEGIN { a[1]++ / system("id") / 1 }`,
		`BEGIN { a[1]-- / (getline line < "/etc/passwd") / 1 }`,
		`BEGIN { x++ / 1; print "a" / 1 > "/tmp/x" }`,
		`{ x = y++ /"/; system("id"); z = /"/ }`,
		`BEGIN { $/"/; system("id"); /"/ }`,
		`{ if (1) /"/ ; system("id"); /"/ }`,
		`{ while (i < 1) /"/ ; "id" | getline; /"/ }`,
		`{ for (k in a) /"/ ; system("id"); /"/ }`,
		`{ n = length /"/; system("id"); x = /"/ }`,
		"BEGIN { x = 1 \\\n/ (system(\"id\")) / 1 }",
		"BEGIN { x = 1 \\\r\n/ (system(\"id\")) / 1 }",
		`BEGIN { n = split("a/b", p, /[/]"/); system("id"); s = "x" }`,
		`BEGIN { n = split("a/b", p, /[[:alpha:]/]"/); system("id"); s = "x" }`,
		`BEGIN { n = split("a/b", p, /[]/]"/); system("id"); s = "x" }`,
		`BEGIN { x = "a\"/"; y = 1 / 2; system("id") }`,
	}
	for _, prog := range refused {
		err := Validate(ExecRequest{Argv: []string{"awk", prog}, Workspace: ws}, pol)
		if _, ok := AsRefusal(err); !ok {
			t.Errorf("awk %q: want a refusal, got %v", prog, err)
		}
	}
	accepted := []string{
		`{ s += $2 / 1024 } /err|warn/ { n++ } END { print s, n }`,
		`{ avg = ($2 + $3) / 2; if ($1 ~ /^a|b$/) print avg }`,
		`/[0-9]+/ && !/x|y/ { print $1 / 2 }`,
		`BEGIN { FS = "/" } { print $NF }`,
		`{ gsub(/\//, "_"); print }`,
		`{ x = a[i] / 2; y = a[j] / 4; print x, y }`,
		`{ n = split($0, p, /[,;]/); print n, p[1] / 2 }`,
		`{ i++; print i / 2 }`,
		`{ print length($0) / 2, length }`,
		`{ if ($1 ~ /a|b/) n++ } END { print n / NR }`,
		`NR % 2 == 0 { print ($1 / $2), ($3 > 4) }`,
		"{ total += $3 }\nEND {\n\tif (NR) print total / NR\n\telse print \"none|empty\"\n}",
		`{ sub(/^[ \t]+/, ""); print }`,
		`/^#/ { next } { print $1 "/" $2 }`,
		`BEGIN { x = 10; x /= 2; print x }`,
	}
	for _, prog := range accepted {
		if err := Validate(ExecRequest{Argv: []string{"awk", prog}, Workspace: ws}, pol); err != nil {
			t.Errorf("awk %q: refused: %v", prog, err)
		}
	}
}

// TestAwkBypassEndToEnd runs programs the scanner used to pass through the
// real sandbox with the policy: they are refused, and no marker appears.
func TestAwkBypassEndToEnd(t *testing.T) {
	requireBwrap(t)
	awk, err := exec.LookPath("awk")
	if err != nil {
		t.Fatal("awk is needed (apt-get install mawk):", err)
	}
	t.Logf("awk is %s", awk)
	pol := extraPolicy(t)
	for i, prog := range []string{
		// Both gawk and mawk run system() in these.
		`BEGIN { $/"/; system("touch /workspace/RAN-awk"); /"/ }`,
		"BEGIN { x = 1 \\\n/ (system(\"touch /workspace/RAN-awk\")) / 1 }",
	} {
		ws := t.TempDir()
		_, err := Run(context.Background(), ExecRequest{Argv: []string{"awk", prog}, Workspace: ws}, RunOptions{Policy: &pol})
		if _, ok := AsRefusal(err); !ok {
			t.Errorf("case %d: want a refusal, got %v", i, err)
		}
		if _, err := os.Stat(filepath.Join(ws, "RAN-awk")); err == nil {
			t.Errorf("case %d: awk ran system()", i)
		}
	}
}

// TestTarExtractNeedsCheckedMembers: tar -x writes the archive's member
// names, which the validator cannot see (the archive is workspace content
// that an earlier command may rewrite). Extraction must name its members
// after --no-recursion, and each is checked like a written path.
func TestTarExtractNeedsCheckedMembers(t *testing.T) {
	ws, _ := newWorkspace(t)
	pol := extraPolicy(t)
	for _, tc := range []struct {
		argv   []string
		reason string
	}{
		{[]string{"tar", "-xf", "a.tar"}, "name the members"},
		{[]string{"tar", "xf", "a.tar"}, "name the members"},
		{[]string{"tar", "xzf", "a.tgz", "-C", "src"}, "name the members"},
		{[]string{"tar", "--extract", "--file=a.tar"}, "name the members"},
		{[]string{"tar", "--get", "-f", "a.tar"}, "name the members"},
		{[]string{"tar", "-xf", "a.tar", "x"}, "--no-recursion"},
		{[]string{"tar", "-xf", "a.tar", "x", "--no-recursion"}, "--no-recursion"},
		{[]string{"tar", "-xf", "a.tar", "--no-recursion", "--recursion", "x"}, "--recursion"},
		{[]string{"tar", "-xf", "a.tar", "--no-recursion", ".git/config"}, "writing under .git"},
		{[]string{"tar", "-xf", "a.tar", "--no-recursion", "src/.git/hooks/pre-commit"}, "writing under .git"},
		{[]string{"tar", "-xf", "a.tar", "-C", "src", "--no-recursion", ".git/config"}, "writing under .git"},
		{[]string{"tar", "-xf", "a.tar", "--no-recursion", `\056git/config`}, "backslash"},
		{[]string{"tar", "-xf", "a.tar", "-C", `\056git/hooks`, "--no-recursion", "x"}, "backslash"},
		{[]string{"tar", "-cf", "a.tar", `\056env`}, "backslash"},
		{[]string{"tar", "-xf", "a.tar", "--no-recursion", "--transform=s,^x,.git,", "x"}, "--transform"},
		{[]string{"tar", "-xf", "a.tar", "--no-recursion", "--xform", "s,^x,.git,", "x"}, "--xform"},
		{[]string{"tar", "-xf", "a.tar", "--no-recursion", "--strip-components=1", "x/.git"}, "--strip-components"},
		{[]string{"tar", "-xf", "a.tar", "--no-recursion", "--strip-components=1", "x/y"}, "--strip-components"},
		{[]string{"tar", "-xf", "a.tar", "--no-recursion", "--wildcards", "*"}, "--wildcards"},
		{[]string{"tar", "-xf", "a.tar", "--no-recursion", "--no-anchored", "config"}, "--no-anchored"},
		{[]string{"tar", "-xf", "a.tar", "--no-recursion", "x*"}, "wildcard"},
		{[]string{"tar", "-xf", "a.tar", "--no-recursion", "d", "d/config"}, "inside another"},
		{[]string{"tar", "-xf", "a.tar", "--no-recursion", "./d/", "d/x/config"}, "inside another"},
		{[]string{"tar", "-xf", "a.tar", "--no-recursion", "/workspace/x"}, "relative"},
		{[]string{"tar", "-xf", "a.tar", "--no-recursion", "a/../x"}, ".."},
		{[]string{"tar", "-xf", "a.tar", "-C", "src", "-C", "pkg", "--no-recursion", "x"}, "-C"},
		// Options that run programs.
		{[]string{"tar", "-xf", "a.tar", "--to-command=sh"}, "--to-command is not allowed"},
		{[]string{"tar", "-I", "sh", "-xf", "a.tar"}, "-I is not allowed"},
		{[]string{"tar", "xfI", "a.tar", "sh"}, "-I is not allowed"},
		{[]string{"tar", "--use-compress-program", "sh", "-xf", "a.tar"}, "--use-compress-program is not allowed"},
		{[]string{"tar", "--checkpoint=1", "--checkpoint-action=exec=id", "-cf", "a.tar", "src"}, "not allowed"},
		{[]string{"tar", "-F", "x.sh", "-cf", "a.tar", "src"}, "-F is not allowed"},
		{[]string{"tar", "--info-script=x.sh", "-cf", "a.tar", "src"}, "--info-script is not allowed"},
		{[]string{"tar", "--new-volume-script=x.sh", "-cf", "a.tar", "src"}, "--new-volume-script is not allowed"},
		{[]string{"tar", "--rsh-command=/bin/sh", "-xf", "h:a.tar"}, "--rsh-command is not allowed"},
		{[]string{"tar", "--rmt-command=/bin/sh", "-xf", "a.tar"}, "--rmt-command is not allowed"},
		{[]string{"tar", "-xf", "a.tar", "--use-compress-prog=sh"}, "not allowed"},
	} {
		err := Validate(ExecRequest{Argv: tc.argv, Workspace: ws}, pol)
		if err == nil || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%q: want a refusal containing %q, got %v", tc.argv, tc.reason, err)
		}
	}
	for _, argv := range [][]string{
		{"tar", "-xf", "a.tar", "--no-recursion", "src/new.go", "NOTES.md"},
		{"tar", "xzf", "a.tgz", "-C", "src", "--no-recursion", "main.go"},
		{"tar", "--no-recursion", "-x", "-f", "a.tar", "-C", "/workspace/src", "pkg/a.go", "pkg/b.go"},
		{"tar", "-xOf", "a.tar"},
		{"tar", "xOzf", "a.tgz", "--wildcards", "*.txt"},
		{"tar", "-tvf", "a.tar"},
		{"tar", "-czf", "out.tgz", "src"},
		{"tar", "-cf", "out.tar", "--transform=s,^src,pkg,", "src"},
	} {
		if err := Validate(ExecRequest{Argv: argv, Workspace: ws}, pol); err != nil {
			t.Errorf("%q: refused: %v", argv, err)
		}
	}
}

// TestTarExtractMembersMeetHardPaths: the named members are operands, so
// the hard path tier sees them: at submit (lexically) and on the worker
// (CheckPaths against the deny and read-only entries).
func TestTarExtractMembersMeetHardPaths(t *testing.T) {
	ws, _ := newWorkspace(t)
	write(t, filepath.Join(ws, "locked", "keep.txt"), "x\n")
	write(t, filepath.Join(ws, ".env"), "SECRET=1\n")
	pol := extraPolicy(t)
	ops, err := Operands(ExecRequest{Argv: []string{"tar", "-xf", "a.tar", "-C", "src", "--no-recursion", "x.txt"}}, pol)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, op := range ops {
		if op.Path == SandboxWorkspace+"/src/x.txt" && op.Write {
			found = true
		}
	}
	if !found {
		t.Errorf("the member is not a written operand: %+v", ops)
	}
	for _, member := range []string{"locked/keep.txt", ".env", "locked"} {
		req := ExecRequest{Argv: []string{"tar", "-xf", "a.tar", "--no-recursion", member}, Workspace: ws}
		if err := CheckPaths(req, pol, []string{".env"}, []string{"locked"}); err == nil {
			t.Errorf("member %q: CheckPaths passed", member)
		}
	}
	req := ExecRequest{Argv: []string{"tar", "-xf", "a.tar", "--no-recursion", "src/new.txt"}, Workspace: ws}
	if err := CheckPaths(req, pol, []string{".env"}, []string{"locked"}); err != nil {
		t.Errorf("CheckPaths refused a plain member: %v", err)
	}
}

// TestTarPlantGitEndToEnd: an archive whose member is renamed to .git/...
// at creation must not be extractable through the validator.
func TestTarPlantGitEndToEnd(t *testing.T) {
	requireBwrap(t)
	ws := t.TempDir()
	write(t, filepath.Join(ws, "x", "config"), "[core]\n\tfsmonitor = touch /workspace/RAN-git\n")
	write(t, filepath.Join(ws, "y", "ok.txt"), "fine\n")
	mk := exec.Command("tar", "-cf", "a.tar", "--transform=s,^[xy],.git,;s,^.git/ok,ok,", "x", "y/ok.txt")
	mk.Dir = ws
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("tar -c: %v\n%s", err, out)
	}
	pol := extraPolicy(t)
	for _, argv := range [][]string{
		{"tar", "-xf", "a.tar"},
		{"tar", "-xf", "a.tar", "--no-recursion", ".git/config"},
	} {
		_, err := Run(context.Background(), ExecRequest{Argv: argv, Workspace: ws}, RunOptions{Policy: &pol})
		if _, ok := AsRefusal(err); !ok {
			t.Errorf("%q: want a refusal, got %v", argv, err)
		}
		if _, err := os.Stat(filepath.Join(ws, ".git")); err == nil {
			t.Fatalf("%q planted .git", argv)
		}
	}
	// Named members still extract.
	res, err := Run(context.Background(), ExecRequest{Argv: []string{"tar", "-xf", "a.tar", "--no-recursion", "ok.txt"}, Workspace: ws}, RunOptions{Policy: &pol})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("named extraction: %v, %+v", err, res)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "ok.txt")); err != nil || string(b) != "fine\n" {
		t.Errorf("ok.txt: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git")); err == nil {
		t.Errorf("named extraction planted .git")
	}
}
