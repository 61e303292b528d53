-- The knowledge bases' tables counted in the size limit (--max-db-size) at
-- their live size, as the context table is (002): Postgres does not shrink
-- a table's files when rows are deleted, so documents deleted (docs.delete,
-- a forget of their owner) counted at their full size until a VACUUM FULL,
-- and pruning deleted users' context to make room for them (a race walk:
-- 150 MB of chunk terms of no document, context pruned from 654 items to
-- about 420 under a 225 MB limit holding 40 MB of memory). Each column is
-- the most row versions, live and dead, its table has held; a table's live
-- size is its real size scaled by its rows over it (chunk_terms, a row per
-- chunk and term, by doc_chunks' rows over theirs: it is not counted).
ALTER TABLE prune_state ADD COLUMN collections_high_water bigint NOT NULL DEFAULT 0,
    ADD COLUMN documents_high_water bigint NOT NULL DEFAULT 0,
    ADD COLUMN doc_chunks_high_water bigint NOT NULL DEFAULT 0,
    ADD COLUMN chunk_embeddings_high_water bigint NOT NULL DEFAULT 0;
