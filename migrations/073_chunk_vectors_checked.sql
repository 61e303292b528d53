-- A chunk vector or refusal is saved only for the chunk text its job read
-- (store.SaveChunkEmbeddings compares a sum of it, since migration 072's
-- re-cut keeps the content hash the save checked). A serve of the
-- previous release checks the hash alone: during a rolling upgrade, its
-- job that read a document's chunks before this release cut the same
-- content again saved the old texts' vectors onto the new chunks at the
-- same indexes, served as theirs until the document's content changed.
--
-- This release marks its saves (the transaction's setting
-- memoryd.chunk_sums_checked); a row written unmarked is dropped when
-- its document was cut by a release that records its chunking (chunking
-- not ''), as that cut may not be the one the writer read. A document a
-- previous release cut (chunking '') still takes them: no release that
-- records chunkings cut it. The previous release's job then saves none
-- (it takes them for a re-put's overtaking), and the embed sweep or
-- memoryd embed --backfill of this release embeds those chunks.
CREATE FUNCTION memoryd_chunk_vector_checked() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('memoryd.chunk_sums_checked', true) IS DISTINCT FROM 'on' AND EXISTS (
        SELECT FROM documents d WHERE d.collection_id = NEW.collection_id AND d.doc_id = NEW.doc_id AND d.chunking <> '') THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$$;

-- Serves of the previous release write both tables meanwhile: the
-- triggers' locks wait at most a second for them (as 072's), then the
-- migration is run again (store.Migrate).
SET LOCAL lock_timeout = '1s';
CREATE TRIGGER chunk_embeddings_checked BEFORE INSERT OR UPDATE ON chunk_embeddings
    FOR EACH ROW EXECUTE FUNCTION memoryd_chunk_vector_checked();
CREATE TRIGGER chunk_embedding_refusals_checked BEFORE INSERT OR UPDATE ON chunk_embedding_refusals
    FOR EACH ROW EXECUTE FUNCTION memoryd_chunk_vector_checked();
