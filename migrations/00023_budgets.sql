-- +goose Up

-- Budgets and rates (issue 12, VIMS "agent wallets"). Every action stored
-- for a call that a budget matched gets one row per budget here, with the
-- call's exact amount. What a budget has spent is the sum over the rows in
-- its window whose action is approved, running or succeeded: a denial, an
-- expiry, a cancellation, a failure or a call still pending never counts,
-- and a pending call counts from the moment a reviewer approves it.
CREATE TABLE budget_spends (
    action_id  uuid NOT NULL,
    agent_id   text NOT NULL,
    budget_id  text NOT NULL,
    amount     numeric NOT NULL CHECK (amount >= 0),
    created_at timestamptz NOT NULL,
    PRIMARY KEY (action_id, budget_id)
);
CREATE INDEX budget_spends_window ON budget_spends (agent_id, budget_id, created_at);

-- airlock_admit is what the submit statement of a call under a budget or
-- a rate asks: it locks the agent's agent_pending row (the row every
-- pending submit of the agent updates anyway, so no new lock order and no
-- deadlock), and only then reads, each query with a snapshot of its own
-- (a VOLATILE function's queries see what committed before they began,
-- unlike the calling statement's snapshot, taken before the lock was
-- granted). So two concurrent submits of one agent are decided one after
-- the other, each seeing what the other stored: they can never both fit
-- under what is left. It returns, as text (numbers kept exact):
--   [1] the agent's actions created in the minute before p_now, counting
--       at most p_rate of them (0 when p_rate is 0);
--   [2] the epoch of the oldest of those counted ('' when none): the
--       window has room again one minute after it;
--   [3..] for each budget in p_ids, what it spent in its window.
-- +goose StatementBegin
CREATE FUNCTION airlock_admit(p_agent text, p_now timestamptz, p_rate integer, p_ids text[], p_windows bigint[])
RETURNS text[] LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    result text[];
    n      bigint := 0;
    oldest timestamptz;
    spent  numeric;
BEGIN
    PERFORM 1 FROM agent_pending WHERE agent_id = p_agent FOR UPDATE;
    IF p_rate > 0 THEN
        SELECT count(*), min(created_at) INTO n, oldest FROM (
            SELECT created_at FROM actions
            WHERE agent_id = p_agent AND created_at > p_now - interval '1 minute'
            ORDER BY created_at DESC LIMIT p_rate) recent;
    END IF;
    result := ARRAY[n::text, coalesce(extract(epoch FROM oldest)::text, '')];
    FOR i IN 1 .. coalesce(array_length(p_ids, 1), 0) LOOP
        SELECT coalesce(sum(s.amount), 0) INTO spent
        FROM budget_spends s JOIN actions a ON a.id = s.action_id
        WHERE s.agent_id = p_agent AND s.budget_id = p_ids[i]
            AND s.created_at > p_now - p_windows[i] * interval '1 microsecond'
            AND a.status IN ('approved', 'running', 'succeeded');
        result := result || spent::text;
    END LOOP;
    RETURN result;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION airlock_admit(text, timestamptz, integer, text[], bigint[]);
DROP TABLE budget_spends;
