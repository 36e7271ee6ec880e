-- +goose Up

-- The seal layout of issue 14: seals live in their own insert-only table.
--
-- The sealer used to fill in each event's seq, prev_hash and hash with a
-- batch UPDATE. seq is indexed, so that UPDATE was never HOT: every sealed
-- event was written twice, with all its index entries, in a burst of WAL
-- every tick that concurrent commits queued behind. Now an event row is
-- written once and never again, and the sealer appends one small row per
-- event to audit_seals, in one INSERT per batch.
--
-- audit_seals: the chain in seal order. seq 1, 2, 3... (the order the sealer
-- saw the events commit), the sealed event's key (id, at), prev_hash (the
-- hash of seq - 1; 32 zero bytes for seq 1) and hash = SHA-256(prev_hash ||
-- the event's canonical encoding; internal/audit/canonical.go). An event is
-- sealed at most once (UNIQUE (id)). watermark, on the last seal of each
-- batch (NULL on the others), is the sealer's promise when it wrote that
-- batch: every event with an id up to it was sealed by then, or will never
-- commit (internal/store/seal.go, "the watermark"); the next sealer starts
-- looking for unsealed events above it.
--
-- There is no foreign key to audit_events: it would cost a probe per seal
-- and stop a month's partition from being detached. A seal without its
-- event (or an event changed after it was sealed) is what verification
-- reports.
CREATE TABLE audit_seals (
    seq       bigint PRIMARY KEY CHECK (seq > 0),
    id        bigint NOT NULL,
    at        timestamptz NOT NULL,
    prev_hash bytea NOT NULL CHECK (octet_length(prev_hash) = 32),
    hash      bytea NOT NULL CHECK (octet_length(hash) = 32),
    watermark bigint,
    CONSTRAINT audit_seals_event UNIQUE (id)
);
-- The newest watermark is where every sealer tick starts: one probe of
-- this index. Without it the planner, which sees almost no row with a
-- watermark, read the whole seal table backwards (52 ms a tick at 1 M).
CREATE INDEX audit_seals_watermark ON audit_seals (seq) WHERE watermark IS NOT NULL;
CREATE TRIGGER audit_seals_update BEFORE UPDATE OR DELETE ON audit_seals FOR EACH ROW
    EXECUTE FUNCTION audit_append_only('audit_seals is append-only');
CREATE TRIGGER audit_seals_truncate BEFORE TRUNCATE ON audit_seals FOR EACH STATEMENT
    EXECUTE FUNCTION audit_append_only('audit_seals is append-only');
-- The default privileges would grant UPDATE and DELETE.
REVOKE ALL ON audit_seals FROM airlock_app;
GRANT SELECT, INSERT ON audit_seals TO airlock_app;
-- The sealer reads the sequence's last value (never sets it). Its
-- watermark needs every id handed out from the sequence itself, never from
-- a session's cache of ids taken earlier: CACHE 1 (the default) says so.
GRANT SELECT ON SEQUENCE audit_events_id_seq TO airlock_app;
ALTER SEQUENCE audit_events_id_seq CACHE 1;

-- No writer may be inserting while the seals move: the copy below must see
-- every event that will ever have an id this low.
LOCK TABLE audit_events IN ACCESS EXCLUSIVE MODE;

-- A one-off copy of the seals there are (an INSERT; no event row is
-- touched). The watermark of the head: every event below the oldest
-- unsealed one is sealed, and with the table locked nothing is in flight.
INSERT INTO audit_seals (seq, id, at, prev_hash, hash, watermark)
SELECT seq, id, at, prev_hash, hash,
       CASE WHEN seq = max(seq) OVER () THEN
           coalesce((SELECT min(id) - 1 FROM audit_events WHERE seq IS NULL), (SELECT max(id) FROM audit_events))
       END
FROM audit_events WHERE seq IS NOT NULL;

-- The events table loses its seal columns: a catalog change (no row is
-- rewritten; the partitions follow their parent). With them go their CHECKs,
-- the audit_seq and audit_unsealed indexes, the insert trigger's seal
-- clause (the whole trigger: it had no other) and the app role's UPDATE.
-- Keeping the columns NULL forever would leave a grant, an index and a
-- trigger exception that nothing uses.
DROP TRIGGER audit_events_insert ON audit_events;
DROP TRIGGER audit_events_update ON audit_events;
DROP INDEX audit_seq;
DROP INDEX audit_unsealed;
ALTER TABLE audit_events DROP CONSTRAINT audit_events_sealed_whole;
ALTER TABLE audit_events DROP COLUMN seq, DROP COLUMN prev_hash, DROP COLUMN hash;
REVOKE UPDATE ON audit_events FROM airlock_app;
-- Every UPDATE is refused now, by anyone.
CREATE TRIGGER audit_events_update BEFORE UPDATE ON audit_events FOR EACH ROW
    EXECUTE FUNCTION audit_append_only('audit_events is append-only');

-- +goose Down
DROP TRIGGER audit_events_update ON audit_events;
ALTER TABLE audit_events ADD COLUMN seq bigint CHECK (seq > 0),
    ADD COLUMN prev_hash bytea CHECK (octet_length(prev_hash) = 32),
    ADD COLUMN hash bytea CHECK (octet_length(hash) = 32);
UPDATE audit_events e SET seq = s.seq, prev_hash = s.prev_hash, hash = s.hash
    FROM audit_seals s WHERE e.id = s.id AND e.at = s.at;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_sealed_whole
    CHECK ((seq IS NULL) = (prev_hash IS NULL) AND (seq IS NULL) = (hash IS NULL));
CREATE INDEX audit_seq ON audit_events (seq) WHERE seq IS NOT NULL;
CREATE INDEX audit_unsealed ON audit_events (id) WHERE seq IS NULL;
CREATE TRIGGER audit_events_insert BEFORE INSERT ON audit_events FOR EACH ROW
    WHEN (NEW.seq IS NOT NULL OR NEW.prev_hash IS NOT NULL OR NEW.hash IS NOT NULL)
    EXECUTE FUNCTION audit_append_only('audit_events rows are sealed by the sealer only');
CREATE TRIGGER audit_events_update BEFORE UPDATE ON audit_events FOR EACH ROW
    WHEN (NOT (OLD.seq IS NULL AND OLD.prev_hash IS NULL AND OLD.hash IS NULL
               AND NEW.seq IS NOT NULL AND NEW.prev_hash IS NOT NULL AND NEW.hash IS NOT NULL
               AND (NEW.id, NEW.at, NEW.kind, NEW.actor, NEW.agent_id, NEW.agent_instance, NEW.conversation_id,
                    NEW.step_id, NEW.correlation_id, NEW.action_id, NEW.tool, NEW.args, NEW.risk, NEW.decision, NEW.data)
                   IS NOT DISTINCT FROM
                   (OLD.id, OLD.at, OLD.kind, OLD.actor, OLD.agent_id, OLD.agent_instance, OLD.conversation_id,
                    OLD.step_id, OLD.correlation_id, OLD.action_id, OLD.tool, OLD.args, OLD.risk, OLD.decision, OLD.data)))
    EXECUTE FUNCTION audit_append_only('audit_events is append-only');
GRANT UPDATE (seq, prev_hash, hash) ON audit_events TO airlock_app;
REVOKE SELECT ON SEQUENCE audit_events_id_seq FROM airlock_app;
DROP TABLE audit_seals;
