-- Clears are dated operations that older sources cannot undo: a value
-- extracted from a turn stamped no later than the clear is not written,
-- whether its extraction was running during the clear or a replay brings the
-- turn back. They hold no value and no text, only what was cleared and when;
-- forget deletes them with the rest of the user's data.

-- facts.clear of a key: cleared_at is the time of the clear, or the cleared
-- value's own source time when that is later.
CREATE TABLE fact_clears (
    user_id    text        NOT NULL,
    key        text        NOT NULL,
    cleared_at timestamptz NOT NULL,
    PRIMARY KEY (user_id, key)
);

-- Context clears. hash is empty for a clear of all the user's items, else the
-- content hash of a pair cleared by id (store.ContentHash) or the hash of a
-- question cleared by question (user id and normalised question): an item
-- whose turn is stamped no later than cleared_at and that matches is not
-- inserted.
CREATE TABLE context_clears (
    user_id    text        NOT NULL,
    hash       bytea       NOT NULL,
    cleared_at timestamptz NOT NULL,
    PRIMARY KEY (user_id, hash)
);
