package httpapi_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

func loginToken(t *testing.T, env *apptest.Env) string {
	t.Helper()
	_, lr, err := env.Anon.Login(context.Background(), "admin", apptest.AdminPassword)
	require.NoError(t, err)
	return lr.Token
}

func agentTokenOf(t *testing.T, env *apptest.Env, agentID string) string {
	t.Helper()
	tok, err := env.Admin.IssueAgentToken(context.Background(), agentID, 0)
	require.NoError(t, err)
	return tok.Token
}

func clientReq(tool string) client.SubmitRequest {
	return client.SubmitRequest{Tool: tool, Args: map[string]any{}}
}

func client401(err error) int { return client.StatusOf(err) }
