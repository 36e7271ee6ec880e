-- +goose Up

-- What the server's role may append to the chain and to its checkpoints
-- (README "Audit trail", "What holds against whom").
--
-- airlock_app inserts seals and checkpoints: the sealer runs as it. Before
-- this migration any row went in, and the sealer trusted what it read
-- back: a seal at the head carrying a watermark of 2^63-1 made it look
-- for unsealed events above that, so it never sealed again (while
-- verification, which walked the seals only, said ok); a checkpoint at
-- max(seq) + 1, or at a huge seq, made it refuse to seal, or to sign, for
-- good. Now each row must continue what is stored:
--
-- audit_seals: seq is the head's seq + 1 (1 for the first), prev_hash the
-- head's hash (32 zero bytes for the first), and a watermark is no higher
-- than the last id the events' sequence handed out. A batch's COPY
-- appends its seals one after another, each checked against the one
-- before (a row-level BEFORE trigger sees the rows its statement wrote
-- before it): one probe of the primary key's end per seal, and a read of
-- the sequence for the batch's last.
--
-- audit_checkpoints: the seal at seq exists and has the checkpoint's hash,
-- and seq is above every stored checkpoint's (two probes; the sealer
-- signs its head, which only grows). A checkpoint's signature cannot be
-- checked here (no Ed25519 in PostgreSQL): the sealer passes over one it
-- cannot verify, and verification reports it; in seq order, such a
-- checkpoint can only follow the newest, never sit in the chain's past.
--
-- The owner can still switch the triggers off; verification is what shows
-- what the owner did. The functions name their tables with the schema the
-- migration ran in: a session's temporary schema is searched before the
-- search path, so an unqualified audit_seals would be the caller's own
-- temporary table if it made one.
-- +goose StatementBegin
DO $migration$
BEGIN
    EXECUTE format($fn$
CREATE FUNCTION audit_seals_append() RETURNS trigger LANGUAGE plpgsql AS $body$
DECLARE
    head_seq  bigint;
    head_hash bytea;
    last_id   bigint;
BEGIN
    SELECT seq, hash INTO head_seq, head_hash FROM %1$I.audit_seals ORDER BY seq DESC LIMIT 1;
    IF NOT FOUND THEN
        head_seq := 0;
        head_hash := '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea;
    END IF;
    IF NEW.seq IS DISTINCT FROM head_seq + 1 THEN
        RAISE EXCEPTION 'audit_seals: seq %% does not follow the head of the chain (seq %%)', NEW.seq, head_seq
            USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.prev_hash IS DISTINCT FROM head_hash THEN
        RAISE EXCEPTION 'audit_seals: the prev_hash of seq %% is not the hash of seq %%', NEW.seq, head_seq
            USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.watermark IS NOT NULL THEN
        SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END INTO last_id FROM %1$I.audit_events_id_seq;
        IF NEW.watermark > last_id THEN
            RAISE EXCEPTION 'audit_seals: watermark %% is above the last event id handed out (%%)', NEW.watermark, last_id
                USING ERRCODE = 'check_violation';
        END IF;
    END IF;
    RETURN NEW;
END;
$body$
$fn$, current_schema());
    EXECUTE format($fn$
CREATE FUNCTION audit_checkpoints_append() RETURNS trigger LANGUAGE plpgsql AS $body$
DECLARE
    newest bigint;
BEGIN
    IF NOT EXISTS (SELECT FROM %1$I.audit_seals WHERE seq = NEW.seq AND hash = NEW.hash) THEN
        RAISE EXCEPTION 'audit_checkpoints: the chain holds no seal at seq %% with the checkpoint''s hash', NEW.seq
            USING ERRCODE = 'check_violation';
    END IF;
    SELECT seq INTO newest FROM %1$I.audit_checkpoints ORDER BY seq DESC LIMIT 1;
    IF NEW.seq <= newest THEN
        RAISE EXCEPTION 'audit_checkpoints: seq %% is not above the newest checkpoint''s (seq %%)', NEW.seq, newest
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$body$
$fn$, current_schema());
END
$migration$;
-- +goose StatementEnd
CREATE TRIGGER audit_seals_append BEFORE INSERT ON audit_seals FOR EACH ROW
    EXECUTE FUNCTION audit_seals_append();
CREATE TRIGGER audit_checkpoints_append BEFORE INSERT ON audit_checkpoints FOR EACH ROW
    EXECUTE FUNCTION audit_checkpoints_append();

-- +goose Down
DROP TRIGGER audit_checkpoints_append ON audit_checkpoints;
DROP TRIGGER audit_seals_append ON audit_seals;
DROP FUNCTION audit_checkpoints_append();
DROP FUNCTION audit_seals_append();
