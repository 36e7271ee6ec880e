package argon2

// Arena is the working memory of one Argon2 computation at a time. Use it
// from one goroutine at a time.
type Arena struct {
	mem []byte  // the mapping (nil: none, blocks come from the heap)
	b   []block // mem as blocks
}

// NewArena returns an arena of memory KiB (the m of the Argon2 parameters),
// mapped outside the Go heap where the system allows it.
func NewArena(memory uint32) (*Arena, error) {
	mem, err := mapMemory(int(memory) * blockLength * 8)
	if err != nil {
		return nil, err
	}
	return &Arena{mem: mem, b: asBlocks(mem)}, nil
}

// blocks returns n blocks of working memory: the arena's, or a heap slice
// when it has fewer (or a is nil).
func (a *Arena) blocks(n uint32) []block {
	if a != nil && int(n) <= len(a.b) {
		return a.b[:n]
	}
	return make([]block, n)
}

// Reset wipes the arena and gives its pages back to the system until the
// next computation touches them again.
func (a *Arena) Reset() error {
	if a == nil || a.mem == nil {
		return nil
	}
	return releaseMemory(a.mem)
}

// Close unmaps the arena; it must not be used again.
func (a *Arena) Close() error {
	if a == nil || a.mem == nil {
		return nil
	}
	mem := a.mem
	a.mem, a.b = nil, nil
	return unmapMemory(mem)
}
