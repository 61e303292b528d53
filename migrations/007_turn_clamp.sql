-- A turn's timestamp comes from the frontend's clock. One far in the future
-- would outrank every later turn and every facts.set for good (facts keep the
-- value with the latest source time), so memoryd clamps a timestamp later
-- than the time JetStream stored the event plus the allowed clock skew to
-- that stored time. clamped_from keeps the timestamp the frontend sent when
-- that happened; it is NULL for every turn taken as sent.
ALTER TABLE turns ADD COLUMN clamped_from timestamptz;

-- Repair what was written before clamping existed, with the default skew of
-- 5 minutes: the receipt time of a turn is received_at, and a fact's or a
-- context item's is when it was written.
UPDATE turns SET clamped_from = turn_at, turn_at = received_at
    WHERE turn_at > received_at + interval '5 minutes';
UPDATE facts SET source_at = updated_at
    WHERE source_at > updated_at + interval '5 minutes';
UPDATE context SET created_at = inserted_at
    WHERE created_at > inserted_at + interval '5 minutes';
