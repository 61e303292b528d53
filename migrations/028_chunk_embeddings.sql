-- Chunk embeddings (issue 19 with issue 17): one vector per document chunk
-- and embedding model, in the same int8 form as context items' (migration
-- 019), so that documents are searched hybrid like context items.
--
-- Vectors belong to the collection, not to a user: a shared scope's chunks
-- are embedded once, whoever reads them. Keyed by (chunk, model): a model
-- change writes new rows beside the old ones, which keep serving until the
-- new model's are there. content_hash is the document's content_hash when
-- the chunk was embedded: readers use a vector only while its document
-- still holds that content (a vector saved by a job that raced a re-put of
-- the document is never read). The foreign key's cascade removes a chunk's
-- vectors with it: a re-put with new content (its chunks are deleted and
-- inserted in one transaction), a document's or collection's delete, a
-- forget.
CREATE TABLE chunk_embeddings (
    collection_id bigint      NOT NULL,
    doc_id        text        NOT NULL,
    chunk_index   integer     NOT NULL,
    model         text        NOT NULL,
    content_hash  text        NOT NULL,
    dims          integer     NOT NULL CHECK (dims > 0),
    vector        bytea       NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (collection_id, model, doc_id, chunk_index),
    FOREIGN KEY (collection_id, doc_id, chunk_index) REFERENCES doc_chunks (collection_id, doc_id, chunk_index)
        ON DELETE CASCADE
);

-- The cascade from doc_chunks probes by (collection_id, doc_id,
-- chunk_index); the primary key leads with the model.
CREATE INDEX chunk_embeddings_chunk_idx ON chunk_embeddings (collection_id, doc_id, chunk_index);

-- Per-collection embedding generations, as migration 021's per-user ones:
-- a value (from the same never-reused sequence) that changes whenever the
-- set of the collection's usable vectors may have changed, so that a
-- process caches a collection's vectors and checks, in the snapshot of each
-- search, that its copy is exact. No row reads as generation 0, "no
-- vectors". The row goes with its collection (the foreign key): its
-- vectors are gone then too.
--
-- What bumps it, by triggers: a vector inserted, replaced or deleted
-- (directly or by the cascade of its chunk's, document's or collection's
-- delete). A document's new content always deletes its old chunks (store
-- writeChunks), and with them their vectors, so that a content change
-- bumps it too.
CREATE TABLE chunk_embedding_generations (
    collection_id bigint PRIMARY KEY REFERENCES collections (id) ON DELETE CASCADE,
    generation    bigint NOT NULL
);

-- Collections are bumped in id order, so that two statements touching the
-- same collections lock their rows in the same order. A collection deleted
-- meanwhile (its row cannot be inserted) is skipped by the join.
CREATE FUNCTION memoryd_chunk_embeddings_written() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chunk_embedding_generations AS g (collection_id, generation)
    SELECT x.c, nextval('embedding_generation_seq')
    FROM (SELECT DISTINCT collection_id AS c FROM changed ORDER BY 1) x
    JOIN collections col ON col.id = x.c
    ON CONFLICT (collection_id) DO UPDATE SET generation = excluded.generation;
    RETURN NULL;
END
$$;

CREATE FUNCTION memoryd_chunk_embeddings_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE chunk_embedding_generations g SET generation = nextval('embedding_generation_seq')
    FROM (SELECT DISTINCT collection_id AS c FROM changed ORDER BY 1) x
    WHERE g.collection_id = x.c;
    RETURN NULL;
END
$$;

CREATE TRIGGER chunk_embeddings_insert_gen AFTER INSERT ON chunk_embeddings
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION memoryd_chunk_embeddings_written();
CREATE TRIGGER chunk_embeddings_update_gen AFTER UPDATE ON chunk_embeddings
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION memoryd_chunk_embeddings_written();
CREATE TRIGGER chunk_embeddings_delete_gen AFTER DELETE ON chunk_embeddings
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION memoryd_chunk_embeddings_deleted();
