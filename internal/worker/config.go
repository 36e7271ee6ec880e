package worker

import (
	"fmt"
	"os"
	"strings"

	"github.com/airlockhq/airlock/internal/sandbox"
)

// PolicyFromEnv builds the exec policy from the environment, the same on
// the server (validation at submit) and on worker hosts (validation before
// the run): the default allowlist plus AIRLOCK_EXEC_COMMANDS (comma-separated
// names from the validator catalog), AIRLOCK_EXEC_ALLOW_SHELL=true for
// "sh -c" with every command of the script checked, and
// AIRLOCK_EXEC_ALLOW_NETWORK=true to let calls with args.network run with
// the host's network.
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
	return NewPolicy(names, flags[0], flags[1])
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
