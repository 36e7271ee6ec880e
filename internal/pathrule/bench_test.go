package pathrule

import "testing"

// BenchmarkMatch is the tier's cost for one path argument on the submit
// path, against the built-in list.
func BenchmarkMatch(b *testing.B) {
	s := Compile("/home/srv", BuiltinDeny)
	for b.Loop() {
		if _, ok := s.Match("/srv/data/report.csv"); ok {
			b.Fatal("matched")
		}
	}
}
