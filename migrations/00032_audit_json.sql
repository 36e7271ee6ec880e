-- +goose Up

-- The audit trail's JSON columns keep their text (json) instead of a parsed
-- form (jsonb). Issue 14: verifying the chain reads every event back, and
-- printing four jsonb values was PostgreSQL's largest cost per event (COPY
-- of 1 M events: 3.74 s from jsonb columns, 0.92 s from json ones); a json
-- value is sent as it was stored. Nothing queries these columns with jsonb
-- operators: readers decode them in Go.
--
-- Every writer passes its values through jsonb on the way in, so the
-- columns hold jsonb's text of each value (and never a repeated key, which
-- the canonical form refuses). Verification hashes that text as it is,
-- without working out its canonical form (audit.Hasher.Hash's quick path),
-- and falls back to the canonical form for any other spelling. The
-- existing events keep the values they had, now in jsonb's spelling: their
-- seals still verify (a seal covers the canonical form, the same for every
-- spelling).
--
-- The change rewrites the table (every partition, with its indexes): on
-- a large trail, run it in a quiet hour (README, "Several server instances").
ALTER TABLE audit_events
    ALTER COLUMN args TYPE json USING args::json,
    ALTER COLUMN risk TYPE json USING risk::json,
    ALTER COLUMN decision TYPE json USING decision::json,
    ALTER COLUMN data TYPE json USING data::json;

-- +goose Down
ALTER TABLE audit_events
    ALTER COLUMN args TYPE jsonb USING args::jsonb,
    ALTER COLUMN risk TYPE jsonb USING risk::jsonb,
    ALTER COLUMN decision TYPE jsonb USING decision::jsonb,
    ALTER COLUMN data TYPE jsonb USING data::jsonb;
