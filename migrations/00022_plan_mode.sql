-- +goose Up

-- Plan mode (issue 12): while a row is here for the fleet ('fleet') or an
-- agent ('agent:<id>'), every call of that agent (of every agent, for the
-- fleet) that is not a read is denied at submit, before grants and
-- "always" rules. Only while on is there a row: the submit statement
-- looks it up by key in a table that is almost always empty, so the hot
-- path pays one probe of an empty index. Who turned it on, when and why
-- stay here; the history is in the audit log.
CREATE TABLE plan_modes (
    scope  text PRIMARY KEY,
    set_by text NOT NULL,
    set_at timestamptz NOT NULL DEFAULT now(),
    reason text NOT NULL DEFAULT ''
);

-- The fleet emergency stop: one row while it is on (who, when, why). The
-- agents it suspended carry suspended_by_fleet, so that the fleet resume
-- lifts exactly those, and an agent an admin suspended on its own stays
-- suspended.
CREATE TABLE fleet_stops (
    id         boolean PRIMARY KEY DEFAULT true CHECK (id),
    stopped_by text NOT NULL,
    stopped_at timestamptz NOT NULL DEFAULT now(),
    reason     text NOT NULL DEFAULT ''
);
ALTER TABLE agents ADD COLUMN suspended_by_fleet boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE agents DROP COLUMN suspended_by_fleet;
DROP TABLE fleet_stops;
DROP TABLE plan_modes;
