-- An export's copy (057) saved in parts of a fixed size while the export
-- is read from its snapshot, and a page reading the parts it spans.
-- Before, the first page built the whole export in memory and sent it as
-- one bytea: serve held the user's memory several times over (a 31.5 MB
-- export took its RSS to 217 MB), bounded by nothing but the largest
-- user's memory.
--
-- size and part_bytes are set on a copy saved in parts (its data is then
-- empty); a copy of a release before this one has both NULL and its
-- export in data, and is read from there. A serve of the previous release
-- reading a copy saved in parts finds it empty: the cursor past its end,
-- a 409, and the export starts again. Parts go with their copy (a forget,
-- its last page, expiry, the per-user bound), whichever release deletes
-- it.
-- export_spools is read and written by serves of the previous release
-- meanwhile; the ALTER's lock waits at most a second for them (as 059's),
-- then the migration is run again (store.Migrate).
SET LOCAL lock_timeout = '1s';
ALTER TABLE export_spools ADD COLUMN size bigint, ADD COLUMN part_bytes integer;
CREATE TABLE export_spool_parts (
    spool_id text NOT NULL REFERENCES export_spools (id) ON DELETE CASCADE,
    seq      integer NOT NULL,
    data     bytea NOT NULL,
    PRIMARY KEY (spool_id, seq)
);
-- Uncompressed, as 057's data: the first page's time is the export's
-- read, not the compression of its copy.
ALTER TABLE export_spool_parts ALTER COLUMN data SET STORAGE EXTERNAL;
