package pgembed

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// requiredBinaries are the programs a bin directory must hold to be usable.
var requiredBinaries = []string{"initdb", "postgres", "pg_ctl"}

// FindBinDir locates the directory holding the PostgreSQL server binaries
// (initdb, postgres and pg_ctl). It tries, in order: the AIRLOCK_PG_BINDIR
// environment variable (which, when set, must be valid), `pg_config --bindir`,
// the highest-versioned /usr/lib/postgresql/*/bin, and the directory of
// `postgres` found on PATH. The error lists every place tried.
func FindBinDir() (string, error) {
	if dir := os.Getenv("AIRLOCK_PG_BINDIR"); dir != "" {
		if err := checkBinDir(dir); err != nil {
			return "", fmt.Errorf("pgembed: AIRLOCK_PG_BINDIR=%q: %w", dir, err)
		}
		return dir, nil
	}

	var tried []string
	try := func(source, dir string) bool {
		if err := checkBinDir(dir); err != nil {
			tried = append(tried, fmt.Sprintf("%s (%s): %v", source, dir, err))
			return false
		}
		return true
	}

	if pgConfig, err := exec.LookPath("pg_config"); err == nil {
		out, err := exec.Command(pgConfig, "--bindir").Output()
		if err == nil {
			if dir := strings.TrimSpace(string(out)); dir != "" && try("pg_config --bindir", dir) {
				return dir, nil
			}
		} else {
			tried = append(tried, fmt.Sprintf("pg_config --bindir: %v", err))
		}
	} else {
		tried = append(tried, "pg_config: not on PATH")
	}

	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(matches, func(i, j int) bool {
		return versionKey(matches[i]) > versionKey(matches[j])
	})
	for _, dir := range matches {
		if try("/usr/lib/postgresql/*/bin", dir) {
			return dir, nil
		}
	}
	if len(matches) == 0 {
		tried = append(tried, "/usr/lib/postgresql/*/bin: no match")
	}

	if p, err := exec.LookPath("postgres"); err == nil {
		if resolved, err := filepath.EvalSymlinks(p); err == nil {
			p = resolved
		}
		if dir := filepath.Dir(p); try("PATH lookup of postgres", dir) {
			return dir, nil
		}
	} else {
		tried = append(tried, "postgres: not on PATH")
	}

	return "", fmt.Errorf("pgembed: PostgreSQL server binaries (initdb, postgres, pg_ctl) not found; "+
		"install the PostgreSQL server package (e.g. apt-get install postgresql) or set AIRLOCK_PG_BINDIR. Tried: %s",
		strings.Join(tried, "; "))
}

// checkBinDir reports whether dir holds every required executable.
func checkBinDir(dir string) error {
	var missing []string
	for _, name := range requiredBinaries {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return errors.New("missing " + strings.Join(missing, ", "))
	}
	return nil
}

// versionKey extracts the numeric major version from a
// /usr/lib/postgresql/<version>/bin path, for sorting; -1 if not numeric.
func versionKey(binDir string) float64 {
	v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	if err != nil {
		return -1
	}
	return v
}
