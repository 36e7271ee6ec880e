-- +goose Up

-- People have a lifecycle: an admin disables (every session and token stops
-- at once), re-enables or deletes them. A deleted user stays as a tombstone
-- (no password, no roles) so that its name, which the audit trail and
-- decisions carry, can never be taken by someone else.
ALTER TABLE users
    ADD COLUMN disabled   boolean NOT NULL DEFAULT false,
    ADD COLUMN deleted_at timestamptz;

-- Usernames are unique without regard to case: "Admin" beside "admin" would
-- read as the same person in every decision and audit line.
-- +goose StatementBegin
DO $$
DECLARE
    dup text;
BEGIN
    SELECT string_agg(username, ', ' ORDER BY username) INTO dup
    FROM users WHERE lower(username) IN (SELECT lower(username) FROM users GROUP BY 1 HAVING count(*) > 1);
    IF dup IS NOT NULL THEN
        RAISE EXCEPTION 'users % differ only in case; keep one of each before upgrading', dup;
    END IF;
END;
$$;
-- +goose StatementEnd
CREATE UNIQUE INDEX users_username_lower ON users (lower(username));

-- An agent's owner is the person answerable for it (separation of duties
-- keeps them from approving its requests). Agents registered before owners
-- existed are owned by whoever registered them, when that is a user.
ALTER TABLE agents ADD COLUMN owner text REFERENCES users (username);
UPDATE agents a SET owner = a.created_by WHERE EXISTS (SELECT FROM users u WHERE u.username = a.created_by);

-- +goose Down
ALTER TABLE agents DROP COLUMN owner;
DROP INDEX users_username_lower;
ALTER TABLE users DROP COLUMN deleted_at, DROP COLUMN disabled;
