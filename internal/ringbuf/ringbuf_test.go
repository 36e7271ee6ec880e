package ringbuf_test

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"github.com/airlockhq/airlock/internal/ringbuf"
)

func TestRingBuffer(t *testing.T) {
	rb := ringbuf.New(10)
	rb.Write([]byte("abc"))
	rb.Write([]byte("defghij"))
	if got := string(rb.Bytes()); got != "abcdefghij" || rb.Truncated() {
		t.Fatalf("got %q truncated=%v", got, rb.Truncated())
	}
	rb.Write([]byte("klm"))
	if got := string(rb.Bytes()); got != "defghijklm" || !rb.Truncated() {
		t.Fatalf("got %q", got)
	}
	rb.Write([]byte("0123456789ABCDEF"))
	if got := string(rb.Bytes()); got != "6789ABCDEF" {
		t.Fatalf("got %q", got)
	}
	for i := 0; i < 100; i++ {
		rb.Write([]byte{byte('a' + i%26)})
	}
	if got := string(rb.Bytes()); got != "mnopqrstuv" || rb.Total() != 129 {
		t.Fatalf("got %q total %d", got, rb.Total())
	}
}

// TestTextNeverStartsMidCharacter: the tail of a stream of multi-byte
// characters, cut anywhere, starts on a character boundary and is valid
// UTF-8; an untruncated buffer is returned as is.
func TestTextNeverStartsMidCharacter(t *testing.T) {
	for _, s := range []string{"é", "€", "😀", "aé€😀"} {
		for max := 1; max <= 13; max++ {
			rb := ringbuf.New(max)
			for range 10 {
				rb.Write([]byte(s))
			}
			got := rb.Text()
			if !utf8.Valid(got) {
				t.Fatalf("%q max %d: %q is not valid UTF-8", s, max, got)
			}
			if raw := rb.Bytes(); len(raw)-len(got) > 3 || !bytes.HasSuffix(raw, got) {
				t.Fatalf("%q max %d: Text %q is not Bytes %q less a partial character", s, max, got, raw)
			}
		}
	}
	rb := ringbuf.New(10)
	rb.Write([]byte{0x80, 'a'}) // not truncated: kept as written
	if got := rb.Text(); !bytes.Equal(got, []byte{0x80, 'a'}) {
		t.Fatalf("got %q", got)
	}
}
