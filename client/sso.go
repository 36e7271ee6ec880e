package client

import (
	"context"
	"net/http"
)

// SSOConfig is the server's single sign-on (GET /api/v1/auth/sso).
type SSOConfig struct {
	// Issuer is the OpenID Connect provider's issuer URL.
	Issuer string `json:"issuer"`
	// LoginURL is the console path that starts a sign-in.
	LoginURL string `json:"login_url"`
}

// SSO says whether the server offers single sign-on (a not_found error
// when it does not).
func (c *Client) SSO(ctx context.Context) (*SSOConfig, error) {
	var out SSOConfig
	if _, err := c.WithToken("").Do(ctx, http.MethodGet, "/api/v1/auth/sso", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SSOToken exchanges a CLI single sign-on's one-time code and PKCE
// verifier for a session, returning a client holding it.
func (c *Client) SSOToken(ctx context.Context, code, verifier string) (*Client, *LoginResponse, error) {
	var lr LoginResponse
	body := map[string]string{"code": code, "code_verifier": verifier}
	if _, err := c.WithToken("").Do(ctx, http.MethodPost, "/api/v1/auth/sso/token", body, &lr); err != nil {
		return nil, nil, err
	}
	return c.WithToken(lr.Token), &lr, nil
}
