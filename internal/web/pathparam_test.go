package web_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apptest"
)

// TestConsolePathParametersAreDecoded: the console reads its path
// parameters as the API does (httpapi.PathParam), decoded once.
func TestConsolePathParametersAreDecoded(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	require.NoError(t, env.Admin.CreateAgent(env.Ctx(), "target", "Target agent"))
	b := signIn(t, env, "admin", apptest.AdminPassword)

	resp, body := b.get("/ui/agents/t%61rget")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Contains(t, body, "Target agent")

	resp, _ = b.get("/ui/agents/t%2561rget")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "decoded once: no agent t%61rget")
}
