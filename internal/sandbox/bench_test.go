package sandbox

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// reportPercentiles adds p50 and p90 (milliseconds) to a benchmark.
func reportPercentiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	ms := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(ms(0.5), "p50-ms")
	b.ReportMetric(ms(0.9), "p90-ms")
}

// BenchmarkBwrapTrue is bare bwrap running /bin/true with the runner's
// namespace, mount and environment flags, without the runner (no limits,
// seccomp, fd protocol or output capture): the floor Run is compared to.
func BenchmarkBwrapTrue(b *testing.B) {
	bwrap, err := BwrapPath()
	if err != nil {
		b.Fatal(err)
	}
	feats, err := features(bwrap)
	if err != nil {
		b.Fatal(err)
	}
	ws := b.TempDir()
	args := bwrapArgs(bwrapSpec{
		workspace: ws, chdir: SandboxWorkspace, tmpSize: DefaultTmpSize,
		env: sandboxEnv(ExecRequest{}, nil, nil), argv: []string{"/bin/true"}, features: feats, bare: true,
	})
	var d []time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		cmd := exec.Command(bwrap, args...)
		cmd.Env = []string{}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("bwrap: %v: %s", err, out)
		}
		d = append(d, time.Since(start))
	}
	reportPercentiles(b, d)
}

// BenchmarkRunTrue is `true` through Validate and Run with default
// options: everything the worker adds on top of bare bwrap.
func BenchmarkRunTrue(b *testing.B) {
	if _, err := BwrapPath(); err != nil {
		b.Fatal(err)
	}
	ws := b.TempDir()
	pol := DefaultPolicy()
	if err := pol.Enable("true"); err != nil {
		b.Fatal(err)
	}
	req := ExecRequest{Argv: []string{"true"}, Workspace: ws, Timeout: 10 * time.Second}
	var d []time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if err := Validate(req, pol); err != nil {
			b.Fatal(err)
		}
		res, err := Run(context.Background(), req, RunOptions{})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("run: %v %+v", err, res)
		}
		d = append(d, time.Since(start))
	}
	reportPercentiles(b, d)
}
