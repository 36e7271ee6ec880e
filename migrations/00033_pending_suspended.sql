-- +goose Up

-- A pending action is never stored for a suspended agent, whatever the
-- timing. The submit statement of a pending call (internal/store/actions.go)
-- locks the agent's agent_pending row before its guards, and reads there,
-- from the row as last committed, whether the agent is suspended and how
-- many pending actions it has; a suspension (or resume) sets this flag on
-- that row before it cancels the agent's actions. So a pending submit and a
-- suspension of one agent are one after the other: the submit that locked
-- first is committed before the suspension looks for what to cancel, and
-- the one that waited reads the flag and stores a denial. Before, a submit
-- that read the agent as active just before a suspension committed left a
-- pending action that a reviewer could approve while the agent was
-- suspended. (The flag on the token's row stays what other submits read:
-- an allowed call that races a suspension is ordered before it, and its
-- job is never leased while the agent is suspended.)
--
-- The count is read under the same lock: concurrent pending submits of one
-- agent no longer pass settings.max_pending by the few in flight (calls
-- merged into one statement still do not see each other's).
ALTER TABLE agent_pending ADD COLUMN suspended boolean NOT NULL DEFAULT false;
UPDATE agent_pending p SET suspended = true FROM agents a WHERE a.id = p.agent_id AND a.suspended_at IS NOT NULL;

-- +goose Down
ALTER TABLE agent_pending DROP COLUMN suspended;
