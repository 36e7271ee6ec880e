-- +goose Up

-- The MCP server registry (issue 11): every change to a registration is
-- its next version, written with its audit event in one transaction; a
-- deletion is a tombstone version (document NULL). The current
-- registration of a name is its highest version, when not a tombstone.
CREATE TABLE mcp_servers (
    name       text        NOT NULL CHECK (name ~ '^[a-z0-9-]{1,64}$'),
    version    integer     NOT NULL CHECK (version >= 1),
    document   jsonb,
    created_by text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, version)
);

-- +goose Down
DROP TABLE mcp_servers;
