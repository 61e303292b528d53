-- A chunk vector or refusal is saved only for the chunk text its job read
-- (store.SaveChunkEmbeddings compares a sum of it, md5 of the chunk's
-- heading path and text, since migration 072's re-cut keeps the content
-- hash the save checked). A serve of a release before 072 checks the
-- hash alone: during a rolling upgrade, its job that read a document's
-- chunks before a newer release cut the same content again saved the old
-- texts' vectors onto the new chunks at the same indexes, served as
-- theirs until the document's content changed.
--
-- A write whose statement does not compare the chunk's sum (a release
-- before 072's; from 072 on both statements do, by the text of
-- store.chunkSum) is dropped when a release from this one on cut the
-- document's current content (its chunking label ends in '@' and the
-- start of that content's hash, store.cutLabel), as that cut may not be
-- the one the writer read. A document such a release did not cut (a
-- label of 072's, '', or a label of another content: an older serve
-- rewrote or indexed it, and the chunks are that serve's own) still
-- takes them. The statement is read from current_query(): the
-- released statements cannot be changed, and a mark set by this release
-- alone would drop the sum-checked writes of 072's serves during a roll
-- from it. Such a dropped write's chunks are embedded by the embed sweep
-- or memoryd embed --backfill of a release from 072 on.
CREATE FUNCTION memoryd_chunk_vector_checked() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF strpos(current_query(), 'md5(ch.heading_path::text || ') = 0 AND EXISTS (
        SELECT FROM documents d WHERE d.collection_id = NEW.collection_id AND d.doc_id = NEW.doc_id
            AND right(d.chunking, 13) = '@' || left(d.content_hash, 12)) THEN
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
