package benchtable

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// passing returns a figure for every metric of the table that meets its
// target at its stated scale.
func passing(t *testing.T) []Result {
	t.Helper()
	var out []Result
	for _, row := range Rows {
		for _, m := range row.Metrics {
			v := m.Limit
			r, err := Measure(m.ID, v, m.MinScale, "")
			require.NoError(t, err)
			require.True(t, r.Pass, "%s at its limit passes", m.ID)
			out = append(out, r)
		}
	}
	return out
}

func verdicts(rep Report) map[string]Verdict {
	out := map[string]Verdict{}
	for _, j := range rep.Rows {
		out[j.ID] = j.Verdict
	}
	return out
}

func TestMeasureJudgesAgainstTheTarget(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		metric string
		value  float64
		scale  int64
		pass   bool
		atSc   bool
	}{
		{"at least: above", "allow.vs_floor", 61, 32, true, true},
		{"at least: at the limit", "allow.vs_floor", 60, 32, true, true},
		{"at least: below", "allow.vs_floor", 59.9, 32, false, true},
		{"at most: below", "allow.p99", 9.99, 32, true, true},
		{"at most: above", "allow.p99", 10.01, 32, false, true},
		{"nothing lost", "reviewers-1000.lost", 0, 1000, true, true},
		{"one lost", "reviewers-1000.lost", 1, 1000, false, true},
		{"within: sealing faster by 2 %", "sealing.gap", -2, 0, true, true},
		{"within: sealing faster by 4 %", "sealing.gap", -4, 0, false, true},
		{"within: sealing costs 3.5 %", "sealing.gap", 3.5, 0, false, true},
		{"below the stated scale", "correlation.p99", 1.2, 5_000_000, true, false},
		{"above the stated scale", "correlation.p99", 1.2, 25_000_000, true, true},
		{"no stated scale", "sandbox.added", 4, 0, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r, err := Measure(c.metric, c.value, c.scale, "")
			require.NoError(t, err)
			assert.Equal(t, c.pass, r.Pass, "pass")
			assert.Equal(t, c.atSc, r.AtScale, "at scale")
		})
	}
	_, err := Measure("allow.nonsense", 1, 0, "")
	assert.Error(t, err)
}

func TestJudgeVerdicts(t *testing.T) {
	t.Parallel()
	t.Run("every figure on target", func(t *testing.T) {
		t.Parallel()
		rep := Judge(passing(t))
		for _, j := range rep.Rows {
			assert.Equal(t, Pass, j.Verdict, j.ID)
		}
		assert.True(t, rep.OK(false))
		assert.True(t, rep.OK(true))
		assert.Len(t, rep.Rows, len(Rows))
	})
	t.Run("one figure off target fails its row only", func(t *testing.T) {
		t.Parallel()
		rs := passing(t)
		bad, err := Measure("pending.p99", 12.5, 32, "")
		require.NoError(t, err)
		rep := Judge(append(rs, bad))
		v := verdicts(rep)
		assert.Equal(t, Fail, v["pending"])
		assert.Equal(t, Pass, v["allow"])
		assert.False(t, rep.OK(false))
		assert.Contains(t, rep.Rows[1].Measured, "target ≤ 12.00 ms")
	})
	t.Run("a missing figure", func(t *testing.T) {
		t.Parallel()
		var rs []Result
		for _, r := range passing(t) {
			if r.Metric != "reviewers-5000.memory" {
				rs = append(rs, r)
			}
		}
		rep := Judge(rs)
		assert.Equal(t, Missing, verdicts(rep)["reviewers-5000"])
		assert.False(t, rep.OK(false))
	})
	t.Run("an empty file misses every row", func(t *testing.T) {
		t.Parallel()
		rep := Judge(nil)
		assert.Equal(t, len(Rows), rep.Count(Missing))
		assert.False(t, rep.OK(false))
	})
	t.Run("a failed figure outranks a missing one", func(t *testing.T) {
		t.Parallel()
		bad, err := Measure("reviewers-1000.p99", 80, 1000, "")
		require.NoError(t, err)
		assert.Equal(t, Fail, verdicts(Judge([]Result{bad}))["reviewers-1000"])
	})
	t.Run("below the stated scale", func(t *testing.T) {
		t.Parallel()
		small, err := Measure("correlation.p99", 1.5, 5_000_000, "")
		require.NoError(t, err)
		rep := Judge(append(passing(t), small))
		assert.Equal(t, NotAtScale, verdicts(rep)["correlation"])
		assert.True(t, rep.OK(false), "not a failure")
		assert.False(t, rep.OK(true), "strict: a failure")
		assert.Contains(t, rep.Rows[7].Measured, "at 5,000,000 events, not 20,000,000")
	})
	t.Run("off target below the stated scale fails", func(t *testing.T) {
		t.Parallel()
		small, err := Measure("correlation.p99", 2.5, 5_000_000, "")
		require.NoError(t, err)
		assert.Equal(t, Fail, verdicts(Judge(append(passing(t), small)))["correlation"])
	})
	t.Run("the last figure of a metric wins", func(t *testing.T) {
		t.Parallel()
		bad, err := Measure("sandbox.added", 7, 0, "")
		require.NoError(t, err)
		good, err := Measure("sandbox.added", 3, 0, "")
		require.NoError(t, err)
		rs := append(passing(t), bad, good)
		assert.Equal(t, Pass, verdicts(Judge(rs))["sandbox"])
		assert.Equal(t, Fail, verdicts(Judge(append(rs, bad)))["sandbox"])
	})
	t.Run("unknown metrics are listed, not judged", func(t *testing.T) {
		t.Parallel()
		rep := Judge(append(passing(t), Result{Metric: "allow.p95", Value: 1}))
		assert.True(t, rep.OK(true))
		require.Len(t, rep.Unknown, 1)
		var buf bytes.Buffer
		require.NoError(t, rep.Print(&buf))
		assert.Contains(t, buf.String(), `unknown metric "allow.p95"`)
	})
}

func TestRecorderRoundTrip(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "results.jsonl")
	first := NewRecorder(path)
	first.Add("allow.vs_floor", 72.5, 32, "3,625 vs 5,000 tx/s")
	first.Add("allow.p99", 9.5, 32, "")
	require.NoError(t, first.Flush())
	second := NewRecorder(path) // a second command appends
	second.Add("sandbox.added", 6, 0, "")
	require.NoError(t, second.Flush())

	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	rs, err := Read(f)
	require.NoError(t, err)
	require.Len(t, rs, 3)
	assert.Equal(t, "allow", rs[0].Row)
	assert.Equal(t, "≥ 60.0 %", rs[0].Target)
	assert.Equal(t, int64(32), rs[0].Scale)
	assert.Equal(t, "3,625 vs 5,000 tx/s", rs[0].Detail)
	assert.False(t, rs[2].Pass)

	rep := Judge(rs)
	v := verdicts(rep)
	assert.Equal(t, Pass, v["allow"])
	assert.Equal(t, Fail, v["sandbox"])
	assert.Equal(t, Missing, v["wake"])
	var buf bytes.Buffer
	require.NoError(t, rep.Print(&buf))
	out := buf.String()
	assert.Contains(t, out, "| allow path |")
	assert.Contains(t, out, "72.5 % of the bare floor (3,625 vs 5,000 tx/s); p99 9.50 ms | **PASS** |")
	assert.Contains(t, out, "| **FAIL** |")
	assert.Contains(t, out, "9 rows: 1 PASS, 1 FAIL, 7 MISSING, 0 NOT AT SCALE")
	assert.Equal(t, len(Rows)+2, strings.Count(out, "\n|"), "a header, a rule and a line per row")
}

func TestRecorderRefusesAnUnknownMetric(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "results.jsonl")
	rec := NewRecorder(path)
	rec.Add("allow.vs_floor", 70, 32, "")
	rec.Add("allow.p95", 1, 32, "")
	assert.Error(t, rec.Flush())
	_, err := os.Stat(path)
	assert.True(t, os.IsNotExist(err), "nothing written")
}

func TestReadRejectsWhatIsNotAResult(t *testing.T) {
	t.Parallel()
	_, err := Read(strings.NewReader("{\"metric\":\"allow.p99\",\"value\":1}\n\nnot json\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 3")
	_, err = Read(strings.NewReader(`{"value":1}`))
	assert.ErrorContains(t, err, "no metric")
}

func TestThousands(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 5_000_000: "5,000,000", -1234: "-1,234"} {
		assert.Equal(t, want, Thousands(n))
	}
}
