-- The turns table counted in the size limit (--max-db-size) at its live
-- size, as the context table is (002) and the knowledge bases' (045): a
-- replay rewrites every turn it reads (back to pending with its text, then
-- processed), so the table's files grow by a dead version or two of each
-- turn, which a VACUUM makes reusable but never gives back. The turns
-- table counted at its real size (less the text cleared since the text
-- high water, 006), so that space was floor, and the prune after a replay
-- deleted context that had fit under the same limit before it (a prune
-- walk: 29 of 30 users lost every item after a `replay` under
-- --max-db-size 7M). turns_high_water is the most row versions, live and
-- dead, the table has held; its live size is at most its real size scaled
-- by its rows over it.
-- prune_state is one row that the pruner and the reconcile job update
-- briefly; the ALTER's lock waits at most a second for them (as 059's),
-- then the migration is run again (store.Migrate).
SET LOCAL lock_timeout = '1s';
ALTER TABLE prune_state ADD COLUMN turns_high_water bigint NOT NULL DEFAULT 0;
