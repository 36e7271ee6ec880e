-- +goose Up

-- Lifecycle commands (issue 12): a repository's command set
-- (.airlock/commands.yaml, identified by the SHA-256 of its bytes) that a
-- reviewer approved. A worktree.run of that repository whose file has this
-- hash runs without asking again; any other content is another command set
-- and asks again. Written in the transaction of the approval that decided
-- it, with its commands.approved audit event.
CREATE TABLE command_set_approvals (
    repo        text NOT NULL,
    hash        text NOT NULL CHECK (hash ~ '^[0-9a-f]{64}$'),
    content     text NOT NULL,
    approved_by text NOT NULL,
    action_id   uuid NOT NULL,
    approved_at timestamptz NOT NULL,
    PRIMARY KEY (repo, hash)
);

-- +goose Down
DROP TABLE command_set_approvals;
