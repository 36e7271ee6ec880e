//go:build !unix

package argon2

// Without mmap an arena holds nothing: each computation allocates on the
// heap, as golang.org/x/crypto/argon2 does.
func mapMemory(int) ([]byte, error) { return nil, nil }

func releaseMemory([]byte) error { return nil }

func unmapMemory([]byte) error { return nil }

func asBlocks([]byte) []block { return nil }
