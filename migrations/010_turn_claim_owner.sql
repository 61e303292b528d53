-- A debounced burst's claim records the River job that holds it, so that a
-- re-run of that job (after a shutdown handed it back, a retry or a rescue)
-- takes its own claim back at once instead of waiting for it to expire.
ALTER TABLE turns ADD COLUMN claimed_by bigint;
