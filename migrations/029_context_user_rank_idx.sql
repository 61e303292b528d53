-- The index a recall reads the user's items through (issue 18, realistic
-- corpus): the user's item count and mean field lengths for the statistics,
-- and each candidate's time and lengths, both index-only. It replaces
-- context_user_len_idx (user_id INCLUDE the lengths), which lacked the id
-- and time the candidates need, so that their join read every one of the
-- user's rows from the heap: ~1 ms of a ~2.5 ms recall for a user of 1,000
-- real conversation turns (docs/performance.md, "Realistic corpus").
-- Building it reads the context table once, inside this migration's
-- transaction (a few seconds for a million items).
CREATE INDEX context_user_rank_idx ON context (user_id) INCLUDE (id, created_at, question_len, answer_len);
DROP INDEX context_user_len_idx;
