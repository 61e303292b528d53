-- An export longer than one page is read from a copy saved at its first
-- page (store.SpoolExport), not cut again from the live memory at every
-- page. Before, each page re-read the whole memory and the export was a
-- 409 as soon as anything changed between pages: a user chatting while
-- their export ran could not get one, and a large memory's export cost
-- the square of its size. The copy is the export's bytes from one
-- snapshot; pages read their part of it.
--
-- memory is the store.MemoryID of the snapshot: a page of a copy whose
-- user was forgotten since is refused (and the copy deleted), even when
-- the forget committed between the snapshot and the copy's insert.
-- A copy is deleted when its last page is read; read_at is the last
-- page's time: a copy unread for an hour is deleted
-- (the reconcile job), and a forget deletes its user's.
CREATE TABLE export_spools (
    id         text PRIMARY KEY,
    user_id    text NOT NULL,
    memory     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    read_at    timestamptz NOT NULL DEFAULT now(),
    data       bytea NOT NULL
);
-- Uncompressed out of line, so that a page's substring reads only the
-- chunks it needs.
ALTER TABLE export_spools ALTER COLUMN data SET STORAGE EXTERNAL;
CREATE INDEX export_spools_user ON export_spools (user_id, created_at);
CREATE INDEX export_spools_read ON export_spools (read_at);
