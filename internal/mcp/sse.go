package mcp

import (
	"bufio"
	"bytes"
	"io"
)

// Event is one server-sent event as EventReader read it.
type Event struct {
	// Lines are the event's lines without their ends (comments and every
	// field, in order).
	Lines [][]byte
	// Data is the event's data (its data fields' values joined by LF);
	// HasData reports whether it had a data field: an event without one
	// is not dispatched to a client as a message.
	Data    []byte
	HasData bool
	// Over reports an event longer than the reader reads: its lines and
	// data were dropped.
	Over bool
}

// EventReader reads a text/event-stream as the SSE specification (and
// the MCP SDKs' clients) read one: a line ends at CRLF, LF or a lone CR,
// a BOM that starts the stream is skipped, a field's name ends at the
// first colon and one space after it is dropped, an empty line ends an
// event. A relay that split lines otherwise would miss an event the
// client reads.
type EventReader struct {
	br     *bufio.Reader
	max    int
	first  bool // no line read yet
	skipLF bool // the last line ended with CR: an LF after it ends it too
}

// NewEventReader reads r, events of at most max bytes.
func NewEventReader(r io.Reader, max int) *EventReader {
	return &EventReader{br: bufio.NewReaderSize(r, 64<<10), max: max, first: true}
}

var bom = []byte("\xEF\xBB\xBF")

// Next returns the next event. At the end of the stream (or on a read
// error) it returns the error with the event left unfinished, if any (it
// has lines or is Over).
func (er *EventReader) Next() (Event, error) {
	var ev Event
	var data bytes.Buffer
	size := 0
	finish := func() Event {
		if ev.HasData && !ev.Over {
			ev.Data = bytes.Clone(bytes.TrimSuffix(data.Bytes(), []byte("\n")))
		}
		return ev
	}
	for {
		budget := er.max - size
		if ev.Over {
			budget = -1
		}
		line, over, err := er.line(budget)
		if er.first {
			er.first = false
			line = bytes.TrimPrefix(line, bom)
		}
		switch {
		case over:
			ev.Over, ev.Lines, ev.HasData = true, nil, false
			data.Reset()
		case len(line) == 0 && err == nil:
			if len(ev.Lines) > 0 || ev.Over {
				return finish(), nil
			}
		case len(line) > 0 && !ev.Over:
			ev.Lines = append(ev.Lines, line)
			size += len(line) + 1
			if name, value := field(line); string(name) == "data" {
				data.Write(value)
				data.WriteByte('\n')
				ev.HasData = true
			}
		}
		if err != nil {
			return finish(), err
		}
	}
}

// field splits an event's line into a field's name and value.
func field(line []byte) (name, value []byte) {
	i := bytes.IndexByte(line, ':')
	if i < 0 {
		return line, nil
	}
	value = line[i+1:]
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	return line[:i], value
}

// line reads one line (without its end). over reports a line longer than
// budget: it was read to its end and dropped. err ends the stream; line
// is then what was read of an unfinished line.
func (er *EventReader) line(budget int) (line []byte, over bool, err error) {
	if er.skipLF {
		er.skipLF = false
		if b, err := er.br.Peek(1); err == nil && b[0] == '\n' {
			_, _ = er.br.Discard(1)
		}
	}
	for {
		if _, err := er.br.Peek(1); err != nil {
			return line, over, err
		}
		chunk, _ := er.br.Peek(er.br.Buffered())
		end := bytes.IndexAny(chunk, "\r\n")
		n := len(chunk)
		if end >= 0 {
			n = end
		}
		if n > 0 && !over {
			if len(line)+n > budget {
				over, line = true, nil
			} else {
				line = append(line, chunk[:n]...)
			}
		}
		if end >= 0 {
			er.skipLF = chunk[end] == '\r'
			_, _ = er.br.Discard(end + 1)
			return line, over, nil
		}
		_, _ = er.br.Discard(n)
	}
}

// WriteEvent writes an event's lines, each ended with LF, and the empty
// line that ends it.
func WriteEvent(b *bytes.Buffer, lines [][]byte) {
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
}

// RewriteEvent writes the event of lines with its data replaced by msg
// (split into data lines at its line ends) where its first data line was,
// its event type made "message" (the type clients read as a message) and
// its other fields (id, retry, comments) kept where they were.
func RewriteEvent(b *bytes.Buffer, lines [][]byte, msg []byte) {
	wrote := false
	for _, l := range lines {
		switch name, _ := field(l); string(name) {
		case "data":
			if wrote {
				continue
			}
			wrote = true
			writeData(b, msg)
		case "event":
			b.WriteString("event: message\n")
		default:
			b.Write(l)
			b.WriteByte('\n')
		}
	}
	if !wrote {
		writeData(b, msg)
	}
	b.WriteByte('\n')
}

// writeData writes msg as data lines, split at its line ends (CRLF, LF
// or CR: JSON whitespace, never inside a string).
func writeData(b *bytes.Buffer, msg []byte) {
	msg = bytes.TrimSpace(msg)
	msg = bytes.ReplaceAll(msg, []byte("\r\n"), []byte("\n"))
	msg = bytes.ReplaceAll(msg, []byte("\r"), []byte("\n"))
	for _, line := range bytes.Split(msg, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(line)
		b.WriteByte('\n')
	}
}
