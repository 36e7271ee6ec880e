package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// evilFilter is a repository config whose filter runs a program.
const evilFilter = "[core]\n\tbare = false\n[filter \"x\"]\n\tclean = touch /workspace/PWNED; cat\n"

// fileRepo makes dir a git directory built from ordinary files (HEAD,
// objects/, refs/, config), as anything that can write files can.
func fileRepo(t *testing.T, dir, config string) {
	t.Helper()
	write(t, filepath.Join(dir, "HEAD"), "ref: refs/heads/main\n")
	for _, d := range []string{"objects", "refs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if config != "" {
		write(t, filepath.Join(dir, "config"), config)
	}
}

func wantRefused(t *testing.T, ws string, argv []string, reason string) {
	t.Helper()
	err := Validate(ExecRequest{Argv: argv, Workspace: ws}, DefaultPolicy())
	r, ok := AsRefusal(err)
	if !ok || !strings.Contains(r.Reason, reason) {
		t.Errorf("%q: want a refusal containing %q, got %v", argv, reason, err)
		return
	}
	if strings.Contains(r.Reason, ws) {
		t.Errorf("refusal leaks the workspace's host path: %q", r.Reason)
	}
}

// TestGitCommandKeysRefused: every config key whose value git runs as a
// program is refused, also in a repository made of ordinary files in a
// subdirectory (git commit --trailer runs trailer.<token>.cmd).
func TestGitCommandKeysRefused(t *testing.T) {
	commit := []string{"git", "-C", "sub", "commit", "--allow-empty", "-m", "x", "--trailer", "x: y"}
	for _, tc := range []struct{ section, key, want string }{
		{`trailer "x"`, "command", "trailer.x.command"},
		{`trailer "x"`, "cmd", "trailer.x.cmd"},
		{`trailer "Sign"`, "CMD", "trailer.Sign.cmd"},
		{`gpg "ssh"`, "defaultKeyCommand", "gpg.ssh.defaultkeycommand"},
		{`sendemail`, "toCmd", "sendemail.tocmd"},
		{`sendemail "work"`, "ccCmd", "sendemail.work.cccmd"},
		{`sendemail`, "sendmailCmd", "sendemail.sendmailcmd"},
		{`sendemail`, "smtpServer", "sendemail.smtpserver"},
		{`guitool "x"`, "cmd", "guitool.x.cmd"},
		{`tar "tar.gz"`, "command", "tar.tar.gz.command"},
		{`interactive`, "diffFilter", "interactive.difffilter"},
		{`imap`, "tunnel", "imap.tunnel"},
		{`core`, "alternateRefsCommand", "core.alternaterefscommand"},
	} {
		ws, _ := newWorkspace(t)
		fileRepo(t, filepath.Join(ws, "sub"), "[core]\n\trepositoryformatversion = 0\n\tworktree = ..\n["+tc.section+"]\n\t"+tc.key+" = touch /workspace/PWNED\n")
		wantRefused(t, ws, commit, "the repository's config sets "+tc.want)
	}
	// Keys the sandbox overrides for every repository stay allowed.
	ws, _ := newWorkspace(t)
	fileRepo(t, filepath.Join(ws, "sub"), "[core]\n\trepositoryformatversion = 0\n\tworktree = ..\n\tsshCommand = ssh -i key\n\teditor = vim\n"+
		"[credential]\n\thelper = store\n[credential \"https://example.com\"]\n\thelper = store\n"+
		"[trailer \"x\"]\n\tkey = X\n\twhere = end\n[alias]\n\tlastcmd = log -1\n")
	if err := Validate(ExecRequest{Argv: commit, Workspace: ws}, DefaultPolicy()); err != nil {
		t.Errorf("overridden keys refused: %v", err)
	}
}

// TestGitCommondirHonoured: a git directory with HEAD and a commondir
// file is a repository to git, which reads the config of the common
// directory; so does the validator.
func TestGitCommondirHonoured(t *testing.T) {
	for _, common := range []string{"../common", "/workspace/common", "../link/../common"} {
		ws, _ := newWorkspace(t)
		write(t, filepath.Join(ws, "sub", "HEAD"), "ref: refs/heads/main\n")
		write(t, filepath.Join(ws, "sub", "commondir"), common+"\n")
		if strings.Contains(common, "link") {
			fileRepo(t, filepath.Join(ws, "common"), "[core]\n\tbare = true\n") // what a lexical ".." finds
		} else {
			fileRepo(t, filepath.Join(ws, "common"), evilFilter)
		}
		if err := os.MkdirAll(filepath.Join(ws, "a", "b"), 0o755); err != nil {
			t.Fatal(err)
		}
		symlink(t, "a/b", filepath.Join(ws, "link")) // link/.. is a, physically
		fileRepo(t, filepath.Join(ws, "a", "common"), evilFilter)
		wantRefused(t, ws, []string{"git", "-C", "sub", "status"}, "filter.x.clean")
	}
}

// TestGitDotGitResolvedAsInTheSandbox: .git files and symlinks, and the
// parts of a git directory, are followed the way git inside the sandbox
// follows them (/workspace is the workspace there), and a .git that cannot
// be followed is refused rather than taken for no repository.
func TestGitDotGitResolvedAsInTheSandbox(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, ws string)
		dir   string
		want  string
	}{
		{
			// git resolves a relative gitdir: against the directory of the
			// .git path it opened, not of the symlink's target.
			name: "symlinked .git file with a relative gitdir",
			setup: func(t *testing.T, ws string) {
				fileRepo(t, filepath.Join(ws, "r"), evilFilter)
				fileRepo(t, filepath.Join(ws, "d", "r"), "[core]\n\tbare = false\n")
				write(t, filepath.Join(ws, "d", "f"), "gitdir: r\n")
				symlink(t, "d/f", filepath.Join(ws, ".git"))
			},
			want: "filter.x.clean",
		},
		{
			name: "gitdir under /workspace",
			setup: func(t *testing.T, ws string) {
				fileRepo(t, filepath.Join(ws, "evil"), evilFilter)
				write(t, filepath.Join(ws, ".git"), "gitdir: /workspace/evil\n")
			},
			want: "filter.x.clean",
		},
		{
			name: "gitdir that does not exist",
			setup: func(t *testing.T, ws string) {
				write(t, filepath.Join(ws, ".git"), "gitdir: /workspace/missing\n")
			},
			want: "does not exist",
		},
		{
			name: "gitdir that is not a git directory",
			setup: func(t *testing.T, ws string) {
				write(t, filepath.Join(ws, ".git"), "gitdir: src\n")
			},
			want: "not a git directory",
		},
		{
			name: ".git symlink to /workspace",
			setup: func(t *testing.T, ws string) {
				fileRepo(t, filepath.Join(ws, "evil"), evilFilter)
				symlink(t, "/workspace/evil", filepath.Join(ws, ".git"))
			},
			want: "filter.x.clean",
		},
		{
			// In the sandbox the symlink dangles (a regular file has no
			// ..), so git goes on and finds sub itself.
			name: ".git symlink through a file",
			setup: func(t *testing.T, ws string) {
				fileRepo(t, filepath.Join(ws, "sub"), evilFilter)
				fileRepo(t, filepath.Join(ws, "benign"), "[core]\n\tbare = true\n")
				write(t, filepath.Join(ws, "f"), "x\n")
				symlink(t, "../f/../benign", filepath.Join(ws, "sub", ".git"))
			},
			dir:  "sub",
			want: "filter.x.clean",
		},
		{
			name: "objects and refs symlinked to /workspace",
			setup: func(t *testing.T, ws string) {
				write(t, filepath.Join(ws, "sub", "HEAD"), "ref: refs/heads/main\n")
				write(t, filepath.Join(ws, "sub", "config"), evilFilter)
				for _, d := range []string{"o", "r"} {
					if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
						t.Fatal(err)
					}
				}
				symlink(t, "/workspace/o", filepath.Join(ws, "sub", "objects"))
				symlink(t, "/workspace/r", filepath.Join(ws, "sub", "refs"))
			},
			dir:  "sub",
			want: "filter.x.clean",
		},
		{
			name: "config symlinked to /workspace",
			setup: func(t *testing.T, ws string) {
				fileRepo(t, filepath.Join(ws, "sub"), "")
				write(t, filepath.Join(ws, "evil.cfg"), evilFilter)
				symlink(t, "/workspace/evil.cfg", filepath.Join(ws, "sub", "config"))
			},
			dir:  "sub",
			want: "filter.x.clean",
		},
		{
			name: "objects that are an executable file",
			setup: func(t *testing.T, ws string) {
				write(t, filepath.Join(ws, "sub", "HEAD"), "ref: refs/heads/main\n")
				write(t, filepath.Join(ws, "sub", "config"), evilFilter)
				for _, f := range []string{"objects", "refs"} {
					write(t, filepath.Join(ws, "sub", f), "")
					if err := os.Chmod(filepath.Join(ws, "sub", f), 0o755); err != nil {
						t.Fatal(err)
					}
				}
			},
			dir:  "sub",
			want: "filter.x.clean",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, _ := newWorkspace(t)
			tc.setup(t, ws)
			argv := []string{"git", "status"}
			if tc.dir != "" {
				argv = []string{"git", "-C", tc.dir, "status"}
			}
			wantRefused(t, ws, argv, tc.want)
		})
	}
}

// TestGitDiscoveryStillAllows: ordinary layouts keep working.
func TestGitDiscoveryStillAllows(t *testing.T) {
	ws, _ := newWorkspace(t)
	initRepo(t, ws)
	hostGit(t, ws, "config", "core.sshCommand", "ssh -i key")
	hostGit(t, ws, "worktree", "add", "-q", "../wt")
	wt := filepath.Join(filepath.Dir(ws), "wt")
	pol := DefaultPolicy()
	pol.GitDirs = []string{filepath.Join(ws, ".git")}
	for _, req := range []ExecRequest{
		{Argv: []string{"git", "status"}, Workspace: ws},
		{Argv: []string{"git", "-C", "src", "log"}, Workspace: ws},
		{Argv: []string{"git", "status"}, Workspace: wt},
		{Argv: []string{"git", "status"}, Workspace: filepath.Join(ws, "src")}, // no repository above
	} {
		if err := Validate(req, pol); err != nil {
			t.Errorf("%q in %s: %v", req.Argv, req.Workspace, err)
		}
	}
}

// runMarker runs argv through the real sandbox and reports whether the
// command left /workspace/PWNED behind.
func runMarker(t *testing.T, ws string, argv []string, pol *Policy) bool {
	t.Helper()
	requireBwrap(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, ExecRequest{Argv: argv, Workspace: ws, Timeout: 20 * time.Second}, RunOptions{MaxProcs: 64, Policy: pol})
	if pol == nil && err != nil {
		t.Fatalf("Run: %v", err)
	}
	t.Logf("err=%v exit=%d stdout=%.300q stderr=%.300q", err, res.ExitCode, res.Stdout, res.Stderr)
	_, serr := os.Lstat(filepath.Join(ws, "PWNED"))
	return serr == nil
}

// TestGitTrailerCommandEndToEnd: the trailer command of a repository made
// of ordinary files never runs: Validate refuses it, and without
// validation the runtime overrides blank it for the -C target too.
func TestGitTrailerCommandEndToEnd(t *testing.T) {
	argv := []string{"git", "-C", "sub", "commit", "--allow-empty", "-m", "x", "--trailer", "x: y"}
	for _, validate := range []bool{true, false} {
		ws, _ := newWorkspace(t)
		fileRepo(t, filepath.Join(ws, "sub"), "[core]\n\trepositoryformatversion = 0\n\tworktree = ..\n[user]\n\tname = A\n\temail = a@example.com\n"+
			"[trailer \"x\"]\n\tcommand = touch /workspace/PWNED\n[trailer \"y\"]\n\tcmd = touch /workspace/PWNED\n")
		var pol *Policy
		if validate {
			p := DefaultPolicy()
			pol = &p
		}
		if runMarker(t, ws, argv, pol) {
			t.Errorf("validate=%v: the trailer command ran", validate)
		}
	}
}

// TestGitCommondirEndToEnd: a textconv driver in the common directory of
// a git directory found through commondir never runs.
func TestGitCommondirEndToEnd(t *testing.T) {
	for _, validate := range []bool{true, false} {
		ws, _ := newWorkspace(t)
		common := filepath.Join(ws, "common")
		hostGit(t, ws, "init", "-q", "--bare", "-b", "main", "common")
		blob := strings.TrimSpace(hostGitIn(t, common, "hello\n", "hash-object", "-w", "--stdin"))
		tree := hostGitIn(t, common, "100644 blob "+blob+"\tf.txt\n", "mktree")
		c := hostGit(t, common, "commit-tree", "-m", "m", tree)
		hostGit(t, common, "update-ref", "refs/heads/main", c)
		write(t, filepath.Join(common, "info", "attributes"), "* diff=x\n")
		hostGit(t, common, "config", "diff.x.textconv", "touch /workspace/PWNED; cat")
		write(t, filepath.Join(ws, "sub", "HEAD"), "ref: refs/heads/main\n")
		write(t, filepath.Join(ws, "sub", "commondir"), "../common\n")
		var pol *Policy
		if validate {
			p := DefaultPolicy()
			pol = &p
		}
		if runMarker(t, ws, []string{"git", "-C", "sub", "show", "HEAD"}, pol) {
			t.Errorf("validate=%v: the textconv driver ran", validate)
		}
	}
}

// hostGitIn is hostGit with stdin.
func hostGitIn(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestGitOverridesCoverEveryStartDir: the runtime overrides blank the
// drivers and trailer commands of the repositories of git's -C targets,
// also inside an "sh -c" script, not only of the working directory's.
func TestGitOverridesCoverEveryStartDir(t *testing.T) {
	ws, _ := newWorkspace(t)
	fileRepo(t, filepath.Join(ws, "a"), "[filter \"fa\"]\n\tclean = x\n[trailer \"ta\"]\n\tcmd = x\n")
	write(t, filepath.Join(ws, "b", "HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(ws, "b", "commondir"), "../c\n")
	fileRepo(t, filepath.Join(ws, "c"), "[diff \"db\"]\n\ttextconv = x\n[remote \"origin\"]\n\tuploadpack = x\n")
	c, err := newChecker(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{
		{"git", "-C", "a", "-C", "../b", "status"},
		{"sh", "-c", "cat README.md && git -C 'a' log | git -C b show"},
	} {
		pairs, err := gitDriverOverrides(gitScope{root: c.root}, gitStartDirs(c, argv))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, kv := range pairs {
			got[kv[0]] = kv[1] == ""
		}
		for _, k := range []string{"filter.fa.clean", "filter.fa.process", "trailer.ta.cmd", "trailer.ta.command",
			"diff.db.textconv", "remote.origin.uploadpack"} {
			if !got[k] {
				t.Errorf("%q: %s is not blanked (got %v)", argv, k, pairs)
			}
		}
	}
}
