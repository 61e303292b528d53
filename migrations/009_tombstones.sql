-- A forget leaves a tombstone per user token: the last turn-stream sequence
-- the forget covers and when it happened, nothing of the user's data. Ingest,
-- extraction and replay check it in the transaction that writes, under the
-- user's advisory lock (see store.LockUsers), so an event published before
-- the forget (stream_seq at or below the tombstone's) is dropped wherever it
-- was in flight; one published after it starts a new memory.
CREATE TABLE tombstones (
    user_token   text        PRIMARY KEY,
    stream_seq   bigint      NOT NULL,
    forgotten_at timestamptz NOT NULL DEFAULT now()
);
