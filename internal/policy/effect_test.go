package policy

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEffect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		effect Effect
		valid  bool
		rank   int
	}{
		{Allow, true, 0},
		{Approve, true, 1},
		{Deny, true, 2},
		{"", false, 2},
		{"ALLOW", false, 2},
		{"block", false, 2},
	}
	for _, tt := range tests {
		t.Run(string(tt.effect), func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.valid, tt.effect.Valid())
			require.Equal(t, tt.rank, tt.effect.Rank())
		})
	}
}

func TestValidRiskLevel(t *testing.T) {
	t.Parallel()
	for _, l := range []string{"low", "medium", "high", "critical"} {
		require.True(t, ValidRiskLevel(l), l)
	}
	for _, l := range []string{"", "none", "High", "severe"} {
		require.False(t, ValidRiskLevel(l), l)
	}
}
