-- +goose Up

-- Console and API users. Agents are not users: they authenticate with agent
-- tokens issued by an admin.
CREATE TABLE users (
    username      text PRIMARY KEY CHECK (username ~ '^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$'),
    password_hash text NOT NULL,
    roles         text[] NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE agents (
    id          text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    name        text NOT NULL,
    description text NOT NULL DEFAULT '',
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Every JWT Airlock issues is recorded here by its jti, so revocation and
-- logout take effect at once on every server instance.
CREATE TABLE tokens (
    id         text PRIMARY KEY,
    kind       text NOT NULL CHECK (kind IN ('agent', 'user', 'worker')),
    subject    text NOT NULL,
    issued_by  text NOT NULL,
    issued_at  timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE INDEX tokens_subject ON tokens (subject);

-- Versioned policies. scope is 'fleet' or 'agent:<id>'; the current policy of
-- a scope is its highest version. Versions are never updated or deleted.
CREATE TABLE policies (
    scope      text NOT NULL,
    version    integer NOT NULL CHECK (version > 0),
    document   jsonb NOT NULL,
    created_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, version)
);

CREATE TABLE actions (
    id                 uuid PRIMARY KEY,
    agent_id           text NOT NULL REFERENCES agents (id),
    agent_instance     text NOT NULL DEFAULT '',
    conversation_id    text NOT NULL DEFAULT '',
    step_id            text NOT NULL DEFAULT '',
    correlation_id     text NOT NULL,
    tool               text NOT NULL,
    args               jsonb NOT NULL,
    reason             text NOT NULL DEFAULT '',
    status             text NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'cancelled', 'running', 'succeeded', 'failed')),
    risk               jsonb NOT NULL,
    decision           jsonb NOT NULL,
    approvals          jsonb NOT NULL DEFAULT '[]',
    required_approvals integer NOT NULL DEFAULT 1,
    phrase             text,
    expires_at         timestamptz,
    result             jsonb,
    preview            jsonb,
    idempotency_key    text,
    request_hash       bytea,
    version            integer NOT NULL DEFAULT 1,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);
-- Only submits that carry a key pay for this index.
CREATE UNIQUE INDEX actions_idempotency ON actions (agent_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX actions_pending_expiry ON actions (expires_at) WHERE status = 'pending';
CREATE INDEX actions_status_created ON actions (status, created_at DESC, id DESC);
CREATE INDEX actions_agent_created ON actions (agent_id, created_at DESC, id DESC);
CREATE INDEX actions_created ON actions (created_at DESC, id DESC);
-- A confirmation phrase identifies one pending action: a phrase typed for
-- another action can never match.
CREATE UNIQUE INDEX actions_pending_phrase ON actions (phrase) WHERE status = 'pending';

-- Conversation-scoped approvals: the same agent may call the same tool in the
-- same conversation without asking again until expires_at.
CREATE TABLE grants (
    agent_id        text NOT NULL REFERENCES agents (id),
    tool            text NOT NULL,
    conversation_id text NOT NULL CHECK (conversation_id <> ''),
    action_id       uuid NOT NULL REFERENCES actions (id),
    granted_by      text NOT NULL,
    expires_at      timestamptz NOT NULL,
    PRIMARY KEY (agent_id, tool, conversation_id)
);

-- The audit trail. Rows are only ever inserted; the trigger below refuses
-- UPDATE and DELETE. seq/prev_hash/hash are reserved for sealing the trail
-- into a hash chain (filled once by the sealer, never by writers).
CREATE TABLE audit_events (
    id              bigserial PRIMARY KEY,
    at              timestamptz NOT NULL DEFAULT clock_timestamp(),
    kind            text NOT NULL,
    actor           text NOT NULL,
    agent_id        text NOT NULL DEFAULT '',
    agent_instance  text NOT NULL DEFAULT '',
    conversation_id text NOT NULL DEFAULT '',
    step_id         text NOT NULL DEFAULT '',
    correlation_id  text NOT NULL DEFAULT '',
    action_id       uuid,
    tool            text NOT NULL DEFAULT '',
    args            jsonb,
    risk            jsonb,
    decision        jsonb,
    data            jsonb,
    seq             bigint,
    prev_hash       bytea,
    hash            bytea
);
CREATE INDEX audit_correlation ON audit_events (correlation_id, id) WHERE correlation_id <> '';
CREATE INDEX audit_agent_at ON audit_events (agent_id, at, id) WHERE agent_id <> '';
CREATE INDEX audit_conversation ON audit_events (conversation_id, id) WHERE conversation_id <> '';
CREATE INDEX audit_action ON audit_events (action_id, id) WHERE action_id IS NOT NULL;
CREATE INDEX audit_at ON audit_events (at, id);
-- Unsealed rows (seq NULL) cost nothing here.
CREATE UNIQUE INDEX audit_seq ON audit_events (seq) WHERE seq IS NOT NULL;

-- +goose StatementBegin
CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_events is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_events_no_update BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();

-- +goose Down
DROP TABLE audit_events;
DROP FUNCTION audit_events_append_only();
DROP TABLE grants;
DROP TABLE actions;
DROP TABLE policies;
DROP TABLE tokens;
DROP TABLE agents;
DROP TABLE users;
