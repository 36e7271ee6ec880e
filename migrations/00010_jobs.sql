-- +goose Up

-- Work for worker hosts: one job per approved built-in action (exec,
-- worktree.*), plus a worktree.preview job for a pending merge (the commit
-- and diff the reviewer must see). A job is queued, leased by one worker at
-- a time, then done. fence grows with every lease; heartbeats and
-- completions must present the current one, so a worker whose lease
-- expired can record nothing.
CREATE TABLE jobs (
    id               uuid PRIMARY KEY,
    action_id        uuid NOT NULL REFERENCES actions (id),
    kind             text NOT NULL,
    target           text NOT NULL,
    -- pin is the commit a reviewer approved, for a merge: nothing else may
    -- be merged.
    pin              text NOT NULL DEFAULT '',
    state            text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'leased', 'done')),
    attempts         integer NOT NULL DEFAULT 0,
    max_attempts     integer NOT NULL DEFAULT 1 CHECK (max_attempts BETWEEN 1 AND 10),
    fence            bigint NOT NULL DEFAULT 0,
    worker           text,
    lease_expires_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (action_id, kind)
);
CREATE INDEX jobs_queued ON jobs (created_at) WHERE state = 'queued';
CREATE INDEX jobs_lease_expiry ON jobs (lease_expires_at) WHERE state = 'leased';

-- +goose Down
DROP TABLE jobs;
