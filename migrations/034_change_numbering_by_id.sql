-- Numbering a transaction's changes at commit without scanning the outbox
-- (issue 18, ingest). memoryd_number_changes found the transaction's
-- unnumbered rows through memory_changes_unnumbered_idx (WHERE seq IS NULL),
-- but every numbered row leaves its unnumbered version behind in that index
-- until a vacuum: between vacuums (or on a server without autovacuum) every
-- commit with a change read the old versions of all the changes since the
-- last one, 142 ms a commit after 65,000 changes, and while membench
-- ingested real text that read was most of Postgres' time and enrich's
-- p99 went from 8 to 65 ms.
--
-- Now an AFTER INSERT statement trigger keeps the ids the transaction
-- inserted in the transaction-local setting memoryd.change_ids, and the
-- deferred trigger numbers exactly those rows (and the row it fires for, so
-- that a row inserted without the setting, e.g. by a transaction that
-- began before this migration, is numbered too), reading them by primary
-- key: the cost of a commit depends on its own changes only. Order and
-- locking are as before: users in user order, a user's changes in id order.
CREATE FUNCTION memoryd_track_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('memoryd.change_ids',
        coalesce(current_setting('memoryd.change_ids', true), '') || (SELECT string_agg(id::text || ',', '') FROM new_changes), true);
    RETURN NULL;
END
$$;
CREATE TRIGGER memory_changes_track_trg AFTER INSERT ON memory_changes
    REFERENCING NEW TABLE AS new_changes
    FOR EACH STATEMENT EXECUTE FUNCTION memoryd_track_changes();

CREATE OR REPLACE FUNCTION memoryd_number_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    ids  bigint[];
    u    text;
    uids bigint[];
    last bigint;
BEGIN
    IF (SELECT seq FROM memory_changes WHERE id = NEW.id) IS NOT NULL THEN
        RETURN NULL; -- numbered by an earlier firing: one lookup, not a scan
    END IF;
    ids := string_to_array(rtrim(coalesce(current_setting('memoryd.change_ids', true), ''), ','), ',')::bigint[] || NEW.id;
    PERFORM set_config('memoryd.change_ids', '', true);
    FOR u, uids IN SELECT user_id, array_agg(id ORDER BY id) FROM memory_changes
                   WHERE id = ANY(ids) AND seq IS NULL GROUP BY user_id ORDER BY user_id LOOP
        INSERT INTO memory_change_seqs AS s (user_id, seq) VALUES (u, cardinality(uids))
        ON CONFLICT (user_id) DO UPDATE SET seq = s.seq + excluded.seq
        RETURNING seq INTO last;
        UPDATE memory_changes c SET seq = last - cardinality(uids) + r.n, created_at = clock_timestamp()
        FROM unnest(uids) WITH ORDINALITY AS r(id, n)
        WHERE c.id = r.id;
        PERFORM pg_notify('memoryd_changes', current_schema());
    END LOOP;
    RETURN NULL;
END
$$;

-- Nothing reads unnumbered rows by user any more.
DROP INDEX memory_changes_unnumbered_idx;
