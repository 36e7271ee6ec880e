-- +goose Up

-- How many pending actions each agent has (issue 10: settings.max_pending).
-- Kept by triggers on actions, so that every path that makes an action
-- pending or moves it out of pending (submit, approve, deny, expire,
-- cancel, suspension) counts, and the submit statement reads one row
-- instead of counting. A submit checks the count it reads: concurrent
-- submits of one agent may pass the limit by the few that are in flight.
CREATE TABLE agent_pending (
    agent_id text PRIMARY KEY REFERENCES agents (id),
    pending  integer NOT NULL CHECK (pending >= 0)
);
INSERT INTO agent_pending (agent_id, pending)
    SELECT agent_id, count(*) FROM actions WHERE status = 'pending' GROUP BY agent_id;

-- +goose StatementBegin
CREATE FUNCTION actions_count_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO agent_pending (agent_id, pending) VALUES (NEW.agent_id, 1)
        ON CONFLICT (agent_id) DO UPDATE SET pending = agent_pending.pending + 1;
    ELSE
        UPDATE agent_pending SET pending = pending - 1 WHERE agent_id = OLD.agent_id;
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER actions_pending_enter AFTER INSERT ON actions FOR EACH ROW
    WHEN (NEW.status = 'pending') EXECUTE FUNCTION actions_count_pending();
CREATE TRIGGER actions_pending_leave AFTER UPDATE OF status ON actions FOR EACH ROW
    WHEN (OLD.status = 'pending' AND NEW.status <> 'pending') EXECUTE FUNCTION actions_count_pending();

-- +goose Down
DROP TRIGGER actions_pending_leave ON actions;
DROP TRIGGER actions_pending_enter ON actions;
DROP FUNCTION actions_count_pending();
DROP TABLE agent_pending;
