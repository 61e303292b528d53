-- A turn's UTC offset as its frontend sent it (seconds east of UTC; 0 for
-- "Z" and for the turns recorded before): turn_at keeps the instant only,
-- and the extractor read the turn's date in UTC, so "my birthday is
-- tomorrow" said at 23:55 in New York (04:55 UTC the next day) was a day
-- late, and the model was told the UTC weekday. Adding a column with a
-- constant default rewrites no row.
-- The ALTER's exclusive lock waits for the transactions using turns, and
-- every statement on turns after it waits behind it (enrich's reads among
-- them: an upgrade walk saw every enrich reply degraded for the 9.4 s a
-- long transaction held it back). So it waits at most a second; past
-- that the migration is rolled back and run again (store.Migrate: 10
-- attempts), leaving the queue to drain between attempts.
SET LOCAL lock_timeout = '1s';
ALTER TABLE turns ADD COLUMN turn_offset integer NOT NULL DEFAULT 0;
