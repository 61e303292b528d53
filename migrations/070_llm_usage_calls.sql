-- The model calls whose token usage was recorded, by id, so that a call
-- recorded again writes nothing. A transaction that records usage (an
-- extraction's save, or a flush of calls whose results were not stored)
-- can commit on the server while its client loses the connection during
-- the COMMIT; the worker then keeps the calls' usage and records it
-- later, and before this table it was counted twice. An id is a UUID of
-- version 7, its first 48 bits the time it was made (Postgres's clock, as
-- the worker reads it): ids older than a day are deleted in key order
-- (store.DeleteUsageCallsBefore), with no other column or index. No user
-- data: the ids are random, and a forget leaves them.
CREATE TABLE llm_usage_calls (
    call_id uuid PRIMARY KEY
);
