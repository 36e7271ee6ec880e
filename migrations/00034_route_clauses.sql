-- +goose Up

-- Several approve rules may hold one pending action, and each one's
-- reviewers apply: an approver must be in a group of every rule that names
-- reviewers. Each rule that names anything gets its own clause of the
-- action's route: step 0 of a clause is that rule's reviewers (and
-- targets), fired at submit, and its steps 1.. are that rule's escalation
-- steps, which widen that rule's reviewers only. rule_id names the rule.
-- A route stored before has one clause, 0, and rule_id '' (the action's
-- decision names its rule): it means what it meant.
ALTER TABLE action_routes
    ADD COLUMN clause integer NOT NULL DEFAULT 0 CHECK (clause >= 0),
    ADD COLUMN rule_id text NOT NULL DEFAULT '';
ALTER TABLE action_routes DROP CONSTRAINT action_routes_pkey;
ALTER TABLE action_routes ADD PRIMARY KEY (action_id, clause, step);

-- +goose Down
-- The old layout keeps one clause: the other rules' steps go (their
-- reviewers stop restricting pending actions, as before this migration).
DELETE FROM action_routes WHERE clause > 0;
ALTER TABLE action_routes DROP CONSTRAINT action_routes_pkey;
ALTER TABLE action_routes ADD PRIMARY KEY (action_id, step);
ALTER TABLE action_routes DROP COLUMN rule_id, DROP COLUMN clause;
