-- The context items' vectors (context_embeddings) counted in the size limit
-- (--max-db-size) at their live size, as the knowledge bases' tables are
-- (045): they had been counted with the context table, scaled by its rows
-- over its high water, so the dead versions a re-embed leaves (a new
-- vector of the same model replaces the old one: `embed --backfill --dims`,
-- an edited item) counted as memory for good, and pruning deleted users'
-- context to pay for them (a race review: 76 of 900 items deleted under a
-- limit the same 900 had fit). The column is the most row versions, live
-- and dead, the table has held.
ALTER TABLE prune_state ADD COLUMN context_embeddings_high_water bigint NOT NULL DEFAULT 0;
