package audittool

import "testing"

// SetMaxQuery sets how many bytes of kept checkpoints one verification
// request carries, until t ends (t must not run in parallel).
func SetMaxQuery(t testing.TB, n int) {
	old := maxQuery
	maxQuery = n
	t.Cleanup(func() { maxQuery = old })
}
