-- +goose Up

-- Seal format 2 (issue 14, internal/audit/canonical.go FormatV2): the
-- sealer no longer reads each event's content back.
--
-- A writer knows an event's content, not yet its id and time (the database
-- hands those out as the row is inserted), so it stores with the event a
-- digest of the content: SHA-256 of its content encoding. A format-2 seal's
-- hash is SHA-256(prev_hash || the link encoding of (id, at, digest)): the
-- sealer reads (id, at, digest) of each event, 56 bytes instead of ~600,
-- and canonicalizes no JSON. Verification recomputes the digest from the
-- content, so a wrong stored digest is a hash mismatch, never a pass.
--
-- digest is NULL for the events written before this migration and for those
-- the database composes itself (an expiry, a cancellation, an escalation):
-- the sealer reads those whole and works the digest out. A catalog change:
-- no event row is rewritten (the partitions follow their parent).
ALTER TABLE audit_events ADD COLUMN digest bytea CHECK (digest IS NULL OR octet_length(digest) = 32);
GRANT INSERT (digest) ON audit_events TO airlock_app;

-- Each seal says how its hash was computed. The seals there are are
-- format 1 (the default fills them in without a rewrite); the sealer writes
-- format 2 from now on. A seal whose format was changed no longer verifies:
-- the format's tag is inside what is hashed.
ALTER TABLE audit_seals ADD COLUMN format smallint NOT NULL DEFAULT 1 CHECK (format IN (1, 2));

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT FROM audit_seals WHERE format <> 1) THEN
        RAISE EXCEPTION 'audit_seals holds format-2 seals, which the code before migration 00030 cannot verify';
    END IF;
END
$$;
-- +goose StatementEnd
ALTER TABLE audit_seals DROP COLUMN format;
REVOKE INSERT (digest) ON audit_events FROM airlock_app;
ALTER TABLE audit_events DROP COLUMN digest;
