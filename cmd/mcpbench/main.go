// Command mcpbench measures what Airlock adds to an MCP tool call: an
// allowed tools/call through the gateway (/mcp/{name}) against the same
// upstream called directly over Streamable HTTP, and through the stdio
// proxy (the code of `airlock mcp proxy`, as a process of its own)
// against the same upstream launched directly, with concurrent clients,
// on the embedded durable PostgreSQL. Each call through Airlock is one
// submit (allow) and one result report. It prints p50 and p99 per path
// and the added latency against the targets (p50 ≤ 2 ms, p99 ≤ 10 ms).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/app"
	"github.com/airlockhq/airlock/internal/mcpproxy"
)

// Targets of the added latency (issue 11).
const (
	targetP50 = 2 * time.Millisecond
	targetP99 = 10 * time.Millisecond
)

// roleEnv runs this binary as the stdio upstream or as the proxy.
const roleEnv = "MCPBENCH_ROLE"

// profileEnv, for a proxy, is the file its CPU profile goes to
// (-proxyprofile: PREFIX.N for the Nth client's proxy).
const profileEnv = "MCPBENCH_CPUPROFILE"

// proxyProfile is -proxyprofile.
var proxyProfile string

func main() {
	switch os.Getenv(roleEnv) {
	case "upstream":
		if err := upstream().Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "mcpbench upstream:", err)
			os.Exit(1)
		}
		return
	case "proxy":
		runProxy()
		return
	}
	duration := flag.Duration("duration", 10*time.Second, "how long each path is measured in all")
	clients := flag.Int("clients", 16, "concurrent MCP clients")
	rate := flag.Float64("rate", 10, "calls per second of each client (0: each calls again as soon as answered, the machine's capacity)")
	flag.StringVar(&proxyProfile, "proxyprofile", "", "write each stdio proxy's CPU profile to PREFIX.N (merge them with go tool pprof PREFIX.*)")
	flag.Parse()
	debug.SetGCPercent(400) // as cmd/server does
	if *rate > 0 {
		interval = time.Duration(float64(time.Second) / *rate)
	}
	if err := run(*duration, *clients); err != nil {
		fmt.Fprintln(os.Stderr, "mcpbench:", err)
		os.Exit(1)
	}
}

type echoIn struct {
	Message string `json:"message"`
}

// upstream is the MCP server every path reaches: one echo tool.
func upstream() *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "bench-upstream", Version: "1.0.0"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "echo", Description: "Echoes a message."},
		func(ctx context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "Echo: " + in.Message}}}, nil, nil
		})
	return srv
}

// runProxy is `airlock mcp proxy --server bench-stdio` in this binary.
func runProxy() {
	if path := os.Getenv(profileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mcpbench proxy:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "mcpbench proxy:", err)
			os.Exit(1)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	cl := client.New(os.Getenv("AIRLOCK_URL"), os.Getenv("AIRLOCK_TOKEN"))
	err := mcpproxy.Run(context.Background(), mcpproxy.Config{Client: cl, Server: "bench-stdio", In: os.Stdin, Out: os.Stdout,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpbench proxy:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// result is one path's latencies.
type result struct {
	name      string
	errors    int
	latencies []time.Duration
}

func (r *result) pct(p float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	return r.latencies[min(len(r.latencies)-1, int(float64(len(r.latencies))*p))]
}

// interval is each client's time between calls (0: none).
var interval time.Duration

// drive calls echo on every session for d, each at most once per
// interval, and adds the latencies to r.
func drive(r *result, sessions []*sdk.ClientSession, d time.Duration) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for w, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			errs := 0
			ctx := context.Background()
			// The clients start spread over one interval.
			next := time.Now().Add(time.Duration(w) * interval / time.Duration(len(sessions)))
			for i := 0; time.Now().Before(deadline); i++ {
				if interval > 0 {
					time.Sleep(time.Until(next))
					next = next.Add(interval)
				}
				t0 := time.Now()
				res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": fmt.Sprintf("w%d-%d", w, i)}})
				if err == nil && res.IsError {
					err = fmt.Errorf("isError: %v", res.Content)
				}
				if err != nil {
					if errs++; errs == 1 {
						fmt.Fprintf(os.Stderr, "%s: %v\n", r.name, err)
					}
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			r.latencies = append(r.latencies, lat...)
			r.errors += errs
			mu.Unlock()
		}()
	}
	wg.Wait()
}

// bearer adds an agent token to every request.
type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

func connect(ctx context.Context, t sdk.Transport) (*sdk.ClientSession, error) {
	c := sdk.NewClient(&sdk.Implementation{Name: "mcpbench", Version: "1.0.0"}, nil)
	return c.Connect(ctx, t, nil)
}

func run(d time.Duration, n int) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "airlock-mcpbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := app.Start(ctx, app.Config{Addr: "127.0.0.1:0", DataDir: dir, AdminPassword: "bench-admin-password", Worker: "off"}, log)
	if err != nil {
		return err
	}
	defer a.Shutdown(context.Background())

	// The HTTP upstream on the loopback.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return upstream() }, nil)}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	upURL := "http://" + ln.Addr().String() + "/mcp"

	self, err := os.Executable()
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * n}}
	admin, _, err := client.New(a.URL(), "").WithHTTPClient(hc).Login(ctx, "admin", "bench-admin-password")
	if err != nil {
		return err
	}
	for _, s := range []client.MCPServer{
		{Name: "bench", Transport: "http", URL: upURL, AllowPrivate: []string{"127.0.0.0/8"}},
		{Name: "bench-stdio", Transport: "stdio", Command: self, Env: map[string]string{roleEnv: "upstream"}, Sandbox: new(bool)},
	} {
		if _, err := admin.CreateMCPServer(ctx, s); err != nil {
			return err
		}
	}
	policy := map[string]any{"rules": []map[string]any{{"id": "echo", "tool": "mcp.*.echo", "effect": "allow"}},
		"settings": map[string]any{"max_pending": 1_000_000}}

	var direct, gateway, directStdio, proxy []*sdk.ClientSession
	defer func() {
		for _, s := range slices.Concat(direct, gateway, directStdio, proxy) {
			s.Close()
		}
	}()
	for i := range n {
		id := fmt.Sprintf("mcp-bench-%02d", i)
		if err := admin.CreateAgent(ctx, id, id); err != nil {
			return err
		}
		if _, err := admin.PutAgentPolicy(ctx, id, policy); err != nil {
			return err
		}
		tok, err := admin.IssueAgentToken(ctx, id, 0)
		if err != nil {
			return err
		}
		s, err := connect(ctx, &sdk.StreamableClientTransport{Endpoint: upURL, HTTPClient: hc, MaxRetries: -1})
		if err != nil {
			return fmt.Errorf("direct: %w", err)
		}
		direct = append(direct, s)
		s, err = connect(ctx, &sdk.StreamableClientTransport{Endpoint: a.URL() + "/mcp/bench",
			HTTPClient: &http.Client{Transport: bearer{tok.Token, hc.Transport}}, MaxRetries: -1})
		if err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
		gateway = append(gateway, s)
		up := exec.Command(self)
		up.Env = []string{roleEnv + "=upstream"}
		s, err = connect(ctx, &sdk.CommandTransport{Command: up})
		if err != nil {
			return fmt.Errorf("direct stdio: %w", err)
		}
		directStdio = append(directStdio, s)
		px := exec.Command(self)
		px.Env = []string{roleEnv + "=proxy", "AIRLOCK_URL=" + a.URL(), "AIRLOCK_TOKEN=" + tok.Token}
		if proxyProfile != "" {
			px.Env = append(px.Env, fmt.Sprintf("%s=%s.%d", profileEnv, proxyProfile, len(proxy)))
		}
		px.Stderr = os.Stderr
		s, err = connect(ctx, &sdk.CommandTransport{Command: px})
		if err != nil {
			return fmt.Errorf("proxy: %w", err)
		}
		proxy = append(proxy, s)
	}

	paths := []struct {
		r        *result
		sessions []*sdk.ClientSession
	}{
		{&result{name: "direct (Streamable HTTP)"}, direct},
		{&result{name: "gateway /mcp/{name}"}, gateway},
		{&result{name: "direct (stdio)"}, directStdio},
		{&result{name: "proxy (airlock mcp proxy)"}, proxy},
	}
	for _, p := range paths { // warm-up
		drive(&result{name: p.r.name}, p.sessions, 500*time.Millisecond)
	}
	// The paths alternate in rounds so that drift on a shared machine
	// weighs on each alike.
	const rounds = 4
	for range rounds {
		for _, p := range paths {
			drive(p.r, p.sessions, d/rounds)
		}
	}
	errs := 0
	for _, p := range paths {
		slices.Sort(p.r.latencies)
		errs += p.r.errors
	}

	fmt.Printf("\nAirlock MCP connector benchmark — %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	pace := "each calling again as soon as answered"
	if interval > 0 {
		pace = fmt.Sprintf("each calling every %s", interval)
	}
	fmt.Printf("machine: %d CPUs, %s; embedded PostgreSQL, durable; %d concurrent clients, %s; %s per path; tools/call of an allowed echo\n\n",
		runtime.NumCPU(), runtime.GOARCH, n, pace, d)
	fmt.Printf("%-28s %9s %9s %9s %7s\n", "path", "calls/s", "p50", "p99", "errors")
	for _, p := range paths {
		fmt.Printf("%-28s %9.0f %9s %9s %7d\n", p.r.name, float64(len(p.r.latencies))/d.Seconds(),
			p.r.pct(0.50).Round(10*time.Microsecond), p.r.pct(0.99).Round(10*time.Microsecond), p.r.errors)
	}
	fmt.Printf("\n%-28s %12s %12s %s\n", "added by Airlock", "p50", "p99", "target: p50 ≤ 2 ms, p99 ≤ 10 ms")
	fail := false
	for _, c := range []struct {
		name          string
		base, through *result
	}{{"gateway vs direct HTTP", paths[0].r, paths[1].r}, {"proxy vs direct stdio", paths[2].r, paths[3].r}} {
		p50 := c.through.pct(0.50) - c.base.pct(0.50)
		p99 := c.through.pct(0.99) - c.base.pct(0.99)
		verdict := "PASS"
		if p50 > targetP50 || p99 > targetP99 {
			verdict, fail = "FAIL", true
		}
		fmt.Printf("%-28s %12s %12s %s\n", c.name, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), verdict)
	}
	if errs > 0 {
		return errors.New("errors during the run")
	}
	if fail {
		return errors.New("a target was missed")
	}
	return nil
}
