-- +goose Up

-- Single sign-on (issue 13): a person signing in through the OpenID
-- Connect provider is the user linked to the provider's (issuer, subject),
-- never a user found by name: a local user named like the provider's
-- preferred_username is someone else. The link is made on the first
-- sign-in, with the user it creates; the user row itself is an ordinary
-- user (roles, disabled, tombstone), whose roles every sign-in sets from
-- the provider's groups.
CREATE TABLE sso_links (
    issuer        text NOT NULL,
    subject       text NOT NULL,
    username      text NOT NULL UNIQUE REFERENCES users (username),
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_login_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (issuer, subject)
);

-- The CLI's single sign-on ends at its loopback address with a one-time
-- code, which the CLI exchanges (with its PKCE verifier) for a session
-- token. Only the code's SHA-256 is kept; a code is deleted when used and
-- worthless after expires_at.
CREATE TABLE sso_cli_codes (
    code_hash      text PRIMARY KEY CHECK (code_hash ~ '^[0-9a-f]{64}$'),
    username       text NOT NULL REFERENCES users (username),
    code_challenge text NOT NULL,
    expires_at     timestamptz NOT NULL
);

-- +goose Down
DROP TABLE sso_cli_codes;
DROP TABLE sso_links;
