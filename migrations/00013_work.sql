-- +goose Up

-- Worker tokens name the targets ("workspace:NAME", "repo:NAME") they may
-- serve: the lease statement reads them here, so a revocation or a new
-- token holds on every instance at once. NULL (other kinds, and worker
-- tokens issued before targets existed) serves nothing.
ALTER TABLE tokens ADD COLUMN targets text[];

-- A suspended agent's submits are denied and its work is stopped. Its
-- tokens carry the flag too (agent_suspended, kept in step by the
-- suspension and by issuing, under the agent row's lock), so that the
-- submit statement reads it from the token row it already reads.
ALTER TABLE agents ADD COLUMN suspended_at timestamptz;
ALTER TABLE tokens ADD COLUMN agent_suspended boolean NOT NULL DEFAULT false;

-- The token an action was submitted with: revoking it stops the action;
-- separation of duties compares its issuer with the approver.
-- No index of its own (the submit path pays for every index): a token
-- belongs to one agent, and stopping its actions reads that agent's
-- (actions_agent_created).
ALTER TABLE actions ADD COLUMN token_id text;

-- The token that holds a job's lease: only it may heartbeat or complete.
-- stop_reason is set when the job's action was cancelled while leased or
-- queued: the next heartbeat tells the worker to stop the run.
ALTER TABLE jobs ADD COLUMN token_id text;
ALTER TABLE jobs ADD COLUMN stop_reason text;

-- A worktree belongs to the agent whose worktree.create made it; every
-- other agent's call that names it is refused at submit as not found.
CREATE TABLE worktrees (
    name       text PRIMARY KEY,
    agent_id   text NOT NULL REFERENCES agents (id),
    action_id  uuid NOT NULL REFERENCES actions (id),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE worktrees;
ALTER TABLE jobs DROP COLUMN stop_reason;
ALTER TABLE jobs DROP COLUMN token_id;
ALTER TABLE actions DROP COLUMN token_id;
ALTER TABLE tokens DROP COLUMN agent_suspended;
ALTER TABLE agents DROP COLUMN suspended_at;
ALTER TABLE tokens DROP COLUMN targets;
