-- +goose Up

-- The foreign key from actions to agents goes; the submit statement
-- (internal/store/actions.go, the only place an action is inserted) checks
-- the agent instead. The key cost every submit a KEY SHARE lock on the
-- agent's row: a WAL record and, with submits of one agent in flight on
-- several connections, a multixact, all on the few pages that hold the
-- agents (issue 14: ~20 us of statement time per submit at 32 agents).
-- Agents are never deleted, so what the key guarded is only that the agent
-- exists when the action is written: the statement refuses a call whose
-- token is not the agent's own (a token is issued only to an agent that
-- exists), and, without a token, a call for an agent with no row. That
-- agents are never deleted is the database's rule now, not only the code's:
-- the server's role may not delete one.
ALTER TABLE actions DROP CONSTRAINT actions_agent_id_fkey;
REVOKE DELETE ON agents FROM airlock_app;

-- +goose Down
GRANT DELETE ON agents TO airlock_app;
ALTER TABLE actions ADD CONSTRAINT actions_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES agents (id);
