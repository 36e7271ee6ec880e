package policy

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDurationJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
		out  string
	}{
		{`"15m"`, 15 * time.Minute, `"15m"`},
		{`"15m0s"`, 15 * time.Minute, `"15m"`},
		{`"90s"`, 90 * time.Second, `"1m30s"`},
		{`"1h"`, time.Hour, `"1h"`},
		{`"1h30m"`, 90 * time.Minute, `"1h30m"`},
		{`"168h"`, 7 * 24 * time.Hour, `"168h"`},
		{`"1.5s"`, 1500 * time.Millisecond, `"1.5s"`},
		{`"250ms"`, 250 * time.Millisecond, `"250ms"`},
		{`"-15m"`, -15 * time.Minute, `"-15m"`},
		{`"0s"`, 0, `"0s"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			var d Duration
			require.NoError(t, json.Unmarshal([]byte(tt.in), &d))
			require.Equal(t, tt.want, d.Std())
			b, err := json.Marshal(d)
			require.NoError(t, err)
			require.Equal(t, tt.out, string(b))
			var back Duration
			require.NoError(t, json.Unmarshal(b, &back))
			require.Equal(t, d, back)
		})
	}
}

func TestDurationJSONRejects(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`900`, `"15"`, `"fifteen minutes"`, `true`, `{}`, `""`} {
		t.Run(in, func(t *testing.T) {
			t.Parallel()
			var d Duration
			require.Error(t, json.Unmarshal([]byte(in), &d))
		})
	}
}
