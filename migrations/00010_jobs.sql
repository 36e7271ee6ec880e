-- +goose Up

-- Work for worker hosts: one job per approved built-in action (exec,
-- worktree.*). A job is queued, leased by one worker at a time, then done.
-- fence grows with every lease; heartbeats and completions must present the
-- current fence, so a worker whose lease expired can record nothing.
CREATE TABLE jobs (
    action_id        uuid PRIMARY KEY REFERENCES actions (id),
    kind             text NOT NULL,
    target           text NOT NULL,
    state            text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'leased', 'done')),
    attempts         integer NOT NULL DEFAULT 0,
    max_attempts     integer NOT NULL DEFAULT 1 CHECK (max_attempts BETWEEN 1 AND 10),
    fence            bigint NOT NULL DEFAULT 0,
    worker           text,
    lease_expires_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX jobs_queued ON jobs (created_at) WHERE state = 'queued';
CREATE INDEX jobs_lease_expiry ON jobs (lease_expires_at) WHERE state = 'leased';

-- +goose Down
DROP TABLE jobs;
