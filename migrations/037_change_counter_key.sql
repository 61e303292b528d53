-- A user's change counter under a SHA-256 of the user id, not the id.
-- Forget keeps the counter, so that memory.changes numbers never go back (a
-- subscriber that missed the forget sees a gap, not old numbers again), and
-- so it kept the forgotten user's id for good: an email, say, where the
-- tombstone keeps only a hash for such an id (events.UserToken). The
-- numbering function is 035's but for its counter's key.
--
-- A new table, not a dropped column: a dropped column's values stay in the
-- table's file until each row is written again, and a forgotten user's row
-- never is. Dropping the old table deletes its file at commit (WAL and
-- backups taken before still hold the ids).
CREATE TABLE memory_change_seqs_keyed (
    user_key bytea  PRIMARY KEY,
    seq      bigint NOT NULL
);
INSERT INTO memory_change_seqs_keyed (user_key, seq)
SELECT sha256(convert_to(user_id, 'UTF8')), seq FROM memory_change_seqs;
DROP TABLE memory_change_seqs;
ALTER TABLE memory_change_seqs_keyed RENAME TO memory_change_seqs;
ALTER INDEX memory_change_seqs_keyed_pkey RENAME TO memory_change_seqs_pkey;

CREATE OR REPLACE FUNCTION memoryd_number_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    cur  text;
    lo   bigint := NEW.id;
    hi   bigint := NEW.id;
    u    text;
    uids bigint[];
    last bigint;
    -- A process that wakes its own publisher after its commits turns the
    -- notification off for its connections.
    notify boolean := coalesce(current_setting('memoryd.change_notify', true), '') <> 'off';
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
    -- OFFSET 0 keeps "seq IS NULL" out of the index scan: the range is read
    -- through the primary key alone, and the condition filters its rows.
    FOR u, uids IN SELECT user_id, array_agg(id ORDER BY id)
                   FROM (SELECT id, user_id, seq FROM memory_changes WHERE id BETWEEN lo AND hi OFFSET 0) r
                   WHERE seq IS NULL GROUP BY user_id ORDER BY user_id LOOP
        INSERT INTO memory_change_seqs AS s (user_key, seq) VALUES (sha256(convert_to(u, 'UTF8')), cardinality(uids))
        ON CONFLICT (user_key) DO UPDATE SET seq = s.seq + excluded.seq
        RETURNING seq INTO last;
        UPDATE memory_changes c SET seq = last - cardinality(uids) + r.n, created_at = clock_timestamp()
        FROM unnest(uids) WITH ORDINALITY AS r(id, n)
        WHERE c.id = r.id;
        IF notify THEN
            PERFORM pg_notify('memoryd_changes', current_schema());
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;

ALTER FUNCTION memoryd_number_changes() SET jit = off;
