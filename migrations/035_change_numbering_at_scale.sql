-- The numbering of a commit's changes at scale (issue 18, ingest). First,
-- it reads its id range through the primary key alone. Migration 034 meant
-- it to, but the planner may combine the range with memory_changes_user_seq_idx's
-- "seq IS NULL" entries (a BitmapAnd), and every change numbered since the
-- last vacuum left such an entry behind: the generic plan a long-lived
-- connection uses chose it once the outbox's table was large, and on
-- membench's 500,000-item corpus (autovacuum off) each commit with a change
-- then read 520,000 index entries, 47 ms of CPU, most of what Postgres did
-- while it ingested (pg_stat_activity: "commit" on CPU in 544 of 850
-- samples). The subquery's OFFSET 0 leaves the planner no index for the
-- condition. store.TestChangeNumberingReadsOnlyItsRange.
--
-- Second, a commit's changes are announced by pg_notify only where the
-- connection asks for it. NOTIFY takes one lock for the whole server at
-- commit and holds it through the commit's WAL flush, so every notifying
-- commit waited for the one before: while membench ingested real text with
-- the plan fixed as above, 248 of 420 samples of active backends were
-- commits waiting on that lock (wait event Lock:object). memoryd serve
-- wakes its own change publisher after its own commits (worker.Changes's
-- Committed) and opens its shared pool with memoryd.change_notify = off;
-- every other connection (the CLI's, replay's, a serve of an earlier
-- release, psql) still notifies, so that running publishers see their
-- changes at once.
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
        INSERT INTO memory_change_seqs AS s (user_id, seq) VALUES (u, cardinality(uids))
        ON CONFLICT (user_id) DO UPDATE SET seq = s.seq + excluded.seq
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

-- Third, the numbering's statements are small, but on a large outbox whose table
-- statistics are stale (no autovacuum) the generic plan's estimate passed
-- jit_above_cost, and compiling it took 5 ms of CPU at every commit with a
-- change: JIT never pays for them.
ALTER FUNCTION memoryd_number_changes() SET jit = off;
