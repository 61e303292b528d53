-- Pruning bookkeeping. context_high_water is the most context rows the table
-- has held: Postgres does not shrink a table's files when rows are deleted
-- (VACUUM makes the space reusable), so the live size of the context table is
-- estimated as its real size scaled by rows / high water.
CREATE TABLE prune_state (
    id                 boolean     PRIMARY KEY DEFAULT true CHECK (id),
    context_high_water bigint      NOT NULL DEFAULT 0,
    last_run_at        timestamptz,
    last_removed       bigint      NOT NULL DEFAULT 0
);
INSERT INTO prune_state DEFAULT VALUES;

-- Oldest-first deletion walks this index.
CREATE INDEX context_created_idx ON context (created_at, id);
