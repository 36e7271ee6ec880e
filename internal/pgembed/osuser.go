package pgembed

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// SystemUser is the OS user that runs PostgreSQL when the calling process is
// root (initdb and postgres refuse to run as root). Start creates it with
// useradd when missing and falls back to "nobody" if that fails.
const SystemUser = "airlock-pg"

// osUser is the identity the PostgreSQL processes run as.
type osUser struct {
	name string
	uid  uint32
	gid  uint32
	// switchTo is true when the child processes must change credentials
	// (we are root); false when they simply inherit ours.
	switchTo bool
}

func (u osUser) String() string {
	return fmt.Sprintf("%s (uid %d)", u.name, u.uid)
}

// credential returns the SysProcAttr credential for child processes, or nil
// when no switch is needed.
func (u osUser) credential() *syscall.Credential {
	if !u.switchTo {
		return nil
	}
	// An empty, non-nil Groups drops root's supplementary groups.
	return &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: []uint32{}}
}

// resolveUser decides which OS user runs the cluster whose data directory is
// dataDir. Not root: the current user. Root: the owner of an existing
// non-root-owned data directory (so a cluster is reused as whoever created
// it), otherwise SystemUser (created if needed), otherwise nobody.
func resolveUser(ctx context.Context, dataDir string, log *slog.Logger) (osUser, error) {
	if os.Geteuid() != 0 {
		name := strconv.Itoa(os.Geteuid())
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
		return osUser{name: name, uid: uint32(os.Geteuid()), gid: uint32(os.Getegid())}, nil
	}
	if fi, err := os.Stat(dataDir); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
			name := strconv.Itoa(int(st.Uid))
			if u, err := user.LookupId(name); err == nil {
				name = u.Username
			}
			return osUser{name: name, uid: st.Uid, gid: st.Gid, switchTo: true}, nil
		}
	}
	return ensureSystemUser(ctx, log)
}

var (
	systemUserMu     sync.Mutex
	systemUserCached *osUser
)

// ensureSystemUser returns SystemUser, creating it with useradd if missing;
// falls back to nobody when it cannot be created.
func ensureSystemUser(ctx context.Context, log *slog.Logger) (osUser, error) {
	systemUserMu.Lock()
	defer systemUserMu.Unlock()
	if systemUserCached != nil {
		return *systemUserCached, nil
	}
	u, err := lookupUser(SystemUser)
	if err != nil {
		var createErr error
		// Several test binaries may race to create the user, and useradd
		// fails while another holds the passwd lock: retry a few times,
		// looking the user up again between attempts.
		for attempt := 0; attempt < 5; attempt++ {
			createErr = createSystemUser(ctx)
			if u, err = lookupUser(SystemUser); err == nil {
				break
			}
			time.Sleep(time.Duration(50*(attempt+1)) * time.Millisecond)
		}
		if err != nil {
			log.Warn("pgembed: cannot create OS user, falling back to nobody",
				"user", SystemUser, "err", errors.Join(createErr, err))
			if u, err = lookupUser("nobody"); err != nil {
				return osUser{}, fmt.Errorf("pgembed: running as root needs an unprivileged OS user for PostgreSQL: "+
					"creating %q failed (%v) and \"nobody\" does not exist (%v)", SystemUser, createErr, err)
			}
		} else {
			log.Info("pgembed: created OS user for PostgreSQL", "user", SystemUser, "uid", u.uid)
		}
	}
	systemUserCached = &u
	return u, nil
}

func createSystemUser(ctx context.Context) error {
	useradd, err := exec.LookPath("useradd")
	if err != nil {
		return err
	}
	shell := "/usr/sbin/nologin"
	if _, err := os.Stat(shell); err != nil {
		shell = "/bin/false"
	}
	args := []string{"--system", "--no-create-home", "--shell", shell, "--comment", "Airlock embedded PostgreSQL"}
	if _, err := user.LookupGroup(SystemUser); err == nil {
		args = append(args, "--gid", SystemUser)
	} else {
		args = append(args, "--user-group")
	}
	out, err := exec.CommandContext(ctx, useradd, append(args, SystemUser)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("useradd: %w: %s", err, out)
	}
	return nil
}

func lookupUser(name string) (osUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return osUser{}, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return osUser{}, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return osUser{}, err
	}
	if uid == 0 {
		return osUser{}, fmt.Errorf("user %q has uid 0", name)
	}
	return osUser{name: name, uid: uint32(uid), gid: uint32(gid), switchTo: true}, nil
}

// checkTraversable verifies that u can search (x permission) every directory
// from / down to dir, judged by mode bits as u has no supplementary groups.
func checkTraversable(dir string, u osUser) error {
	if !u.switchTo {
		return nil
	}
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("pgembed: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		var bit fs.FileMode
		switch {
		case st.Uid == u.uid:
			bit = 0o100
		case st.Gid == u.gid:
			bit = 0o010
		default:
			bit = 0o001
		}
		if fi.Mode().Perm()&bit == 0 {
			return fmt.Errorf("pgembed: running as root, PostgreSQL runs as OS user %s, which cannot traverse %s "+
				"(mode %v, owner uid %d) on the way to %s: make every parent directory of the cluster directory "+
				"searchable by others (e.g. chmod o+x %s) or choose another directory "+
				"(note: testing.T.TempDir directories are 0700; use os.MkdirTemp and chmod 0755)",
				u, p, fi.Mode().Perm(), st.Uid, dir, p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// chownTo gives path to u (a no-op when not switching users).
func chownTo(path string, u osUser) error {
	if !u.switchTo {
		return nil
	}
	if err := os.Chown(path, int(u.uid), int(u.gid)); err != nil {
		return fmt.Errorf("pgembed: %w", err)
	}
	return nil
}
