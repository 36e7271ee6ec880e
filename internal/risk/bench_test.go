package risk

import (
	"strings"
	"testing"
)

// realistic4KiB is a typical write: a markdown file with prose, a code block
// and a few shell commands, with the metadata agents send next to it — about
// 4 KiB of strings in all.
func realistic4KiB() map[string]any {
	doc := "# Release notes 1.4\n\n" +
		"This release makes the importer faster and fixes two bugs reported by the billing team. " +
		"Please read the upgrade section before you deploy, and tell us if anything looks off.\n\n" +
		"## Upgrade\n\nRun the migrations first, then restart the workers:\n\n```sh\n" +
		"make migrate\ngo test ./...\n./bin/importer --config config/prod.yaml --dry-run\n" +
		"git tag -a v1.4.0 -m 'release 1.4.0'\n```\n\n" +
		"## Changes\n\n" +
		"- The importer reads CSV files in parallel; on our test data it is 3x faster.\n" +
		"- Amounts with a currency symbol (for example $12.50) are parsed correctly.\n" +
		"- The previous release ignored the retry limit in the config; it is honoured again.\n" +
		"- Error messages name the file and the line that failed.\n\n"
	for len(doc) < 3600 {
		doc += "The system keeps a log of every import in the audit table, with the user, the file name " +
			"and the number of rows. Old entries are removed after ninety days by the cleanup job. "
	}
	doc = doc[:3600]
	return map[string]any{
		"path":      "docs/releases/1.4.md",
		"content":   doc,
		"message":   "docs: release notes for 1.4 with upgrade steps",
		"branch":    "release/1.4",
		"author":    map[string]any{"name": "Release Bot", "email": "release-bot@example.com"},
		"tags":      []any{"docs", "release", "importer"},
		"reviewers": []any{"alice@example.com", "bob@example.com"},
		"note":      "Generated from the changelog; the numbers come from the benchmark run on the staging cluster.",
	}
}

func argBytes(v any) int {
	switch t := v.(type) {
	case string:
		return len(t)
	case map[string]any:
		n := 0
		for k, e := range t {
			n += len(k) + argBytes(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range t {
			n += argBytes(e)
		}
		return n
	}
	return 0
}

// BenchmarkClassify4KiB measures Classify on a realistic 4 KiB argument
// set; it is on the submit path and must stay well under 50 µs per call.
func BenchmarkClassify4KiB(b *testing.B) {
	args := realistic4KiB()
	b.ReportAllocs()
	b.SetBytes(int64(argBytes(args)))
	for b.Loop() {
		Classify("fs.write", args, allowExample)
	}
}

func TestRealistic4KiBIsAbout4KiB(t *testing.T) {
	t.Parallel()
	n := argBytes(realistic4KiB())
	if n < 3900 || n > 4300 {
		t.Fatalf("benchmark args hold %d bytes of strings, want about 4096", n)
	}
	got := Classify("fs.write", realistic4KiB(), allowExample)
	if got.Injection || got.Level != Medium {
		t.Fatalf("benign release notes: %+v", got)
	}
	if strings.Contains(strings.Join(got.Reasons, "\n"), "SQL") {
		t.Fatalf("benign release notes: %+v", got)
	}
}

// BenchmarkPathArgs is the walk the hard path tier makes over the
// submit benchmark's args.
func BenchmarkPathArgs(b *testing.B) {
	args := map[string]any{"path": "/srv/data/report.csv"}
	for b.Loop() {
		PathArgs("fs.read", args, func(PathArg) bool { return true })
	}
}

// BenchmarkClassifyHostile: 2 MiB of nothing but trigger words (what
// TestClassifyHostileInputIsBounded classifies), for the scan's figure.
func BenchmarkClassifyHostile(b *testing.B) {
	args := hostileTriggerWords()
	b.SetBytes(2 << 20)
	for b.Loop() {
		Classify("exec", args, Config{})
	}
}
