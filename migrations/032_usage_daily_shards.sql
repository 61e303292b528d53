-- Everyone's daily token count in 16 rows instead of one (issue 18,
-- LLM-path ingest). Every extraction job adds its tokens in the transaction
-- that stores its results, to the user's row and to the day's total
-- (migration 016); with one total row every such transaction waited for the
-- row lock of the one before it, held through its commit, so the model path
-- ran one save at a time (593 of 1,146 samples of pg_stat_activity during an
-- LLM ingest waited on that row). The total now goes to a shard chosen by
-- the user (a user's jobs already queue on the user's own row, so they add
-- nothing to the wait); readers add the shards to the day's '' row of
-- llm_usage_daily, which a serve of an earlier version, running beside a
-- new one during an upgrade, still writes: that table keeps its key.
CREATE TABLE llm_usage_daily_shards (
    day    date     NOT NULL,
    shard  smallint NOT NULL CHECK (shard >= 0 AND shard < 16),
    tokens bigint   NOT NULL DEFAULT 0,
    PRIMARY KEY (day, shard)
);
