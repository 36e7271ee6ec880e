package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/benchtable"
)

// write records every metric of the table at value(m) and scale(m).
func write(t *testing.T, value func(benchtable.Metric) float64, scale func(benchtable.Metric) int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "results.jsonl")
	rec := benchtable.NewRecorder(path)
	for _, row := range benchtable.Rows {
		for _, m := range row.Metrics {
			rec.Add(m.ID, value(m), scale(m), "")
		}
	}
	require.NoError(t, rec.Flush())
	return path
}

func limit(m benchtable.Metric) float64     { return m.Limit }
func statedScale(m benchtable.Metric) int64 { return m.MinScale }

func TestExitCodes(t *testing.T) {
	t.Parallel()
	allPass := write(t, limit, statedScale)
	oneFails := write(t, func(m benchtable.Metric) float64 {
		if m.ID == "wake.p99" {
			return 51
		}
		return m.Limit
	}, statedScale)
	small := write(t, limit, func(m benchtable.Metric) int64 {
		if m.ID == "correlation.p99" {
			return 5_000_000
		}
		return m.MinScale
	})
	partial := filepath.Join(t.TempDir(), "partial.jsonl")
	require.NoError(t, os.WriteFile(partial, nil, 0o644))
	garbage := filepath.Join(t.TempDir(), "garbage.jsonl")
	require.NoError(t, os.WriteFile(garbage, []byte("PASS\n"), 0o644))

	cases := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"every row passes", []string{allPass}, 0, "9 PASS"},
		{"a row fails", []string{oneFails}, 1, "| **FAIL** |"},
		{"rows missing", []string{partial}, 1, "9 MISSING"},
		{"below the stated scale", []string{small}, 0, "1 NOT AT SCALE"},
		{"below the stated scale, strict", []string{"-strict", small}, 1, "1 NOT AT SCALE"},
		{"not a results file", []string{garbage}, 2, ""},
		{"no such file", []string{filepath.Join(t.TempDir(), "none")}, 2, ""},
		{"no argument", nil, 2, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			assert.Equal(t, c.code, run(c.args, &stdout, &stderr), "exit code; stderr %s", stderr.String())
			assert.Contains(t, stdout.String(), c.out)
		})
	}
}
