-- +goose Up

-- How many pending actions each agent has (issue 10: settings.max_pending).
-- The submit statement (internal/store/actions.go, the only place an
-- action is inserted) adds one for a pending action; a trigger takes one
-- off for every way out of pending (approve, deny, expire, cancel,
-- suspension), so no path can forget it. The submit reads one row instead
-- of counting; it checks the count it reads, so concurrent submits of one
-- agent may pass the limit by the few that are in flight. (An insert
-- trigger cost every submit, pending or not, ~30 us of statement time.)
CREATE TABLE agent_pending (
    agent_id text PRIMARY KEY REFERENCES agents (id),
    pending  integer NOT NULL CHECK (pending >= 0)
);
INSERT INTO agent_pending (agent_id, pending)
    SELECT a.id, (SELECT count(*) FROM actions x WHERE x.agent_id = a.id AND x.status = 'pending') FROM agents a;

-- Every agent has its row from the start, so that the submit statement
-- adds one with a plain UPDATE (cheaper than an upsert on every pending
-- submit).
-- +goose StatementBegin
CREATE FUNCTION agents_pending_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO agent_pending (agent_id, pending) VALUES (NEW.id, 0) ON CONFLICT (agent_id) DO NOTHING;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER agents_pending_row AFTER INSERT ON agents FOR EACH ROW EXECUTE FUNCTION agents_pending_row();

-- +goose StatementBegin
CREATE FUNCTION actions_count_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Never below zero: an action inserted by hand (not through the submit
    -- statement) was never counted.
    UPDATE agent_pending SET pending = greatest(pending - 1, 0) WHERE agent_id = OLD.agent_id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER actions_pending_leave AFTER UPDATE OF status ON actions FOR EACH ROW
    WHEN (OLD.status = 'pending' AND NEW.status <> 'pending') EXECUTE FUNCTION actions_count_pending();

-- +goose Down
DROP TRIGGER agents_pending_row ON agents;
DROP FUNCTION agents_pending_row();
DROP TRIGGER actions_pending_leave ON actions;
DROP FUNCTION actions_count_pending();
DROP TABLE agent_pending;
