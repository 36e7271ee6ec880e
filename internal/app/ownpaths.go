package app

import (
	"os"
	"path/filepath"
)

// airlockOwnPaths are the deny entries for Airlock's own files, which no
// agent call may name whatever the policy says: the data directory's
// database and keys, and the key files wherever they are. The data
// directory's worktrees stay reachable (agents work in them).
func airlockOwnPaths(cfg Config) []string {
	var out []string
	add := func(p string) {
		if p == "" {
			return
		}
		if abs, err := filepath.Abs(p); err == nil {
			out = append(out, abs)
		}
	}
	if cfg.DataDir != "" {
		add(filepath.Join(cfg.DataDir, "pg"))
		add(filepath.Join(cfg.DataDir, "*.key"))
	}
	add(cfg.JWTKeyFile)
	add(cfg.AuditKeyFile)
	return out
}

// userHome is the server's home directory, which "~" path entries also
// cover ("" when unknown).
func userHome() string {
	h, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return h
}
