-- +goose Up

-- A budget counts the calls that failed too. An agent that runs a call
-- itself reports how it went (POST /api/v1/actions/{id}/result), and a
-- budget caps that agent: with failures left out, it could pay, report
-- "failed", and have its budget back, over and over. A sandboxed run that
-- failed may have spent as well (a command that paid, then exited 1). So
-- what a budget has spent is now the sum over its window's approved,
-- running, succeeded and failed calls; a denial, an expiry, a cancellation
-- or a call still pending never counts. (budgetSpentSQL, in the store,
-- reads the same.)
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION airlock_admit(p_agent text, p_now timestamptz, p_rate integer, p_ids text[], p_windows bigint[])
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
            AND a.status IN ('approved', 'running', 'succeeded', 'failed');
        result := result || spent::text;
    END LOOP;
    RETURN result;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION airlock_admit(p_agent text, p_now timestamptz, p_rate integer, p_ids text[], p_windows bigint[])
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
