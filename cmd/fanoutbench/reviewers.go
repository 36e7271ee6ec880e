package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// The websocket reviewers run in a child process (this binary with
// -reviewer-child), so that the bench process's memory growth while they
// connect is the two server instances' alone: the clients' connections,
// buffers and goroutines are the child's.
//
// The protocol, one line at a time. The child prints "connected" once every
// reviewer has dialled and "ready" once every one has received a message.
// The parent then writes "reset" (forget the warm-up; answered "reset"),
// "sub ID UNIXNANO" for every timed submit and its start, and "end": the
// child waits up to 10 s for the last receipts and prints the summary (one
// JSON line) and exits. Both processes read the same wall clock.

// childEnv carries the instances' URLs (space-separated) and the
// reviewer's token to the child, out of its command line.
const (
	childURLsEnv  = "AIRLOCK_FANOUT_URLS"
	childTokenEnv = "AIRLOCK_FANOUT_TOKEN"
)

// summary is what the child reports: receipts of the timed submits.
type summary struct {
	// Latencies per instance of the reviewer (1, 2) and overall, sorted.
	Samples  [3]int           `json:"samples"`
	P50      [3]time.Duration `json:"p50"`
	P99      [3]time.Duration `json:"p99"`
	Max      [3]time.Duration `json:"max"`
	Missing  int              `json:"missing"`  // (reviewer, submit) pairs never received
	Dropped  int              `json:"dropped"`  // reviewers whose connection ended
	Messages int64            `json:"messages"` // every message received, warm-up included
}

// reviewer is one websocket connection; it notes the receipt time of every
// action.created.
type reviewer struct {
	inst int
	conn *websocket.Conn
	mu   sync.Mutex
	seen map[string]int64 // action id → receipt, Unix ns
	err  error
}

// createdPrefix starts every action.created message.
var createdPrefix = []byte(`{"type":"action.created","action":{"id":"`)

func (r *reviewer) read(ctx context.Context, count *atomic.Int64) {
	for {
		_, data, err := r.conn.Read(ctx)
		at := time.Now().UnixNano()
		if err != nil {
			r.mu.Lock()
			r.err = err
			r.mu.Unlock()
			return
		}
		count.Add(1)
		// The action's id is its first field: no need to decode the rest.
		if bytes.HasPrefix(data, createdPrefix) && len(data) >= len(createdPrefix)+36 {
			id := string(data[len(createdPrefix) : len(createdPrefix)+36])
			r.mu.Lock()
			r.seen[id] = at
			r.mu.Unlock()
		}
	}
}

// runChild is the child process: n reviewers alternating over the
// instances, driven over stdin/stdout.
func runChild(n int) error {
	urls := strings.Fields(os.Getenv(childURLsEnv))
	token := os.Getenv(childTokenEnv)
	if len(urls) != 2 || token == "" {
		return fmt.Errorf("child: %s and %s must be set", childURLsEnv, childTokenEnv)
	}
	ctx := context.Background()
	var outMu sync.Mutex
	say := func(line string) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintln(os.Stdout, line)
	}
	var messages atomic.Int64
	revs := make([]*reviewer, n)
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	for i := range revs {
		inst := i % 2
		conn, _, err := websocket.Dial(ctx, "ws"+urls[inst][len("http"):]+"/api/v1/stream",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
		if err != nil {
			return fmt.Errorf("reviewer %d: %w", i, err)
		}
		conn.SetReadLimit(1 << 20)
		revs[i] = &reviewer{inst: inst, conn: conn, seen: map[string]int64{}}
		go revs[i].read(readCtx, &messages)
	}
	say("connected")
	go func() {
		for {
			ready := 0
			for _, r := range revs {
				r.mu.Lock()
				if len(r.seen) > 0 {
					ready++
				}
				r.mu.Unlock()
			}
			if ready == n {
				say("ready")
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	submitted := map[string]int64{}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		switch {
		case len(f) == 1 && f[0] == "reset":
			for _, r := range revs {
				r.mu.Lock()
				clear(r.seen)
				r.mu.Unlock()
			}
			say("reset")
		case len(f) == 3 && f[0] == "sub":
			t0, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				return fmt.Errorf("child: %q: %w", in.Text(), err)
			}
			submitted[f[1]] = t0
		case len(f) == 1 && f[0] == "end":
			s := collect(revs, submitted, 10*time.Second)
			s.Messages = messages.Load()
			b, err := json.Marshal(s)
			if err != nil {
				return err
			}
			say(string(b))
			for _, r := range revs {
				r.conn.CloseNow()
			}
			return nil
		default:
			return fmt.Errorf("child: unexpected %q", in.Text())
		}
	}
	return fmt.Errorf("child: stdin ended before \"end\": %v", in.Err())
}

// collect waits up to settle for every reviewer (still connected) to have
// received every submitted action and summarises the receipts.
func collect(revs []*reviewer, submitted map[string]int64, settle time.Duration) summary {
	until := time.Now().Add(settle)
	for time.Now().Before(until) {
		done := true
		for _, r := range revs {
			r.mu.Lock()
			if r.err == nil {
				// Only the timed submits count: a warm-up message that
				// arrived after the reset is in seen too.
				for id := range submitted {
					if _, ok := r.seen[id]; !ok {
						done = false
						break
					}
				}
			}
			r.mu.Unlock()
			if !done {
				break
			}
		}
		if done {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var s summary
	var lat [3][]time.Duration
	for _, r := range revs {
		r.mu.Lock()
		for id, t0 := range submitted {
			at, ok := r.seen[id]
			if !ok {
				s.Missing++
				continue
			}
			d := time.Duration(at - t0)
			lat[r.inst] = append(lat[r.inst], d)
			lat[2] = append(lat[2], d)
		}
		if r.err != nil {
			s.Dropped++
		}
		r.mu.Unlock()
	}
	for i, l := range lat {
		slices.Sort(l)
		s.Samples[i] = len(l)
		if len(l) > 0 {
			s.P50[i], s.P99[i], s.Max[i] = pct(l, 0.50), pct(l, 0.99), l[len(l)-1]
		}
	}
	return s
}

// child is the parent's handle on the reviewer process.
type child struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

// startChild starts n reviewers in a child process against urls.
func startChild(n int, urls [2]string, token string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-reviewer-child", "-reviewers", strconv.Itoa(n))
	cmd.Env = append(os.Environ(), childURLsEnv+"="+urls[0]+" "+urls[1], childTokenEnv+"="+token)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the reviewers: %w", err)
	}
	c := &child{cmd: cmd, in: in, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	return c, nil
}

// expect waits up to timeout for the child's next line and checks it.
func (c *child) expect(want string, timeout time.Duration) error {
	select {
	case line, ok := <-c.lines:
		if !ok {
			return fmt.Errorf("reviewers: exited waiting for %q: %v", want, c.cmd.Wait())
		}
		if line != want {
			return fmt.Errorf("reviewers: said %q, want %q", line, want)
		}
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("reviewers: no %q within %s", want, timeout)
	}
}

// send writes one line to the child.
func (c *child) send(format string, args ...any) error {
	_, err := fmt.Fprintf(c.in, format+"\n", args...)
	return err
}

// finish ends the run and returns the child's summary.
func (c *child) finish() (summary, error) {
	var s summary
	if err := c.send("end"); err != nil {
		return s, err
	}
	select {
	case line, ok := <-c.lines:
		if !ok {
			return s, fmt.Errorf("reviewers: exited before the summary: %v", c.cmd.Wait())
		}
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			return s, fmt.Errorf("reviewers: summary %q: %w", line, err)
		}
	case <-time.After(time.Minute):
		return s, fmt.Errorf("reviewers: no summary within a minute")
	}
	c.in.Close()
	return s, c.cmd.Wait()
}

// kill stops the child (after a failure).
func (c *child) kill() {
	if c.cmd.ProcessState == nil {
		c.cmd.Process.Kill()
		c.cmd.Wait()
	}
}

func pct(l []time.Duration, p float64) time.Duration {
	return l[min(len(l)-1, int(float64(len(l))*p))]
}
