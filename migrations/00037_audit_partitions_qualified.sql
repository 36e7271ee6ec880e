-- +goose Up

-- audit_ensure_partitions (migration 00001) names its objects with the
-- schema this migration runs in, and runs with a fixed search path.
--
-- It is SECURITY DEFINER (it runs as the tables' owner for airlock_app) and
-- looked the partitions up by bare name, with the search path of the
-- migration (SET search_path FROM CURRENT). A session's temporary schema
-- is searched before any search path that does not name it, so a
-- temporary table of the caller's named like a partition
-- (CREATE TEMP TABLE audit_events_2027_01 (x int), which any role with
-- TEMP on the database, airlock_app included, may make) was taken for it:
-- the month was left without a partition, silently (0 created), and every
-- event dated in it was refused once the month came. One named
-- audit_events made the creation fail. Now every name carries the schema,
-- the lookup is in pg_catalog (the name in that schema, and a partition of
-- audit_events; a table of that name that is not one is an error, not a
-- partition), and the search path is pg_catalog, the schema, then pg_temp
-- (named last, so it is searched last: PostgreSQL's advice for SECURITY
-- DEFINER functions).
-- +goose StatementBegin
DO $migration$
BEGIN
    EXECUTE format($fn$
CREATE OR REPLACE FUNCTION audit_ensure_partitions(from_at timestamptz, to_at timestamptz) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, %1$I, pg_temp AS $body$
DECLARE
    m       date := date_trunc('month', from_at AT TIME ZONE 'UTC')::date;
    last    date := date_trunc('month', to_at AT TIME ZONE 'UTC')::date;
    nsp     oid;
    parent  oid;
    part    text;
    rel     oid;
    created integer := 0;
BEGIN
    IF to_at > now() + interval '1 year' OR last - m > 3700 THEN
        RAISE EXCEPTION 'audit_ensure_partitions: %% to %% is too far', from_at, to_at;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('audit_ensure_partitions'));
    SELECT n.oid INTO STRICT nsp FROM pg_namespace n WHERE n.nspname = %1$L;
    SELECT c.oid INTO STRICT parent FROM pg_class c WHERE c.relnamespace = nsp AND c.relname = 'audit_events';
    WHILE m <= last LOOP
        part := 'audit_events_' || to_char(m, 'YYYY_MM');
        rel := NULL;
        SELECT c.oid INTO rel FROM pg_class c WHERE c.relnamespace = nsp AND c.relname = part;
        IF rel IS NULL THEN
            EXECUTE format('CREATE TABLE %%I.%%I PARTITION OF %%I.audit_events FOR VALUES FROM (%%L) TO (%%L)',
                %1$L, part, %1$L, to_char(m, 'YYYY-MM-DD') || ' 00:00:00+00',
                to_char(m + interval '1 month', 'YYYY-MM-DD') || ' 00:00:00+00');
            EXECUTE format('CREATE TRIGGER audit_events_truncate BEFORE TRUNCATE ON %%I.%%I FOR EACH STATEMENT '
                'EXECUTE FUNCTION %%I.audit_append_only(%%L)', %1$L, part, %1$L, 'audit_events is append-only');
            -- Reached through audit_events only (the default privileges
            -- would otherwise grant DML on the partition itself).
            EXECUTE format('REVOKE ALL ON %%I.%%I FROM airlock_app', %1$L, part);
            created := created + 1;
        ELSIF NOT EXISTS (SELECT FROM pg_inherits i WHERE i.inhrelid = rel AND i.inhparent = parent) THEN
            -- Only a role that may create in the schema can have put it
            -- there (the owner; on PostgreSQL 14 and before, PUBLIC may
            -- create in the schema public unless revoked).
            RAISE EXCEPTION 'audit_ensure_partitions: %%.%% is not a partition of %%.audit_events: rename or drop it',
                %1$L, part, %1$L USING ERRCODE = 'duplicate_table';
        END IF;
        m := (m + interval '1 month')::date;
    END LOOP;
    RETURN created;
END;
$body$
$fn$, current_schema());
END
$migration$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_ensure_partitions(from_at timestamptz, to_at timestamptz) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    m       date := date_trunc('month', from_at AT TIME ZONE 'UTC')::date;
    last    date := date_trunc('month', to_at AT TIME ZONE 'UTC')::date;
    part    text;
    created integer := 0;
BEGIN
    IF to_at > now() + interval '1 year' OR last - m > 3700 THEN
        RAISE EXCEPTION 'audit_ensure_partitions: % to % is too far', from_at, to_at;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('audit_ensure_partitions'));
    WHILE m <= last LOOP
        part := 'audit_events_' || to_char(m, 'YYYY_MM');
        IF to_regclass(part) IS NULL THEN
            EXECUTE format('CREATE TABLE %I PARTITION OF audit_events FOR VALUES FROM (%L) TO (%L)',
                part, m::text || ' 00:00:00+00', (m + interval '1 month')::date::text || ' 00:00:00+00');
            EXECUTE format('CREATE TRIGGER audit_events_truncate BEFORE TRUNCATE ON %I FOR EACH STATEMENT '
                'EXECUTE FUNCTION audit_append_only(%L)', part, 'audit_events is append-only');
            EXECUTE format('REVOKE ALL ON %I FROM airlock_app', part);
            created := created + 1;
        END IF;
        m := (m + interval '1 month')::date;
    END LOOP;
    RETURN created;
END;
$$;
-- +goose StatementEnd
