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

-- The audit trail (README "Audit trail").
--
-- Writers only INSERT, with the seal columns NULL. One sealer at a time (an
-- advisory lock, whichever server instance gets it) later gives each row its
-- place in a hash chain: seq (1, 2, 3, ... in sealing order), prev_hash (the
-- hash of seq - 1; 32 zero bytes for seq 1) and hash = SHA-256(prev_hash ||
-- the canonical encoding of every other column; internal/audit/canonical.go).
-- The triggers refuse every UPDATE but that one sealing UPDATE (seal columns
-- from NULL to set, nothing else changed), and every DELETE and TRUNCATE.
-- The server runs as the role airlock_app (below), which may insert rows and
-- fill in the seal columns but change nothing else, and owns nothing: it can
-- neither disable the triggers nor detach partitions. Table owners and
-- superusers can; verification (the chain and the signed checkpoints) is what
-- exposes them.
--
-- Monthly range partitions on `at` (audit_events_YYYY_MM, made ahead of time
-- by audit_ensure_partitions) keep each month's indexes and vacuum apart and
-- let an old month be detached and archived whole.
--
-- Every lookup index ends in id, the order pages are served in (the cursor
-- is the last id), so a page is one index range scan per partition.

-- The role the server runs as. Migrations that add tables need no GRANT: the
-- default privileges at the end of this file give airlock_app DML on them.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'airlock_app') THEN
        BEGIN
            CREATE ROLE airlock_app NOLOGIN;
        EXCEPTION
            WHEN duplicate_object OR unique_violation THEN NULL; -- a concurrent migration made it
            WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'the role airlock_app does not exist and % may not create it', current_user
                    USING HINT = 'CREATE ROLE airlock_app NOLOGIN; GRANT airlock_app TO <the role Airlock connects as>; or migrate as a role with CREATEROLE';
        END;
    END IF;
    IF NOT pg_has_role(current_user, 'airlock_app', 'MEMBER') THEN
        EXECUTE format('GRANT airlock_app TO %I', current_user);
    END IF;
END;
$$;
-- +goose StatementEnd

CREATE TABLE audit_events (
    id              bigserial NOT NULL,
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
    seq             bigint CHECK (seq > 0),
    prev_hash       bytea CHECK (octet_length(prev_hash) = 32),
    hash            bytea CHECK (octet_length(hash) = 32),
    CONSTRAINT audit_events_sealed_whole CHECK ((seq IS NULL) = (prev_hash IS NULL) AND (seq IS NULL) = (hash IS NULL)),
    PRIMARY KEY (id, at)
) PARTITION BY RANGE (at);
CREATE INDEX audit_correlation ON audit_events (correlation_id, id) WHERE correlation_id <> '';
-- at is a key column so that a time range is checked inside the index.
CREATE INDEX audit_agent ON audit_events (agent_id, id, at) WHERE agent_id <> '';
CREATE INDEX audit_conversation ON audit_events (conversation_id, id) WHERE conversation_id <> '';
CREATE INDEX audit_action ON audit_events (action_id, id) WHERE action_id IS NOT NULL;
-- The chain in seal order: verification and the sealer's head.
CREATE INDEX audit_seq ON audit_events (seq) WHERE seq IS NOT NULL;
-- The sealer's work: the few rows committed since its last batch.
CREATE INDEX audit_unsealed ON audit_events (id) WHERE seq IS NULL;

-- +goose StatementBegin
CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%: % refused', TG_ARGV[0], TG_OP USING ERRCODE = 'insufficient_privilege';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_events_insert BEFORE INSERT ON audit_events FOR EACH ROW
    WHEN (NEW.seq IS NOT NULL OR NEW.prev_hash IS NOT NULL OR NEW.hash IS NOT NULL)
    EXECUTE FUNCTION audit_append_only('audit_events rows are sealed by the sealer only');
CREATE TRIGGER audit_events_update BEFORE UPDATE ON audit_events FOR EACH ROW
    WHEN (NOT (OLD.seq IS NULL AND OLD.prev_hash IS NULL AND OLD.hash IS NULL
               AND NEW.seq IS NOT NULL AND NEW.prev_hash IS NOT NULL AND NEW.hash IS NOT NULL
               AND (NEW.id, NEW.at, NEW.kind, NEW.actor, NEW.agent_id, NEW.agent_instance, NEW.conversation_id,
                    NEW.step_id, NEW.correlation_id, NEW.action_id, NEW.tool, NEW.args, NEW.risk, NEW.decision, NEW.data)
                   IS NOT DISTINCT FROM
                   (OLD.id, OLD.at, OLD.kind, OLD.actor, OLD.agent_id, OLD.agent_instance, OLD.conversation_id,
                    OLD.step_id, OLD.correlation_id, OLD.action_id, OLD.tool, OLD.args, OLD.risk, OLD.decision, OLD.data)))
    EXECUTE FUNCTION audit_append_only('audit_events is append-only');
CREATE TRIGGER audit_events_delete BEFORE DELETE ON audit_events FOR EACH ROW
    EXECUTE FUNCTION audit_append_only('audit_events is append-only');
-- Statement triggers are not inherited: audit_ensure_partitions adds this one
-- to every partition too.
CREATE TRIGGER audit_events_truncate BEFORE TRUNCATE ON audit_events FOR EACH STATEMENT
    EXECUTE FUNCTION audit_append_only('audit_events is append-only');

-- Signed checkpoints: the sealer signs (Ed25519, the key in the data dir)
-- the chain's head every few seconds. A copy kept elsewhere exposes a
-- truncated or consistently rewritten chain (README "Audit trail").
CREATE TABLE audit_checkpoints (
    seq        bigint PRIMARY KEY CHECK (seq > 0),
    hash       bytea NOT NULL CHECK (octet_length(hash) = 32),
    at         timestamptz NOT NULL,
    public_key bytea NOT NULL CHECK (octet_length(public_key) = 32),
    signature  bytea NOT NULL CHECK (octet_length(signature) = 64)
);
CREATE TRIGGER audit_checkpoints_update BEFORE UPDATE OR DELETE ON audit_checkpoints FOR EACH ROW
    EXECUTE FUNCTION audit_append_only('audit_checkpoints is append-only');
CREATE TRIGGER audit_checkpoints_truncate BEFORE TRUNCATE ON audit_checkpoints FOR EACH STATEMENT
    EXECUTE FUNCTION audit_append_only('audit_checkpoints is append-only');

-- audit_ensure_partitions creates the monthly partitions (UTC months) that
-- cover [from_at, to_at] and do not exist yet, and returns how many it made.
-- The server calls it at start and hourly for the months ahead; it runs as
-- the tables' owner (SECURITY DEFINER) so that airlock_app needs to own
-- nothing. It only ever creates.
-- +goose StatementBegin
CREATE FUNCTION audit_ensure_partitions(from_at timestamptz, to_at timestamptz) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    m       date := date_trunc('month', from_at AT TIME ZONE 'UTC')::date;
    last    date := date_trunc('month', to_at AT TIME ZONE 'UTC')::date;
    part    text;
    created integer := 0;
BEGIN
    IF to_at > now() + interval '1 year' OR last - m > 3700 THEN
        RAISE EXCEPTION 'audit_ensure_partitions: % to % is too far', from_at, to_at;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('audit_ensure_partitions'));
    WHILE m <= last LOOP
        part := 'audit_events_' || to_char(m, 'YYYY_MM');
        IF to_regclass(part) IS NULL THEN
            EXECUTE format('CREATE TABLE %I PARTITION OF audit_events FOR VALUES FROM (%L) TO (%L)',
                part, m::text || ' 00:00:00+00', (m + interval '1 month')::date::text || ' 00:00:00+00');
            EXECUTE format('CREATE TRIGGER audit_events_truncate BEFORE TRUNCATE ON %I FOR EACH STATEMENT '
                'EXECUTE FUNCTION audit_append_only(%L)', part, 'audit_events is append-only');
            -- Reached through audit_events only (the default privileges below
            -- would otherwise grant DML on the partition itself).
            EXECUTE format('REVOKE ALL ON %I FROM airlock_app', part);
            created := created + 1;
        END IF;
        m := (m + interval '1 month')::date;
    END LOOP;
    RETURN created;
END;
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION audit_ensure_partitions(timestamptz, timestamptz) FROM PUBLIC;

GRANT SELECT, INSERT, UPDATE, DELETE ON users, agents, tokens, policies, actions, grants TO airlock_app;
-- Writers name the event columns only: id and at come from the database, the
-- seal columns from the sealer.
GRANT SELECT,
      INSERT (kind, actor, agent_id, agent_instance, conversation_id, step_id, correlation_id, action_id, tool,
              args, risk, decision, data),
      UPDATE (seq, prev_hash, hash)
    ON audit_events TO airlock_app;
GRANT USAGE ON SEQUENCE audit_events_id_seq TO airlock_app;
GRANT SELECT, INSERT ON audit_checkpoints TO airlock_app;
GRANT EXECUTE ON FUNCTION audit_ensure_partitions(timestamptz, timestamptz) TO airlock_app;
-- A server logging in as a member of airlock_app (not the owner) checks at
-- start that there is no migration left to apply.
GRANT SELECT ON goose_db_version TO airlock_app;
ALTER DEFAULT PRIVILEGES GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO airlock_app;
ALTER DEFAULT PRIVILEGES GRANT USAGE, SELECT ON SEQUENCES TO airlock_app;

SELECT audit_ensure_partitions(now() - interval '1 month', now() + interval '2 months');

-- +goose Down
ALTER DEFAULT PRIVILEGES REVOKE ALL ON SEQUENCES FROM airlock_app;
ALTER DEFAULT PRIVILEGES REVOKE ALL ON TABLES FROM airlock_app;
REVOKE ALL ON users, agents, tokens, policies, actions, grants FROM airlock_app;
DROP FUNCTION audit_ensure_partitions(timestamptz, timestamptz);
DROP TABLE audit_checkpoints;
DROP TABLE audit_events;
DROP FUNCTION audit_append_only();
DROP TABLE grants;
DROP TABLE actions;
DROP TABLE policies;
DROP TABLE tokens;
DROP TABLE agents;
DROP TABLE users;
