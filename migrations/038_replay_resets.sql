-- A replay --reset that deleted memory and has not yet read the turn stream
-- back. ResetMemory inserts the row in the transaction that deletes; the
-- replay deletes it once it has read and enqueued everything in its scope
-- (or a later full replay of that scope does). A row left behind (the
-- replay was stopped, killed, or lost its database) says its users have
-- only what was rebuilt before it stopped: serve warns at start, and replay
-- says so when it ends. Users are kept as sha256(user_id), as the change
-- counter does (migration 037), and a forget removes its user's.
CREATE TABLE replay_resets (
    id         bigserial PRIMARY KEY,
    user_keys  bytea[],  -- NULL: every user
    started_at timestamptz NOT NULL DEFAULT now()
);
