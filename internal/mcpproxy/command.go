package mcpproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/mcp"
	"github.com/airlockhq/airlock/internal/ringbuf"
	"github.com/airlockhq/airlock/internal/sandbox"
)

// commandUpstream is a launched stdio MCP server.
type commandUpstream struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	inMu   sync.Mutex
	exited chan struct{}
	err    error // the command's exit, once exited is closed

	tailMu sync.Mutex
	tail   *ringbuf.Buffer
}

// startCommand launches the registered command: resolved on the proxy's
// PATH when it is a bare name, in bubblewrap unless the registration says
// sandbox: false, with exactly the registration's environment.
func startCommand(ctx context.Context, p *proxy, s mcp.Server) (*commandUpstream, error) {
	env, err := mcp.CommandEnv(s, p.c.LookupEnv)
	if err != nil {
		return nil, err
	}
	path := s.Command
	if !filepath.IsAbs(path) {
		if path, err = lookPath(s.Command, p.c.LookupEnv); err != nil {
			return nil, err
		}
	}
	argv := append([]string{path}, s.Args...)
	var cmd *exec.Cmd
	if s.Sandbox == nil || *s.Sandbox {
		cmd, err = sandbox.ServerCommand(ctx, sandbox.ServerSpec{Argv: argv, Env: env,
			ReadOnlyPaths: s.ReadOnlyPaths, Network: s.Network})
		if err != nil {
			return nil, err
		}
	} else {
		cmd = exec.CommandContext(ctx, path, s.Args...)
		cmd.Env = env
		cmd.Dir = "/"
	}
	cmd.WaitDelay = 5 * time.Second
	started := false
	defer func() {
		if !started { // the sandbox's files (its seccomp filter), when Start was never reached
			for _, f := range cmd.ExtraFiles {
				f.Close()
			}
		}
	}()
	u := &commandUpstream{cmd: cmd, exited: make(chan struct{}), tail: ringbuf.New(StderrTail)}
	if u.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = u
	err = cmd.Start()
	started = true
	for _, f := range cmd.ExtraFiles { // the sandbox's (its seccomp filter): the child has its copies
		f.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("launching %s: %w", path, err)
	}
	p.log.Info("mcp proxy: MCP server started", "server", s.Name, "command", path, "sandbox", s.Sandbox == nil || *s.Sandbox, "pid", cmd.Process.Pid)
	go func() {
		br := bufio.NewReaderSize(stdout, 64<<10)
		for {
			line, err := readLine(br)
			if len(line) > 0 {
				p.fromUpstream(line)
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					p.log.Warn("mcp proxy: reading the MCP server", "err", err)
					_ = cmd.Process.Kill()
				}
				break
			}
		}
		u.err = cmd.Wait()
		close(u.exited)
	}()
	return u, nil
}

// lookPath finds a bare command name on the proxy's PATH.
func lookPath(name string, lookup func(string) (string, bool)) (string, error) {
	pathEnv, _ := lookup("PATH")
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // never the working directory
		}
		cand := filepath.Join(dir, name)
		if p, err := exec.LookPath(cand); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not on the proxy's PATH", name)
}

// Write keeps the tail of the command's stderr.
func (u *commandUpstream) Write(b []byte) (int, error) {
	u.tailMu.Lock()
	defer u.tailMu.Unlock()
	return u.tail.Write(b)
}

// stderrTail is the kept stderr, redacted.
func (u *commandUpstream) stderrTail() string {
	u.tailMu.Lock()
	defer u.tailMu.Unlock()
	s := strings.ToValidUTF8(string(u.tail.Bytes()), "\uFFFD")
	s = audit.RedactString(strings.TrimSpace(s))
	if u.tail.Truncated() {
		s = "[…] " + s
	}
	return s
}

func (u *commandUpstream) send(_ context.Context, msg []byte) error {
	u.inMu.Lock()
	defer u.inMu.Unlock()
	if len(msg) == 0 || msg[len(msg)-1] != '\n' {
		msg = append(msg, '\n')
	}
	_, err := u.stdin.Write(msg)
	return err
}

func (u *commandUpstream) close() {
	u.inMu.Lock()
	_ = u.stdin.Close()
	u.inMu.Unlock()
	select {
	case <-u.exited:
	case <-time.After(5 * time.Second):
		_ = u.cmd.Process.Kill()
		<-u.exited
	}
}

func (u *commandUpstream) done() <-chan struct{} { return u.exited }

func (u *commandUpstream) why() string {
	msg := "it exited"
	if u.err != nil {
		msg = u.err.Error()
	}
	if t := u.stderrTail(); t != "" {
		msg += "; its stderr ended with: " + t
	}
	return msg
}
