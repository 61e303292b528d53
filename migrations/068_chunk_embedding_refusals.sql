-- The document chunks whose text the embeddings server refused as input,
-- as embedding_refusals (065) holds the context items': keyed by chunk and
-- model, with the content hash of the document content refused. The
-- hourly embed sweep and `memoryd embed --backfill` leave such a chunk
-- out until its document's content changes (a put of new content writes
-- new chunks, and the cascade deletes the old ones' rows) or the model
-- does. Before, every sweep sent each refused chunk again, for ever.
-- `memoryd embed --backfill --retry-refused` deletes the rows of its
-- model first.
--
-- A table of its own, as 065's: a serve of the previous release neither
-- reads nor writes it (its sweep re-sends refused chunks, as before).
-- The foreign key's lock on doc_chunks (SHARE ROW EXCLUSIVE: writes wait)
-- waits at most a second for the serves of the previous release, as
-- 065's, then the migration is run again (store.Migrate).
SET LOCAL lock_timeout = '1s';
CREATE TABLE chunk_embedding_refusals (
    collection_id bigint      NOT NULL,
    doc_id        text        NOT NULL,
    chunk_index   integer     NOT NULL,
    model         text        NOT NULL,
    content_hash  text        NOT NULL,
    refused_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (collection_id, model, doc_id, chunk_index),
    FOREIGN KEY (collection_id, doc_id, chunk_index) REFERENCES doc_chunks (collection_id, doc_id, chunk_index)
        ON DELETE CASCADE
);
-- The cascade from doc_chunks probes by (collection_id, doc_id,
-- chunk_index), which the primary key (model second) does not serve.
CREATE INDEX chunk_embedding_refusals_chunk_idx ON chunk_embedding_refusals (collection_id, doc_id, chunk_index);
