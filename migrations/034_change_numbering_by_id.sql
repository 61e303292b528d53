-- Numbering a transaction's changes at commit without scanning the outbox
-- (issue 18, ingest). memoryd_number_changes found the transaction's
-- unnumbered rows through memory_changes_unnumbered_idx (WHERE seq IS NULL),
-- but every numbered row leaves its unnumbered version behind in that index
-- until a vacuum: between vacuums (or on a server without autovacuum) every
-- commit with a change read the old versions of all the changes since the
-- last one, 142 ms a commit after 65,000 changes, and while membench
-- ingested real text that read was most of Postgres' time.
--
-- Now an AFTER INSERT statement trigger keeps the smallest and largest id
-- the transaction inserted in the transaction-local setting
-- memoryd.change_range ("lo,hi"; a savepoint rolled back takes its part
-- back with it), and the deferred trigger numbers the unnumbered rows of
-- that id range through the primary key: its own rows, and the rows other
-- transactions inserted meanwhile, which it skips (uncommitted ones are not
-- visible, committed ones are numbered). A commit's cost follows what was
-- written while it ran, not the outbox's history, and the setting stays
-- two numbers however many rows the transaction writes. The row the
-- trigger fires for widens the range, so a row the setting missed (an
-- earlier firing emptied it, as SET CONSTRAINTS ALL IMMEDIATE does) is
-- numbered too. Order and locking are as before: users in user order, a
-- user's changes in id order.
CREATE FUNCTION memoryd_track_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    lo  bigint;
    hi  bigint;
    cur text := nullif(current_setting('memoryd.change_range', true), '');
BEGIN
    SELECT min(id), max(id) INTO lo, hi FROM new_changes;
    IF lo IS NULL THEN
        RETURN NULL; -- a statement that inserted nothing
    END IF;
    IF cur IS NOT NULL THEN
        lo := least(lo, split_part(cur, ',', 1)::bigint);
        hi := greatest(hi, split_part(cur, ',', 2)::bigint);
    END IF;
    PERFORM set_config('memoryd.change_range', lo || ',' || hi, true);
    RETURN NULL;
END
$$;
CREATE TRIGGER memory_changes_track_trg AFTER INSERT ON memory_changes
    REFERENCING NEW TABLE AS new_changes
    FOR EACH STATEMENT EXECUTE FUNCTION memoryd_track_changes();

CREATE OR REPLACE FUNCTION memoryd_number_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    cur  text;
    lo   bigint := NEW.id;
    hi   bigint := NEW.id;
    u    text;
    uids bigint[];
    last bigint;
BEGIN
    IF (SELECT seq FROM memory_changes WHERE id = NEW.id) IS NOT NULL THEN
        RETURN NULL; -- numbered by an earlier firing: one lookup, not a scan
    END IF;
    cur := nullif(current_setting('memoryd.change_range', true), '');
    IF cur IS NOT NULL THEN
        lo := least(lo, split_part(cur, ',', 1)::bigint);
        hi := greatest(hi, split_part(cur, ',', 2)::bigint);
    END IF;
    PERFORM set_config('memoryd.change_range', '', true);
    FOR u, uids IN SELECT user_id, array_agg(id ORDER BY id) FROM memory_changes
                   WHERE id BETWEEN lo AND hi AND seq IS NULL GROUP BY user_id ORDER BY user_id LOOP
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
