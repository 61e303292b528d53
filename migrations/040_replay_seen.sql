-- The turns a replay --reset's check read back from the stream, each as a
-- SHA-256 of its user id (its length in bytes, ':', the id) and event id,
-- so that no id is kept here: the reset is refused when it would delete
-- memory of recorded turns the stream no longer holds (worker.Replay).
-- Rows live for one check; a check left behind by a killed replay is
-- deleted by the next one after a week.
CREATE UNLOGGED TABLE replay_seen (
    check_id bigint      NOT NULL,
    key      bytea       NOT NULL,
    at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX replay_seen_check ON replay_seen (check_id, key);
