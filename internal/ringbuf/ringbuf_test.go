package ringbuf_test

import (
	"testing"

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
