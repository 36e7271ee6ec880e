//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// BwrapPath returns the absolute path of the bwrap binary: the usual
// system locations first, then PATH.
func BwrapPath() (string, error) {
	for _, p := range []string{"/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := exec.LookPath("bwrap")
	if err != nil {
		return "", errors.New("sandbox: bubblewrap (bwrap) is not installed; install the bubblewrap package")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("sandbox: bwrap: %w", err)
	}
	return abs, nil
}

// bwrapFeatures are the optional bwrap options the installed version has.
type bwrapFeatures struct {
	disableUserns bool // --disable-userns (0.8)
	tmpfsSize     bool // --size (0.8)
}

var featureCache sync.Map // bwrap path -> bwrapFeatures

// features reads bwrap --help once per binary.
func features(bwrap string) (bwrapFeatures, error) {
	if f, ok := featureCache.Load(bwrap); ok {
		return f.(bwrapFeatures), nil
	}
	cmd := exec.Command(bwrap, "--help")
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	if err != nil && len(out) == 0 {
		return bwrapFeatures{}, fmt.Errorf("sandbox: %s --help: %w", bwrap, err)
	}
	help := string(out)
	for _, need := range []string{"--info-fd", "--block-fd", "--sync-fd", "--seccomp", "--die-with-parent", "--ro-bind-data", "--cap-drop", "--unshare-all", "--new-session"} {
		if !strings.Contains(help, need) {
			return bwrapFeatures{}, fmt.Errorf("sandbox: %s lacks %s; a newer bubblewrap is needed", bwrap, need)
		}
	}
	f := bwrapFeatures{
		disableUserns: strings.Contains(help, "--disable-userns"),
		tmpfsSize:     strings.Contains(help, "--size"),
	}
	featureCache.Store(bwrap, f)
	return f, nil
}

// File descriptors passed to bwrap (ExtraFiles start at 3).
const (
	fdInfo    = 3 // --info-fd: bwrap writes the sandbox's pid here
	fdBlock   = 4 // --block-fd: the sandbox waits here until limits are set
	fdSeccomp = 5 // --seccomp: the BPF program
	fdPasswd  = 6 // --ro-bind-data: /etc/passwd
	fdGroup   = 7 // --ro-bind-data: /etc/group
	fdHold    = 8 // --sync-fd: our write end of the block pipe, held by the sandbox's init
)

// Minimal account files: the sandbox sees no real user names.
const (
	sandboxPasswd = "root:x:0:0:root:/tmp:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	sandboxGroup  = "root:x:0:\nnogroup:x:65534:\n"
)

// sandboxPath is PATH inside the sandbox.
const sandboxPath = "/usr/local/bin:/usr/bin:/bin"

// bwrapSpec is everything bwrapArgs needs.
type bwrapSpec struct {
	workspace string // real host path of the workspace root ("": none)
	chdir     string // working directory inside the sandbox
	network   bool
	tmpSize   int64
	quota     int64    // > 0: /workspace is a tmpfs of this size, filled by Run
	env       []string // NAME=value, already filtered
	binds     []Bind
	paths     []string // bwrap options hiding deny paths, binding read-only ones (pathPlan.mountArgs)
	argv      []string
	features  bwrapFeatures
	bare      bool // leave out the fd-based options (benchmark of bare bwrap, a server)
	seccompFD int  // with bare, > 0: the fd of the seccomp program (a server's)
}

// bwrapArgs is the bwrap command line (without the program name):
//
//	--unshare-all [--share-net] --unshare-user [--disable-userns]
//	--cap-drop ALL --die-with-parent --new-session --hostname airlock
//	--ro-bind /usr /usr, /bin /sbin /lib* as symlinks (or read-only binds)
//	--ro-bind-try /etc/ld.so.cache /etc/alternatives /etc/localtime
//	  (+ resolv.conf, hosts, nsswitch.conf, ssl certificates with network)
//	--ro-bind-data 6 /etc/passwd --ro-bind-data 7 /etc/group
//	--proc /proc --dev /dev --size N --tmpfs /tmp
//	--bind WORKSPACE /workspace (with a disk quota: --size Q --tmpfs /workspace)
//	[extra binds] --remount-ro /
//	--chdir /workspace/DIR --clearenv --setenv … (PATH, HOME=/tmp, git hardening)
//	--info-fd 3 --block-fd 4 --sync-fd 8 --seccomp 5 -- ARGV
func bwrapArgs(s bwrapSpec) []string {
	a := []string{"--unshare-all"}
	if s.network {
		a = append(a, "--share-net")
	}
	a = append(a, "--unshare-user")
	if s.features.disableUserns {
		a = append(a, "--disable-userns")
	}
	a = append(a, "--cap-drop", "ALL", "--die-with-parent", "--new-session", "--hostname", "airlock")
	a = append(a, "--ro-bind", "/usr", "/usr")
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	etc := []string{"/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime"}
	if s.network {
		etc = append(etc, "/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf",
			"/etc/gai.conf", "/etc/ssl/certs", "/etc/ca-certificates", "/etc/pki/tls/certs")
	}
	for _, e := range etc {
		a = append(a, "--ro-bind-try", e, e)
	}
	if !s.bare {
		a = append(a,
			"--ro-bind-data", strconv.Itoa(fdPasswd), "/etc/passwd",
			"--ro-bind-data", strconv.Itoa(fdGroup), "/etc/group")
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev")
	if s.features.tmpfsSize && s.tmpSize > 0 {
		a = append(a, "--size", strconv.FormatInt(s.tmpSize, 10))
	}
	a = append(a, "--tmpfs", "/tmp")
	switch {
	case s.quota > 0:
		a = append(a, "--size", strconv.FormatInt(s.quota, 10), "--tmpfs", SandboxWorkspace)
	case s.workspace != "":
		a = append(a, "--bind", s.workspace, SandboxWorkspace)
	}
	for _, b := range s.binds {
		if b.Writable {
			a = append(a, "--bind", b.Source, b.Dest)
		} else {
			a = append(a, "--ro-bind", b.Source, b.Dest)
		}
	}
	a = append(a, s.paths...)
	a = append(a, "--remount-ro", "/", "--chdir", s.chdir, "--clearenv")
	for _, kv := range s.env {
		name, value, _ := strings.Cut(kv, "=")
		a = append(a, "--setenv", name, value)
	}
	if s.bare {
		if s.seccompFD > 0 {
			a = append(a, "--seccomp", strconv.Itoa(s.seccompFD))
		}
		return append(append(a, "--"), s.argv...)
	}
	a = append(a,
		"--info-fd", strconv.Itoa(fdInfo),
		"--block-fd", strconv.Itoa(fdBlock),
		"--sync-fd", strconv.Itoa(fdHold),
		"--seccomp", strconv.Itoa(fdSeccomp),
		"--")
	return append(a, s.argv...)
}

// sandboxEnv is the command's whole environment: a fixed base, git
// hardening (GIT_CONFIG_COUNT), AIRLOCK_SANDBOX=bwrap, and the request's
// variables that pass the env filter (anything else is dropped silently;
// Validate refuses it).
func sandboxEnv(req ExecRequest, pol *Policy, gitExtra [][2]string) []string {
	env := map[string]string{
		"PATH":                sandboxPath,
		"HOME":                "/tmp",
		"TMPDIR":              "/tmp",
		"LANG":                "C.UTF-8",
		"TERM":                "dumb",
		"PAGER":               "cat",
		"GIT_PAGER":           "cat",
		"GIT_EDITOR":          "false",
		"GIT_TERMINAL_PROMPT": "0",
		"GIT_CONFIG_NOSYSTEM": "1",
		"GIT_CONFIG_GLOBAL":   "/dev/null",
		"GIT_ATTR_NOSYSTEM":   "1",
	}
	var extra []string
	if pol != nil {
		extra = pol.Env
	}
	for name, value := range req.Env {
		if envRefusal(name, value, extra) == "" {
			env[name] = value
		}
	}
	// Set last, so no request can change it: a program (or a build
	// script) can tell it runs in Airlock's sandbox.
	env["AIRLOCK_SANDBOX"] = "bwrap"
	cfg := append(append([][2]string{}, gitHardeningConfig...), gitExtra...)
	env["GIT_CONFIG_COUNT"] = strconv.Itoa(len(cfg))
	for i, kv := range cfg {
		env["GIT_CONFIG_KEY_"+strconv.Itoa(i)] = kv[0]
		env["GIT_CONFIG_VALUE_"+strconv.Itoa(i)] = kv[1]
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
