-- The context items whose text the embeddings server refused as input
-- (a 400, 413 or 422 over the model's context, llama.cpp's 500 "input is
-- too large to process"), alone and with every shorter start the embed
-- job tried (worker.embedStart), keyed by item and model and with the
-- content hash refused: the hourly embed sweep and `memoryd embed
-- --backfill` leave such an item out until its text changes or the model
-- does (a dimensions change is one: embedding.Config.StoredModel).
-- Before, the sweep sent every refused text again each hour, for ever
-- (an embeddings walk against llama.cpp's default -ub 512). `memoryd embed
-- --backfill --retry-refused` deletes the rows of its model first.
--
-- A table of its own rather than a column: a serve of the previous
-- release neither reads nor writes it (its sweep re-sends refused texts,
-- as before), and the cascade removes an item's rows with it (forget,
-- clear, delete, prune), whichever release deletes the item.
-- The foreign key's lock on context (SHARE ROW EXCLUSIVE: writes wait)
-- waits at most a second for the serves of the previous release, as
-- 059's, then the migration is run again (store.Migrate).
SET LOCAL lock_timeout = '1s';
CREATE TABLE embedding_refusals (
    context_id   bigint      NOT NULL REFERENCES context (id) ON DELETE CASCADE,
    model        text        NOT NULL,
    content_hash bytea       NOT NULL,
    refused_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (context_id, model)
);
