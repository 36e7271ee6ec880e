-- +goose Up

-- Wrong confirmation phrases, per action and reviewer (issue 10): after
-- hitl.MaxWrongPhrases of them a reviewer's approvals of that action are
-- refused until the cooling-off period after the last one has passed.
-- Every wrong phrase is also an audit event (action.phrase_refused).
CREATE TABLE phrase_failures (
    action_id uuid NOT NULL REFERENCES actions (id),
    reviewer  text NOT NULL,
    failures  integer NOT NULL CHECK (failures > 0),
    last_at   timestamptz NOT NULL,
    PRIMARY KEY (action_id, reviewer)
);

-- +goose Down
DROP TABLE phrase_failures;
