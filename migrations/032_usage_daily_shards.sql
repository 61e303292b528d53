-- Everyone's daily token count in 16 rows instead of one (issue 18,
-- LLM-path ingest). Every extraction job adds its tokens in the transaction
-- that stores its results, to the user's row and to the day's total
-- (migration 016); with one total row every such transaction waited for the
-- row lock of the one before it, held through its commit, so the model path
-- ran one save at a time (88-113 turns/s against an instant model, 900 of
-- 1,146 samples of pg_stat_activity waiting on that row). The total is now
-- spread over shards chosen by the user (a user's jobs already queue on the
-- user's own row, so they add nothing to the wait); readers sum the
-- shards. A user's own rows stay in shard 0.
ALTER TABLE llm_usage_daily ADD COLUMN shard smallint NOT NULL DEFAULT 0
    CHECK (shard >= 0 AND shard < 16 AND (shard = 0 OR user_id = ''));
ALTER TABLE llm_usage_daily DROP CONSTRAINT llm_usage_daily_pkey;
ALTER TABLE llm_usage_daily ADD PRIMARY KEY (day, user_id, shard);
