-- +goose Up

-- A conversation grant covers later calls that the same rule of the same
-- policy version sends to review (issue 9): the key grows the rule, its
-- policy (agent or fleet) and that policy's version. Grants get an id so
-- that reviewers can list and revoke them; a revoked grant stays, for the
-- record, with who revoked it.
--
-- Grants made before this migration are tied to no rule and reached past
-- what was approved: they are revoked here (fail closed), not converted.
ALTER TABLE grants DROP CONSTRAINT grants_pkey;
ALTER TABLE grants
    ADD COLUMN id             uuid NOT NULL DEFAULT gen_random_uuid(),
    ADD COLUMN source         text NOT NULL DEFAULT '',
    ADD COLUMN rule_id        text NOT NULL DEFAULT '',
    ADD COLUMN policy_version integer NOT NULL DEFAULT 0,
    ADD COLUMN created_at     timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN revoked_at     timestamptz,
    ADD COLUMN revoked_by     text NOT NULL DEFAULT '';
ALTER TABLE grants ADD PRIMARY KEY (id);
UPDATE grants SET revoked_at = now(), revoked_by = 'migration' WHERE revoked_at IS NULL;
-- One active grant per key: approving again for the same key extends it.
CREATE UNIQUE INDEX grants_active_key ON grants (agent_id, tool, conversation_id, source, rule_id, policy_version)
    WHERE revoked_at IS NULL;
CREATE INDEX grants_agent ON grants (agent_id, created_at DESC);

-- +goose Down
DROP INDEX grants_agent;
DROP INDEX grants_active_key;
DELETE FROM grants WHERE revoked_at IS NOT NULL;
ALTER TABLE grants DROP CONSTRAINT grants_pkey;
ALTER TABLE grants DROP COLUMN id, DROP COLUMN source, DROP COLUMN rule_id, DROP COLUMN policy_version,
    DROP COLUMN created_at, DROP COLUMN revoked_at, DROP COLUMN revoked_by;
ALTER TABLE grants ADD PRIMARY KEY (agent_id, tool, conversation_id);
