-- The embedding model each live worker process embeds and searches with
-- (--embed-model; NULL: embedding off), so that a prune over the size
-- limit deletes only the vectors of models no running process uses. It
-- deleted every other model's than its own process's: during a rolling
-- change of model, a process of the old model wiped the new model's
-- vectors (an operator's walk: 798 of 798 at once, enrich lexical on every
-- process until a backfill), and the new model's processes the old ones.
ALTER TABLE memoryd_processes ADD COLUMN embed_model text;
