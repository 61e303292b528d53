-- A turn's UTC offset as its frontend sent it (seconds east of UTC; 0 for
-- "Z" and for the turns recorded before): turn_at keeps the instant only,
-- and the extractor read the turn's date in UTC, so "my birthday is
-- tomorrow" said at 23:55 in New York (04:55 UTC the next day) was a day
-- late, and the model was told the UTC weekday. Adding a column with a
-- constant default rewrites no row.
ALTER TABLE turns ADD COLUMN turn_offset integer NOT NULL DEFAULT 0;
