package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// newWorkspace makes a workspace with a few files and an outside directory
// next to it.
func newWorkspace(t *testing.T) (ws, outside string) {
	t.Helper()
	base := t.TempDir()
	ws = filepath.Join(base, "ws")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{ws, outside, filepath.Join(ws, "src"), filepath.Join(ws, "src", "pkg")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(ws, "README.md"), "hello\n")
	write(t, filepath.Join(ws, "src", "main.go"), "package main\n")
	write(t, filepath.Join(outside, "secret"), "TOP-SECRET-CONTENT\n")
	return ws, outside
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func shellPolicy() Policy {
	p := DefaultPolicy()
	p.AllowShell = true
	return p
}

// TestValidateAllows checks that ordinary uses of the default commands
// pass: a validator that refuses everything is no use either.
func TestValidateAllows(t *testing.T) {
	ws, _ := newWorkspace(t)
	if err := os.Symlink("src/main.go", filepath.Join(ws, "inside-link")); err != nil {
		t.Fatal(err)
	}
	ok := [][]string{
		{"ls", "-la", "src"},
		{"ls", "-lhR", "--color=never", "/workspace/src"},
		{"cat", "-n", "README.md", "src/main.go"},
		{"cat", "inside-link"},
		{"head", "-n", "5", "README.md"},
		{"head", "-20", "README.md"},
		{"tail", "-n", "+2", "README.md"},
		{"wc", "-l", "README.md"},
		{"pwd"},
		{"printenv", "HOME"},
		{"grep", "-rn", "--include=*.go", "package", "src"},
		{"grep", "-e", "-x", "README.md"},
		{"rg", "-n", "--hidden", "-g", "*.go", "package", "."},
		{"rg", "-uu", "--files"},
		{"sed", "-n", "1,5p", "README.md"},
		{"sed", "-i", "s/hello/bye/g", "README.md"},
		{"sed", "-i.bak", "-e", "s/a/b/; /x/d", "README.md"},
		{"sed", "-E", "-e", ":a;N;$!ba;s/\\n/ /g", "README.md"},
		{"sed", "/start/,/end/{s/x/y/2;p}", "README.md"},
		{"sed", "1i\\\nheader", "README.md"},
		{"find", ".", "-name", "*.go", "-type", "f"},
		{"find", "src", "-maxdepth", "2", "(", "-name", "*.go", "-o", "-name", "*.md", ")", "-print0"},
		{"find", "-newer", "README.md"},
		{"sort", "-u", "-o", "sorted.txt", "README.md"},
		{"diff", "-u", "README.md", "src/main.go"},
		{"diff", "-ru", "src", "/workspace/src"},
		{"git", "status", "--short"},
		{"git", "log", "--oneline", "-5", "--", "src"},
		{"git", "log", "-n", "3", "--format=%H %s", "main..feature"},
		{"git", "diff", "--cached", "--stat"},
		{"git", "show", "HEAD~1:src/main.go"},
		{"git", "-C", "src", "status"},
		{"git", "add", "-A"},
		{"git", "commit", "-m", "message", "--author=Agent <a@example.com>"},
		{"git", "branch", "-v"},
		{"git", "rev-parse", "--show-toplevel"},
		{"git", "ls-files", "-z"},
		{"git", "checkout", "-b", "feature"},
		{"git", "grep", "-n", "/api/v1", "--", "src"},
		{"git", "--no-pager", "log", "-p"},
	}
	pol := DefaultPolicy()
	for _, argv := range ok {
		if err := Validate(ExecRequest{Argv: argv, Workspace: ws}, pol); err != nil {
			t.Errorf("%q: refused: %v", argv, err)
		}
	}
	scripts := []string{
		"ls -la && cat README.md",
		"grep -rn package src | sort | head -n 3",
		"grep -rn '--include=*.go' package src",
		"cat README.md > out.txt 2>&1; wc -l < out.txt",
		"rg -n x ./src/* || ls",
		"LC_ALL=C sort README.md",
		"git status --short; git diff",
		"cat > notes.txt <<'EOF'\nliteral $HOME text\nEOF",
		"ls 'a b' \"c d\" src/*.go",
		"( ls ) && { pwd; }",
		"ls 2>/dev/null",
	}
	spol := shellPolicy()
	for _, s := range scripts {
		if err := Validate(ExecRequest{Argv: []string{"sh", "-c", s}, Workspace: ws}, spol); err != nil {
			t.Errorf("sh %q: refused: %v", s, err)
		}
	}
}

// TestValidateRefuses covers refusals not in the attack suite: flags,
// operands and request fields.
func TestValidateRefuses(t *testing.T) {
	ws, _ := newWorkspace(t)
	cases := []struct {
		req    ExecRequest
		pol    Policy
		reason string
	}{
		{ExecRequest{Argv: []string{}}, DefaultPolicy(), "empty command"},
		{ExecRequest{Argv: []string{"/bin/ls"}}, DefaultPolicy(), "must be a program name"},
		{ExecRequest{Argv: []string{"rm", "-rf", "."}}, DefaultPolicy(), "command not allowed: rm"},
		{ExecRequest{Argv: []string{"bash", "-c", "ls"}}, DefaultPolicy(), "bash is not allowed"},
		{ExecRequest{Argv: []string{"ls", "--dereference"}}, DefaultPolicy(), "ls: --dereference is not allowed"},
		{ExecRequest{Argv: []string{"tail", "-f", "README.md"}}, DefaultPolicy(), "tail: -f is not allowed"},
		{ExecRequest{Argv: []string{"head", "-n", "abc", "README.md"}}, DefaultPolicy(), "needs a number"},
		{ExecRequest{Argv: []string{"grep", "-R", "x", "."}}, DefaultPolicy(), "grep: -R is not allowed"},
		{ExecRequest{Argv: []string{"rg", "-L", "x"}}, DefaultPolicy(), "rg: -L is not allowed"},
		{ExecRequest{Argv: []string{"sort", "--compress-program=sh", "README.md"}}, DefaultPolicy(), "sort: --compress-program is not allowed"},
		{ExecRequest{Argv: []string{"sort", "-T", "/tmp", "README.md"}}, DefaultPolicy(), "sort: -T is not allowed"},
		{ExecRequest{Argv: []string{"diff", "--paginate", "a", "b"}}, DefaultPolicy(), "diff: --paginate is not allowed"},
		{ExecRequest{Argv: []string{"find", "-L", "."}}, DefaultPolicy(), "find: -L is not allowed"},
		{ExecRequest{Argv: []string{"find", ".", "-ok", "rm", "{}", ";"}}, DefaultPolicy(), "find: -ok is not allowed"},
		{ExecRequest{Argv: []string{"find", ".", "-fls", "out"}}, DefaultPolicy(), "find: -fls is not allowed"},
		{ExecRequest{Argv: []string{"find", ".", "-follow"}}, DefaultPolicy(), "find: -follow is not allowed"},
		{ExecRequest{Argv: []string{"sed", "-i/tmp/*", "s/a/b/", "README.md"}}, DefaultPolicy(), "backup suffix"},
		{ExecRequest{Argv: []string{"sed", "--follow-symlinks", "-i", "s/a/b/", "README.md"}}, DefaultPolicy(), "sed: --follow-symlinks is not allowed"},
		{ExecRequest{Argv: []string{"sed", "-i", "s/a/b/", ".git/config"}}, DefaultPolicy(), "writing under .git"},
		{ExecRequest{Argv: []string{"sed", "1R other", "README.md"}}, DefaultPolicy(), "sed: the R command"},
		{ExecRequest{Argv: []string{"sed", "s/a/b/W out", "README.md"}}, DefaultPolicy(), "sed: could not check"},
		{ExecRequest{Argv: []string{"sed", "s/a/b/gw out", "README.md"}}, DefaultPolicy(), "s///w"},
		{ExecRequest{Argv: []string{"sed", "s|a|b|e", "README.md"}}, DefaultPolicy(), "s///e"},
		{ExecRequest{Argv: []string{"sed", "-e", "1{", "-e", "e id", "-e", "}", "README.md"}}, DefaultPolicy(), "the e command"},
		{ExecRequest{Argv: []string{"git", "-p", "log"}}, DefaultPolicy(), "git: -p is not allowed"},
		{ExecRequest{Argv: []string{"git", "--work-tree=/", "status"}}, DefaultPolicy(), "git: --work-tree is not allowed"},
		{ExecRequest{Argv: []string{"git", "config", "core.hooksPath", "x"}}, DefaultPolicy(), "subcommand config is not allowed"},
		{ExecRequest{Argv: []string{"git", "submodule", "update"}}, DefaultPolicy(), "subcommand submodule is not allowed"},
		{ExecRequest{Argv: []string{"git", "log", "--show-signature"}}, DefaultPolicy(), "--show-signature is not allowed"},
		{ExecRequest{Argv: []string{"git", "diff", "--ext-diff"}}, DefaultPolicy(), "--ext-diff is not allowed"},
		{ExecRequest{Argv: []string{"git", "diff", "--no-index", "a", "b"}}, DefaultPolicy(), "--no-index is not allowed"},
		{ExecRequest{Argv: []string{"git", "cat-file", "--filters", "HEAD:x"}}, DefaultPolicy(), "--filters is not allowed"},
		{ExecRequest{Argv: []string{"git", "commit", "-S", "-m", "x"}}, DefaultPolicy(), "-S is not allowed"},
		{ExecRequest{Argv: []string{"git", "add", "-p"}}, DefaultPolicy(), "-p is not allowed"},
		{ExecRequest{Argv: []string{"ls"}, Dir: "../outside"}, DefaultPolicy(), "path escapes the workspace"},
		{ExecRequest{Argv: []string{"ls"}, Dir: "/etc"}, DefaultPolicy(), "dir must be relative"},
		{ExecRequest{Argv: []string{"ls"}, Timeout: 2 * time.Hour}, DefaultPolicy(), "above the limit"},
		{ExecRequest{Argv: []string{"ls"}, Network: true}, DefaultPolicy(), "network access is not allowed"},
		{ExecRequest{Argv: []string{"ls"}, Env: map[string]string{"GIT_CONFIG_PARAMETERS": "'core.pager=sh'"}}, DefaultPolicy(), "GIT_CONFIG_PARAMETERS is not allowed"},
		{ExecRequest{Argv: []string{"ls"}, Env: map[string]string{"RIPGREP_CONFIG_PATH": "rc"}}, DefaultPolicy(), "RIPGREP_CONFIG_PATH is not allowed"},
		{ExecRequest{Argv: []string{"ls"}, Env: map[string]string{"LANG": "../../x"}}, DefaultPolicy(), "must be a locale name"},
		{ExecRequest{Argv: []string{"ls"}, Env: map[string]string{"FOO": "bar"}}, DefaultPolicy(), "FOO is not allowed"},
		{ExecRequest{Argv: []string{"sh", "-c", "ls", "x"}}, shellPolicy(), "only the form sh -c SCRIPT"},
		{ExecRequest{Argv: []string{"sh", "-c", "ls $HOME"}}, shellPolicy(), "parameter expansion"},
		{ExecRequest{Argv: []string{"sh", "-c", "ls \"$(id)\""}}, shellPolicy(), "command substitution"},
		{ExecRequest{Argv: []string{"sh", "-c", "echo $((1+1))"}}, shellPolicy(), "arithmetic expansion"},
		{ExecRequest{Argv: []string{"sh", "-c", "ls ~/x"}}, shellPolicy(), "tilde expansion"},
		{ExecRequest{Argv: []string{"sh", "-c", "if ls; then pwd; fi"}}, shellPolicy(), "control flow"},
		{ExecRequest{Argv: []string{"sh", "-c", "for f in a; do ls; done"}}, shellPolicy(), "control flow"},
		{ExecRequest{Argv: []string{"sh", "-c", "x=1"}}, shellPolicy(), "variable assignments are not allowed"},
		{ExecRequest{Argv: []string{"sh", "-c", "ls && FOO=1 ls"}}, shellPolicy(), "assignment: FOO is not allowed"},
		{ExecRequest{Argv: []string{"sh", "-c", "export PATH=/tmp"}}, shellPolicy(), "not allowed"},
		{ExecRequest{Argv: []string{"sh", "-c", "ls <> file"}}, shellPolicy(), "redirection"},
		{ExecRequest{Argv: []string{"sh", "-c", "ls >& file"}}, shellPolicy(), "file descriptor numbers"},
		{ExecRequest{Argv: []string{"sh", "-c", "cat <<EOF\n$(id)\nEOF"}}, shellPolicy(), "command substitution"},
		{ExecRequest{Argv: []string{"sh", "-c", "ls .*/x"}}, shellPolicy(), "hidden entries"},
		{ExecRequest{Argv: []string{"sh", "-c", "grep --file=* x ."}}, shellPolicy(), "quote the glob pattern"},
		{ExecRequest{Argv: []string{"sh", "-c", "ls src/*/../../x"}}, shellPolicy(), ".. in a glob"},
		{ExecRequest{Argv: []string{"sh", "-c", "ls > .git/hooks/pre-commit"}}, shellPolicy(), "writing under .git"},
		{ExecRequest{Argv: []string{"sh", "-c", "sh -c ls"}}, shellPolicy(), "must not start another shell"},
		{ExecRequest{Argv: []string{"sh", "-c", ""}}, shellPolicy(), "empty script"},
		{ExecRequest{Argv: []string{"sh", "-c", "ls 'unterminated"}}, shellPolicy(), "does not parse"},
	}
	for _, tc := range cases {
		tc.req.Workspace = ws
		err := Validate(tc.req, tc.pol)
		r, ok := AsRefusal(err)
		if !ok {
			t.Errorf("%q (dir %q): want refusal containing %q, got %v", tc.req.Argv, tc.req.Dir, tc.reason, err)
			continue
		}
		if !strings.Contains(r.Reason, tc.reason) {
			t.Errorf("%q: reason %q does not contain %q", tc.req.Argv, r.Reason, tc.reason)
		}
	}
}

// TestSedLabels: GNU sed ends a label (after :, b, t, T) and v's version
// at a blank, ';', newline, '}' or '#' and compiles what follows as the
// next command, so ":a e id" runs id. The validator reads them the same
// way (refusing labels with other control or non-ASCII bytes) and checks
// the rest. Where sed is installed, each verdict is checked against
// sed --sandbox, which refuses e, r and w when it compiles the script.
func TestSedLabels(t *testing.T) {
	ws, _ := newWorkspace(t)
	const eCmd = "the e command"
	for _, tc := range []struct {
		script string
		reason string // "" when the script is allowed
	}{
		{":a;e id", eCmd},
		{":a e id", eCmd},
		{":a\te id", eCmd},
		{":a#c\ne id", eCmd},
		{"{:a};e id", eCmd},
		{"b a e id", eCmd},
		{"ba e id", eCmd},
		{"ta e id", eCmd},
		{"Ta e id", eCmd},
		{"$!ta\te id", eCmd},
		{"s/x/x/;Ta e id\n:a", eCmd},
		{"b;e id", eCmd},
		{"v 4.2 e id", eCmd},
		{"v4.2 e id", eCmd},
		{"v 4.2;e id", eCmd},
		{"v;e id", eCmd},
		{"{v};e id", eCmd},
		{"v e id", "version"},
		{":a}", "could not check"},
		{":a}e id", "could not check"},
		{"b}", "could not check"},
		{":;p", "could not check"},
		{":a\re id", "could not check"},
		{":a\u3000e id", "could not check"},
		{":a p", ""},
		{": a;p", ""},
		{"{:a}", ""},
		{"{:a};p", ""},
		{":a#c", ""},
		{":a;N;$!ba", ""},
		{"ba#c\n:a", ""},
		{"{ba};:a", ""},
		{"{ba };:a", ""},
		{"ta\tp\n:a", ""},
		{"v", ""},
		{"v 4.2", ""},
		{"v 4.2;p", ""},
		{"{v};p", ""},
	} {
		script := tc.script
		err := Validate(ExecRequest{Argv: []string{"sed", "-n", script, "README.md"}, Workspace: ws}, DefaultPolicy())
		switch {
		case tc.reason == "" && err != nil:
			t.Errorf("%q: refused: %v", script, err)
		case tc.reason != "" && (err == nil || !strings.Contains(err.Error(), tc.reason)):
			t.Errorf("%q: want refusal %q, got %v", script, tc.reason, err)
		}
		if _, lerr := exec.LookPath("sed"); lerr != nil {
			continue
		}
		out, serr := exec.Command("sed", "--sandbox", "-n", script, "/dev/null").CombinedOutput()
		switch {
		case tc.reason == "" && serr != nil:
			t.Errorf("%q: allowed, but sed --sandbox refuses it: %s", script, out)
		case tc.reason == eCmd && !strings.Contains(string(out), "disabled in sandbox mode"):
			t.Errorf("%q: sed --sandbox finds no e command: %v %s", script, serr, out)
		}
	}
}

// TestCatalog checks that every catalog validator accepts a plain use, that
// Enable refuses wrappers, and that the extra validators refuse their
// dangerous flags.
func TestCatalog(t *testing.T) {
	ws, _ := newWorkspace(t)
	pol := DefaultPolicy()
	if err := pol.Enable(Catalog()...); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"env", "xargs", "sh", "bash", "nosuchtool"} {
		p := DefaultPolicy()
		if err := p.Enable(bad); err == nil {
			t.Errorf("Enable(%q) succeeded", bad)
		}
	}
	for _, tc := range []struct {
		argv   []string
		reason string
	}{
		{[]string{"awk", "-F:", "{ print $1 }", "README.md"}, ""},
		{[]string{"awk", "($1 > 5) { n++ } END { print n }", "README.md"}, ""},
		{[]string{"awk", "BEGIN { system(\"id\") }"}, "awk: system is not allowed"},
		{[]string{"awk", "{ print | \"sh\" }"}, "awk: | (pipes"},
		{[]string{"awk", "{ \"id\" | getline x }"}, "awk: | (pipes"},
		{[]string{"awk", "{ getline x < \"/etc/passwd\" }"}, "awk: getline is not allowed"},
		{[]string{"awk", "{ print > \"/etc/x\" }"}, "output redirection"},
		{[]string{"awk", "-f", "prog.awk"}, "awk: -f is not allowed"},
		{[]string{"tar", "-czf", "out.tgz", "src"}, ""},
		{[]string{"tar", "xzf", "out.tgz", "-C", "src", "--no-recursion", "main.go"}, ""},
		{[]string{"tar", "xzf", "out.tgz", "-C", "src"}, "tar: extracting must name the members"},
		{[]string{"tar", "--to-command=sh", "-xf", "out.tar"}, "tar: --to-command is not allowed"},
		{[]string{"tar", "-I", "sh", "-xf", "out.tar"}, "tar: -I is not allowed"},
		{[]string{"tar", "--use-compress-program=sh", "-xf", "out.tar"}, "tar: --use-compress-program is not allowed"},
		{[]string{"tar", "--checkpoint-action=exec=id", "-cf", "out.tar", "src"}, "--checkpoint-action is not allowed"},
		{[]string{"tar", "-cf", "../outside/x.tar", "src"}, "path escapes"},
		{[]string{"tar", "-xf", "out.tar", "-C", "/"}, "path outside the workspace"},
		{[]string{"tar", "-P", "-xf", "out.tar"}, "tar: -P is not allowed"},
		{[]string{"cp", "README.md", "../outside/x"}, "path escapes"},
		{[]string{"cp", "README.md", ".git/hooks/pre-commit"}, "writing under .git"},
		{[]string{"mkdir", "-p", "a/b"}, ""},
		{[]string{"echo", "hello"}, ""},
		{[]string{"sleep", "1"}, ""},
	} {
		err := Validate(ExecRequest{Argv: tc.argv, Workspace: ws}, pol)
		if tc.reason == "" {
			if err != nil {
				t.Errorf("%q: refused: %v", tc.argv, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%q: want refusal %q, got %v", tc.argv, tc.reason, err)
		}
	}
	if err := Validate(ExecRequest{Argv: []string{"awk", "{print}"}, Workspace: ws}, DefaultPolicy()); err == nil ||
		!strings.Contains(err.Error(), "command not allowed: awk") {
		t.Errorf("awk must not be on the default list: %v", err)
	}
}

func TestFlagValidator(t *testing.T) {
	ws, _ := newWorkspace(t)
	v, err := FlagValidator("-n --name= --out>", OperandsPaths)
	if err != nil {
		t.Fatal(err)
	}
	pol := DefaultPolicy()
	pol.Commands["mytool"] = v
	for _, tc := range []struct {
		argv []string
		ok   bool
	}{
		{[]string{"mytool", "-n", "--name=x", "README.md"}, true},
		{[]string{"mytool", "--out", "result.txt"}, true},
		{[]string{"mytool", "--out", "../x"}, false},
		{[]string{"mytool", "-x"}, false},
		{[]string{"mytool", "/etc/passwd"}, false},
	} {
		err := Validate(ExecRequest{Argv: tc.argv, Workspace: ws}, pol)
		if (err == nil) != tc.ok {
			t.Errorf("%q: ok=%v, err=%v", tc.argv, tc.ok, err)
		}
	}
	if _, err := FlagValidator("-nope=x", OperandsText); err == nil {
		t.Error("bad token accepted")
	}
}

func TestParseGitConfig(t *testing.T) {
	entries, err := parseGitConfig("[core]\n\tbare = false\n[filter \"evil\"]\n\tclean = \"touch x\" # c\n[diff.ev]\ntextconv = a \\\n  b\n[include] path = other\n[alias] st\n")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.name()+"="+e.value)
	}
	want := "core.bare=false|filter.evil.clean=touch x |diff.ev.textconv=a   b|include.path=other|alias.st="
	if got := strings.Join(names, "|"); got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	for _, bad := range []string{"[core\n", "key = x\n", "[a]\nk = \"open\n", "[a]\nk = bad\\q\n", "[a \"b]\n"} {
		if _, err := parseGitConfig(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestValidateWithoutWorkspace is the server's view: no files, lexical
// checks only.
func TestValidateWithoutWorkspace(t *testing.T) {
	pol := shellPolicy()
	for _, tc := range []struct {
		argv   []string
		dir    string
		reason string
	}{
		{[]string{"cat", "README.md"}, "", ""},
		{[]string{"git", "-C", "src", "status"}, "", ""},
		{[]string{"sed", "--sandbox", "-f", "script.sed", "README.md"}, "", ""},
		{[]string{"sed", "-f", "script.sed", "README.md"}, "", "must run with --sandbox"},
		{[]string{"sh", "-c", "grep -n x ./src/*.go | sort"}, "sub", ""},
		{[]string{"cat", "../x"}, "", "path escapes the workspace"},
		{[]string{"cat", "../../x"}, "sub", "path escapes the workspace"},
		{[]string{"cat", "/etc/passwd"}, "", "path outside the workspace"},
		{[]string{"cat", "/workspace/../etc/passwd"}, "", "path escapes the workspace"},
		{[]string{"find", ".", "-exec", "id", ";"}, "", "find: -exec is not allowed"},
		{[]string{"ls"}, "../up", "path escapes the workspace"},
		{[]string{"sh", "-c", "ls > /tmp/x"}, "", "path outside the workspace"},
	} {
		err := Validate(ExecRequest{Argv: tc.argv, Dir: tc.dir}, pol)
		if tc.reason == "" {
			if err != nil {
				t.Errorf("%q: refused: %v", tc.argv, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%q: want %q, got %v", tc.argv, tc.reason, err)
		}
	}
}

// TestGitDirOutsideWorkspace: a .git file or symlink pointing out of the
// workspace is refused unless the policy trusts the place; a trusted git
// directory is still scanned for programs.
func TestGitDirOutsideWorkspace(t *testing.T) {
	ws, outside := newWorkspace(t)
	main := filepath.Join(outside, "main")
	if err := os.MkdirAll(main, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(main, "file.txt"), "content\n")
	initRepo(t, main)
	gitDir := filepath.Join(main, ".git")
	write(t, filepath.Join(ws, ".git"), "gitdir: "+gitDir+"\n")
	req := ExecRequest{Argv: []string{"git", "status"}, Workspace: ws}
	if err := Validate(req, DefaultPolicy()); err == nil || !strings.Contains(err.Error(), "git directory is outside the workspace") {
		t.Fatalf("want outside refusal, got %v", err)
	}
	pol := DefaultPolicy()
	pol.GitDirs = []string{main}
	if err := Validate(req, pol); err != nil {
		t.Fatalf("trusted git dir refused: %v", err)
	}
	hostGit(t, main, "config", "filter.x.smudge", "touch /workspace/PWNED")
	if err := Validate(req, pol); err == nil || !strings.Contains(err.Error(), "filter.x.smudge") {
		t.Fatalf("want filter refusal, got %v", err)
	}

	ws2, _ := newWorkspace(t)
	if err := os.Symlink(gitDir, filepath.Join(ws2, ".git")); err != nil {
		t.Fatal(err)
	}
	req.Workspace = ws2
	if err := Validate(req, DefaultPolicy()); err == nil || !strings.Contains(err.Error(), "git directory is outside the workspace") {
		t.Fatalf("symlinked .git: want outside refusal, got %v", err)
	}
}

// TestGitSubmoduleConfigScanned: the config of a submodule (under
// .git/modules) is checked too, since git status recurses into it.
func TestGitSubmoduleConfigScanned(t *testing.T) {
	ws, _ := newWorkspace(t)
	initRepo(t, ws)
	write(t, filepath.Join(ws, ".git", "modules", "lib", "config"), "[core]\n\tbare = false\n[diff \"x\"]\n\ttextconv = touch /workspace/PWNED\n")
	err := Validate(ExecRequest{Argv: []string{"git", "status"}, Workspace: ws}, DefaultPolicy())
	if err == nil || !strings.Contains(err.Error(), "diff.x.textconv") {
		t.Fatalf("want textconv refusal, got %v", err)
	}
}
