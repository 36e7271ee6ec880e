package sandbox

import "strings"

// permissionErrors are what a program prints when the kernel refused it
// (EACCES, EPERM, EROFS): inside the sandbox usually a read-only bind, a
// hidden path, a dropped capability or a seccomp filter.
var permissionErrors = []string{"permission denied", "read-only file system", "operation not permitted", "eacces", "eperm", "erofs"}

// PermissionHint is the hint a failed run (exit code not 0) carries when
// its output shows a permission error: that the sandbox, not the program,
// may be the cause. It is "" for a run that succeeded or shows none.
func PermissionHint(exitCode int, stdout, stderr string) string {
	if exitCode == 0 {
		return ""
	}
	for _, s := range [...]string{stderr, stdout} {
		low := strings.ToLower(s)
		for _, p := range permissionErrors {
			if strings.Contains(low, p) {
				return "the output shows a permission error (" + p + "): the Airlock sandbox may be the cause. " +
					"It runs the command without network, with /usr read-only, the workspace the only writable tree " +
					"(less its read_only_paths, .git metadata included), deny_paths hidden, no privileges and a syscall filter."
			}
		}
	}
	return ""
}
