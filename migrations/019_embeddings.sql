-- Embeddings (issue 17 items 1 and 2): one vector per context item and
-- embedding model, in plain PostgreSQL (no pgvector). The vector is the
-- embedding package's int8 form (a float32 scale, then one byte per
-- dimension), opaque to SQL; ranking reads a user's vectors in one query and
-- scores them exactly in Go.
--
-- Keyed by (item, model): a model change writes new rows beside the old
-- ones, which keep serving until the new model's are there. content_hash is
-- the item's content_hash when it was embedded: a vector whose hash no
-- longer matches (the item was edited) is stale, and readers skip it. The
-- foreign key's cascade removes an item's vectors with it (forget, clear,
-- delete, prune). user_id is the item's, copied so that a user's vectors
-- are read from this table's own index.
CREATE TABLE context_embeddings (
    context_id   bigint      NOT NULL REFERENCES context (id) ON DELETE CASCADE,
    model        text        NOT NULL,
    user_id      text        NOT NULL,
    content_hash bytea       NOT NULL,
    dims         integer     NOT NULL CHECK (dims > 0),
    vector       bytea       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (context_id, model)
);

-- A user's vectors for a model: one range scan (store.UserEmbeddings, and
-- the stats' count).
CREATE INDEX context_embeddings_user_model_idx ON context_embeddings (user_id, model, context_id);

-- "Items of this user without a vector for model M" (store.MissingEmbeddings)
-- walks the user's items by id (this index) and probes the primary key
-- above for each: no sort, no scan of other users' items.
CREATE INDEX context_user_id_idx ON context (user_id, id);
