-- Processed turns keep their text (message, response, metadata) only for a
-- retention period: the stream holds the event, and a replay writes the text
-- back. text_cleared_at says when the periodic prune emptied them; the row,
-- its status and its event id stay, so deduplication and stats still hold.
ALTER TABLE turns ADD COLUMN text_cleared_at timestamptz;
-- The prune finds turns whose text has expired without reading the others.
CREATE INDEX turns_text_expiry_idx ON turns (processed_at)
    WHERE status = 'processed' AND text_cleared_at IS NULL;
-- The most turn text (stored bytes) the table has held: like context rows,
-- cleared text leaves reusable space in the files, not smaller files, so the
-- live size of turns is its real size less (high water - current text).
ALTER TABLE prune_state ADD COLUMN turn_text_high_water bigint NOT NULL DEFAULT 0;
