-- The clears an import brought (its fact_clear and fact_value_clear
-- lines), beside fact_clears and fact_value_clears, which hold every
-- clear. A reset drops the clears turns made, since the replay makes them
-- again, and dropped these with them, though no replay makes them: a fact
-- of the user's own turn that an import cleared came back with the
-- replay's extraction of the turn. A reset now puts these back into
-- fact_clears and fact_value_clears (store.resetClears), the later of two
-- clears kept, as an import keeps it.
--
-- item is the value's identity for a clear of one value, '' for a clear
-- of the key. A table of its own: a serve of the previous release neither
-- reads nor writes it (its imports record no clear here, its resets drop
-- them, as before). Clears imported before this migration are not told
-- from a turn's, and a reset still drops them; importing the same export
-- again records them.
CREATE TABLE fact_import_clears (
    user_id    text        NOT NULL,
    key        text        NOT NULL,
    item       text        NOT NULL,
    cleared_at timestamptz NOT NULL,
    PRIMARY KEY (user_id, key, item)
);

-- A fact history entry is dated when the change is made (clock_timestamp),
-- not when its transaction began (now()): a write whose transaction began
-- before another's and changed the fact after that one committed was
-- dated before it, and the history, in the order recorded, went back in
-- time (an export, ordered by the date, and its import, put the later
-- change first). Only the default changes, no row is rewritten; the
-- lock on fact_history waits at most a second for the serves of the
-- previous release, as 059's, then the migration is run again
-- (store.Migrate).
SET LOCAL lock_timeout = '1s';
ALTER TABLE fact_history ALTER COLUMN changed_at SET DEFAULT clock_timestamp();
