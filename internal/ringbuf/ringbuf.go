// Package ringbuf keeps the tail of a stream: the last bytes written, in a
// buffer that never grows past its bound (a sandboxed command's output, an
// MCP server's stderr).
package ringbuf

// Buffer keeps the last max bytes written to it and counts the rest;
// it never holds more than max bytes.
type Buffer struct {
	buf   []byte
	max   int
	start int   // index of the oldest byte once full
	total int64 // bytes written in all
}

// New returns a buffer keeping the last max bytes.
func New(max int) *Buffer {
	return &Buffer{max: max}
}

// Write keeps the tail of everything written; it never fails.
func (r *Buffer) Write(p []byte) (int, error) {
	n := len(p)
	r.total += int64(n)
	if r.max <= 0 {
		return n, nil
	}
	if r.buf == nil {
		r.buf = make([]byte, 0, r.max)
	}
	if len(p) >= r.max {
		p = p[len(p)-r.max:]
		r.buf = r.buf[:r.max]
		copy(r.buf, p)
		r.start = 0
		return n, nil
	}
	if len(r.buf) < r.max {
		room := r.max - len(r.buf)
		take := min(room, len(p))
		r.buf = append(r.buf, p[:take]...)
		p = p[take:]
		if len(p) == 0 {
			return n, nil
		}
	}
	// Full: overwrite the oldest bytes, wrapping around.
	for len(p) > 0 {
		k := copy(r.buf[r.start:], p)
		p = p[k:]
		r.start = (r.start + k) % r.max
	}
	return n, nil
}

// Bytes returns the kept bytes, oldest first.
func (r *Buffer) Bytes() []byte {
	out := make([]byte, 0, len(r.buf))
	out = append(out, r.buf[r.start:]...)
	return append(out, r.buf[:r.start]...)
}

// Text returns the kept bytes like Bytes, but never starting with half a
// UTF-8 character: once older bytes were dropped, the continuation bytes
// (at most three) of a character whose first byte went with them are
// dropped too. Text that is not UTF-8 loses at most those three bytes.
func (r *Buffer) Text() []byte {
	b := r.Bytes()
	if !r.Truncated() {
		return b
	}
	i := 0
	for i < 3 && i < len(b) && b[i]&0xC0 == 0x80 {
		i++
	}
	return b[i:]
}

// Truncated reports whether bytes were dropped.
func (r *Buffer) Truncated() bool { return r.total > int64(len(r.buf)) }

// Total is how many bytes were written in all.
func (r *Buffer) Total() int64 { return r.total }
