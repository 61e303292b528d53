-- How a document's chunks were cut (chunker.Chunking: the chunker's
-- version and the language the document is cut as, "1 go", "1" for
-- Markdown or text), written by each docs.put of the document. A put of
-- the content a document holds wrote nothing, so a document kept the
-- chunks of the release that first cut it until its content changed:
-- a code file put before code was chunked as code kept its prose chunks,
-- its "# comments" their headings. A put of the same content now cuts
-- the document again when its chunking differs (store.PutDocument).
--
-- '' for the rows of before: their chunking is not known, and the first
-- put of each after the upgrade cuts it again (once). A serve of the
-- previous release does not know the column: a document it puts keeps
-- '' (its default), and is cut again at its next put by this release.
-- documents is read and written by serves of the previous release
-- meanwhile; adding a column with a constant default rewrites no row,
-- and the ALTER's lock waits at most a second for them (as 066's), then
-- the migration is run again (store.Migrate).
SET LOCAL lock_timeout = '1s';
ALTER TABLE documents ADD COLUMN chunking text NOT NULL DEFAULT '';
