-- When the user last put a document (docs.put: its insert, a put of new
-- content; a put of the content it holds writes nothing), apart from updated_at, which
-- its chunking sets too (IndexDocument). A forget deletes the documents
-- put at or before its time (store.ForgetCollections and the finish of a
-- forget cut short, DeleteDocumentsBefore), and a forget recorded is
-- applied again over a restored database unless the user wrote since it
-- (userWrittenSince), both by coalesce(put_at, created_at). Before, the
-- forget read created_at, the first put's, and deleted a document put
-- again while it ran, though docs.put had answered; and the restore read
-- updated_at, so a document chunked after the forget counted as the
-- user's write and the forget was never applied again.
--
-- NULL for the rows of before: no row is rewritten, and they are read by
-- created_at, as the forget read them. PutDocument sets it; a serve of
-- the previous release does not know it: a document it inserts has NULL
-- (its created_at is its put), and the trigger below sets it when that
-- serve puts new content over a document, whose put_at (or created_at)
-- would otherwise say an earlier put. Chunking leaves content_hash as it
-- is, and put_at with it.
-- documents is read and written by serves of the previous release
-- meanwhile; the ALTER's lock waits at most a second for them (as 059's),
-- then the migration is run again (store.Migrate).
SET LOCAL lock_timeout = '1s';
ALTER TABLE documents ADD COLUMN put_at timestamptz;

CREATE FUNCTION memoryd_document_put() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.put_at := now();
    RETURN NEW;
END
$$;
CREATE TRIGGER documents_put_at_trg BEFORE UPDATE OF content_hash ON documents
    FOR EACH ROW WHEN (NEW.content_hash IS DISTINCT FROM OLD.content_hash)
    EXECUTE FUNCTION memoryd_document_put();
