-- A pair said in several turns keeps the event of the turn that stored it
-- (event_id) and now the others' too (said_in, the latest 64): a clear by
-- id or by question, and an update, cover every turn that said the pair
-- deleted (their eventKey), so a re-extraction by another model, which
-- words the pair otherwise, does not bring it back from a later turn (it
-- covered the first turn only). Adding a column with a constant default
-- rewrites no row.
-- The ALTER's exclusive lock waits for the transactions using context, and
-- every statement on context after it waits behind it (enrich's reads among
-- them: an upgrade walk saw every enrich reply degraded for the 9.4 s a
-- long transaction held it back). So it waits at most a second; past
-- that the migration is rolled back and run again (store.Migrate: 10
-- attempts), leaving the queue to drain between attempts.
SET LOCAL lock_timeout = '1s';
ALTER TABLE context ADD COLUMN said_in text[] NOT NULL DEFAULT '{}';

-- memoryd_said_in is kept with more appended: without empty ids, own (the
-- item's event_id) or repeats, the latest 64 kept, in the order said. It
-- returns kept itself when more adds nothing, so a write can tell (=).
CREATE FUNCTION memoryd_said_in(kept text[], own text, more text[]) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(array_agg(e ORDER BY n), '{}')
    FROM (SELECT e, min(n) AS n
          FROM unnest(kept || more) WITH ORDINALITY AS x(e, n)
          WHERE e <> '' AND e IS DISTINCT FROM own
          GROUP BY e
          ORDER BY min(n) DESC
          LIMIT 64) y
$$;
