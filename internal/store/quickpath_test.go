package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/audit"
)

// RequireQuickPath checks that every sealed event of s is verified by the
// quick path (audit.Hasher.QuickMatches): that its writer stored its JSON
// as jsonb spells it (migration 00032), so that verification hashes it
// without parsing it. An event stored otherwise still verifies, slowly,
// which only this check notices.
func RequireQuickPath(t testing.TB, s *Store) {
	t.Helper()
	ctx := context.Background()
	var h audit.Hasher
	checked := 0
	for after := int64(0); ; {
		recs, err := s.ChainPage(ctx, after, 500)
		require.NoError(t, err)
		for i := range recs {
			r := &recs[i]
			require.False(t, r.Missing, "seq %d: no event", r.Seq)
			require.True(t, h.QuickMatches(r.PrevHash, r), "seq %d (%s): stored as jsonb would not spell it: args %s risk %s decision %s data %s",
				r.Seq, r.Kind, r.Args, r.Risk, r.Decision, r.Data)
			checked++
		}
		if len(recs) < 500 {
			break
		}
		after = recs[len(recs)-1].Seq
	}
	require.Positive(t, checked, "nothing sealed to check")
}
