-- Reading a conversation's earlier turns (store.PriorConversationTurns, one
-- read per extraction job) without reading the user's whole history or the
-- whole table (issue 18, ingest). Before, the read went through
-- turns_user_status_idx (every processed turn of the user, then a filter on
-- the conversation) or, when the table had no statistics yet (a fresh
-- database under its first bulk load, or a server without autovacuum),
-- through turns_text_expiry_idx, whose predicate the read's own conditions
-- satisfy: every processed turn of every user, 30-115 ms a job at 22,000
-- turns, half of Postgres' time while membench ingested real text.
CREATE INDEX turns_conversation_idx ON turns (user_id, conversation_id, turn_at)
    WHERE status = 'processed' AND text_cleared_at IS NULL;
-- The retention prune's index, with a predicate only the prune's read
-- (processed_at < cutoff, which implies it) satisfies, so that no other
-- read of processed turns can be planned through it. Built under another
-- name before the old one is dropped: the builds hold a lock that lets
-- reads of turns go on (writes wait), the drop one that stops them, so it
-- comes last, for an instant.
CREATE INDEX turns_text_expiry2_idx ON turns (processed_at)
    WHERE status = 'processed' AND text_cleared_at IS NULL AND processed_at IS NOT NULL;
DROP INDEX turns_text_expiry_idx;
ALTER INDEX turns_text_expiry2_idx RENAME TO turns_text_expiry_idx;
