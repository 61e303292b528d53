-- Model tokens spent per UTC day, for the daily spend caps
-- (worker.Config.DailyTokensPerUser and DailyTokens). The row with user_id
-- '' totals every user's tokens of the day, so that the global cap is one
-- primary-key read rather than a sum over the day's users; it names no user
-- and outlives a forget, so a forget does not give the global budget back.
CREATE TABLE llm_usage_daily (
    day     date   NOT NULL,
    user_id text   NOT NULL,
    tokens  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (day, user_id)
);
