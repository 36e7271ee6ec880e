-- +goose Up

-- Batch decisions (issue 13): a reviewer's selection of pending actions of
-- one tool and one rule, approved with one phrase that names the count.
-- The batch itself changes no action: each is approved on its own through
-- the single approval path, with its own audit events. approved_at marks
-- the batch used, so a phrase is good once.
CREATE TABLE batches (
    id          uuid PRIMARY KEY,
    created_by  text NOT NULL,
    tool        text NOT NULL,
    action_ids  uuid[] NOT NULL CHECK (cardinality(action_ids) > 1),
    phrase      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    approved_at timestamptz
);
CREATE INDEX batches_created_by ON batches (created_by, created_at DESC);

-- When a reviewer first opened an action's console page: reviewer-fatigue
-- insights count approvals made within seconds of it. One row per action
-- and reviewer, written once (ON CONFLICT DO NOTHING).
CREATE TABLE action_views (
    action_id uuid NOT NULL REFERENCES actions (id),
    reviewer  text NOT NULL,
    opened_at timestamptz NOT NULL,
    PRIMARY KEY (action_id, reviewer)
);

-- +goose Down
DROP TABLE action_views;
DROP TABLE batches;
