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
-- audit_seals: each seal a statement writes, in the order it writes them,
-- has the seq after the one before (the chain's head before the statement,
-- for the first; 1 for the very first) and that one's hash as prev_hash
-- (32 zero bytes for seq 1), and no watermark is higher than the last id
-- the events' sequence handed out. The check runs once per statement,
-- after it, over the rows it wrote (a transition table, which COPY fills
-- too): two probes of the primary key, a read of the sequence, and one
-- pass over the rows, no sort. A row-level BEFORE trigger would check the
-- same row by row, but it makes COPY insert one row at a time and calls
-- PL/pgSQL for each: a backlog sealed at 32k events/s instead of 50k
-- (issue 14's sealer, 2026-12-07); this costs ~0.5-0.75 us a seal.
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
    first_seq   bigint;
    last_seq    bigint;
    n           bigint;
    top         bigint;
    before_hash bytea;
    bad         record;
    last_id     bigint;
    max_mark    bigint;
BEGIN
    SELECT min(seq), max(seq), count(*), max(watermark) INTO first_seq, last_seq, n, max_mark FROM new_seals;
    IF n = 0 THEN
        RETURN NULL;
    END IF;
    -- The statement's seals, in the order it wrote them, each follow the one
    -- before (the head before it, for the first): seq + 1, and its hash as
    -- prev_hash. The run ends at the chain's head.
    SELECT seq INTO top FROM %1$I.audit_seals ORDER BY seq DESC LIMIT 1;
    IF first_seq = 1 THEN
        before_hash := '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea;
    ELSE
        SELECT hash INTO before_hash FROM %1$I.audit_seals WHERE seq = first_seq - 1;
    END IF;
    IF last_seq - first_seq + 1 <> n OR top <> last_seq OR before_hash IS NULL THEN
        SELECT coalesce(max(seq), 0) INTO top FROM %1$I.audit_seals WHERE seq < first_seq;
        RAISE EXCEPTION 'audit_seals: seq %% does not follow the head of the chain (seq %%)', first_seq, top
            USING ERRCODE = 'check_violation';
    END IF;
    -- One pass over the rows as written, no sort.
    SELECT seq, first_seq + rn - 1 AS want INTO bad
        FROM (SELECT seq, prev_hash, row_number() OVER () AS rn, lag(hash) OVER () AS before FROM new_seals) w
        WHERE seq <> first_seq + rn - 1 OR prev_hash IS DISTINCT FROM coalesce(before, before_hash)
        LIMIT 1;
    IF FOUND AND bad.seq <> bad.want THEN
        RAISE EXCEPTION 'audit_seals: seq %% does not follow seq %%', bad.seq, bad.want - 1
            USING ERRCODE = 'check_violation';
    ELSIF FOUND THEN
        RAISE EXCEPTION 'audit_seals: the prev_hash of seq %% is not the hash of seq %%', bad.seq, bad.seq - 1
            USING ERRCODE = 'check_violation';
    END IF;
    IF max_mark IS NOT NULL THEN
        SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END INTO last_id FROM %1$I.audit_events_id_seq;
        IF max_mark > last_id THEN
            RAISE EXCEPTION 'audit_seals: watermark %% is above the last event id handed out (%%)', max_mark, last_id
                USING ERRCODE = 'check_violation';
        END IF;
    END IF;
    RETURN NULL;
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
CREATE TRIGGER audit_seals_append AFTER INSERT ON audit_seals REFERENCING NEW TABLE AS new_seals
    FOR EACH STATEMENT EXECUTE FUNCTION audit_seals_append();
CREATE TRIGGER audit_checkpoints_append BEFORE INSERT ON audit_checkpoints FOR EACH ROW
    EXECUTE FUNCTION audit_checkpoints_append();

-- +goose Down
DROP TRIGGER audit_checkpoints_append ON audit_checkpoints;
DROP TRIGGER audit_seals_append ON audit_seals;
DROP FUNCTION audit_checkpoints_append();
DROP FUNCTION audit_seals_append();
