//go:build unix

package argon2

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapMemory maps size bytes of private anonymous memory. The Go heap does
// not hold it: the garbage collector never scans or keeps it, and the race
// detector keeps no shadow of it.
func mapMemory(size int) ([]byte, error) {
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("argon2: mapping %d bytes: %w", size, err)
	}
	return mem, nil
}

// releaseMemory drops mem's pages: they read as zero when touched again.
func releaseMemory(mem []byte) error {
	if err := unix.Madvise(mem, unix.MADV_DONTNEED); err != nil {
		return fmt.Errorf("argon2: releasing arena pages: %w", err)
	}
	return nil
}

func unmapMemory(mem []byte) error {
	if err := unix.Munmap(mem); err != nil {
		return fmt.Errorf("argon2: unmapping arena: %w", err)
	}
	return nil
}

// asBlocks views page-aligned mem as blocks.
func asBlocks(mem []byte) []block {
	if len(mem) < blockLength*8 {
		return nil
	}
	return unsafe.Slice((*block)(unsafe.Pointer(&mem[0])), len(mem)/(blockLength*8))
}
