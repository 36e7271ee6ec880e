package worker

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock/internal/sandbox"
)

// PolicyFromEnv builds the exec policy from the environment, the same on
// the server (validation at submit) and on worker hosts (validation before
// the run): the default allowlist plus AIRLOCK_EXEC_COMMANDS (comma-separated
// names from the validator catalog), AIRLOCK_EXEC_ALLOW_SHELL=true for
// "sh -c" with every command of the script checked, and
// AIRLOCK_EXEC_ALLOW_NETWORK=true to let calls with args.network run with
// the host's network; AIRLOCK_MAX_TIMEOUT_S bounds an exec's timeout_s
// (default 3600: a call asking more is denied at submit, with the reason).
func PolicyFromEnv() (sandbox.Policy, error) {
	var names []string
	for n := range strings.SplitSeq(os.Getenv("AIRLOCK_EXEC_COMMANDS"), ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	var flags [2]bool
	for i, name := range []string{"AIRLOCK_EXEC_ALLOW_SHELL", "AIRLOCK_EXEC_ALLOW_NETWORK"} {
		switch v := os.Getenv(name); v {
		case "", "false":
		case "true":
			flags[i] = true
		default:
			return sandbox.Policy{}, fmt.Errorf("%s must be true or false, not %q", name, v)
		}
	}
	pol, err := NewPolicy(names, flags[0], flags[1])
	if err != nil {
		return pol, err
	}
	maxTimeout, err := envInt("AIRLOCK_MAX_TIMEOUT_S", DefaultMaxTimeoutSeconds, 1, 86400)
	if err != nil {
		return pol, err
	}
	pol.MaxTimeout = time.Duration(maxTimeout) * time.Second
	return pol, nil
}

// DefaultMaxTimeoutSeconds is the longest timeout_s an exec may ask for
// unless AIRLOCK_MAX_TIMEOUT_S says otherwise.
const DefaultMaxTimeoutSeconds = 3600

// Defaults of a worker host's bounds.
const (
	// DefaultDiskMB bounds a run's workspace: 1024 MiB.
	DefaultDiskMB = 1024
	// DefaultInodes bounds the files and directories of a run's workspace.
	DefaultInodes = 100000
)

// HostSettings are a worker host's own bounds, read the same way by the
// embedded worker and cmd/worker.
type HostSettings struct {
	// Concurrency is how many jobs run at once (AIRLOCK_WORKER_CONCURRENCY,
	// default 2).
	Concurrency int
	// DiskMB bounds the size of a run's workspace, its files as they were
	// plus everything the command writes (AIRLOCK_SANDBOX_DISK_MB, default
	// 1024).
	DiskMB int64
	// Inodes bounds the files, directories and links of a run's workspace
	// (AIRLOCK_SANDBOX_INODES, default 100000).
	Inodes int64
}

// HostSettingsFromEnv reads HostSettings from the environment.
func HostSettingsFromEnv() (HostSettings, error) {
	var h HostSettings
	var err error
	if h.Concurrency, err = envInt("AIRLOCK_WORKER_CONCURRENCY", DefaultConcurrency, 1, 256); err != nil {
		return h, err
	}
	disk, err := envInt("AIRLOCK_SANDBOX_DISK_MB", DefaultDiskMB, 1, 1<<20)
	if err != nil {
		return h, err
	}
	inodes, err := envInt("AIRLOCK_SANDBOX_INODES", DefaultInodes, 16, 1<<30)
	if err != nil {
		return h, err
	}
	h.DiskMB, h.Inodes = int64(disk), int64(inodes)
	return h, nil
}

// Apply sets the disk bounds on opts.
func (h HostSettings) Apply(opts sandbox.RunOptions) sandbox.RunOptions {
	opts.DiskQuota = h.DiskMB << 20
	opts.InodeQuota = h.Inodes
	return opts
}

// envInt reads a whole number in [lo, hi] from the environment.
func envInt(name string, def, lo, hi int) (int, error) {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s must be a whole number between %d and %d, not %q", name, lo, hi, v)
	}
	return n, nil
}

// NewPolicy is the default allowlist plus the catalog commands named, with
// the shell and network allowed or not.
func NewPolicy(commands []string, shell, network bool) (sandbox.Policy, error) {
	pol := sandbox.DefaultPolicy()
	if err := pol.Enable(commands...); err != nil {
		return pol, fmt.Errorf("exec commands: %w", err)
	}
	pol.AllowShell, pol.AllowNetwork = shell, network
	return pol, nil
}
