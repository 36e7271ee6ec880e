package policy

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/pathrule"
)

// builtinPathsJSON is how the built-in path lists appear in effective
// settings JSON.
var builtinPathsJSON = func() string {
	d, _ := json.Marshal(pathrule.BuiltinDeny)
	r, _ := json.Marshal(pathrule.BuiltinReadOnly)
	return `"deny_paths":` + string(d) + `,"read_only_paths":` + string(r)
}()

func TestPathSettingsMergeNeverRemoveADefault(t *testing.T) {
	t.Parallel()
	s := setup(t, `{"settings":{"deny_paths":["secrets","~/.ssh"],"read_only_paths":["config/prod.yaml"]}}`,
		`{"settings":{"deny_paths":["~/.vault-token"],"read_only_paths":[]}}`).EffectiveSettings()
	want := append(append([]string{}, pathrule.BuiltinDeny...), "secrets", "~/.vault-token")
	require.Equal(t, want, s.DenyPaths, "built-ins first, then fleet, then agent; ~/.ssh once")
	require.Equal(t, append(append([]string{}, pathrule.BuiltinReadOnly...), "config/prod.yaml"), s.ReadOnlyPaths,
		"an agent's empty list removes nothing")

	ov := setup(t, `{}`, `{"settings":{"deny_paths":["x"]}}`).Overrides()
	require.Len(t, ov, 1)
	require.Equal(t, "deny_paths", ov[0].Setting)
}

func TestPathSettingsValidated(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{`""`, `"~"`, `"/"`, `"../x"`, `"https://example.com/x"`, `"["`} {
		for _, field := range []string{"deny_paths", "read_only_paths"} {
			doc, err := ParseDocument([]byte(`{"rules":[],"settings":{"` + field + `":[` + bad + `]}}`))
			require.NoError(t, err)
			err = doc.Validate()
			var ve *ValidationError
			require.Truef(t, errors.As(err, &ve), "%s %s: %v", field, bad, err)
			require.Equal(t, "settings."+field, ve.Field)
		}
	}
}
