-- Event ids are unique per user, not across users: the key of a turn is
-- (user_id, event_id), so one user's event can never take the place of
-- another's that happens to share its id.
ALTER TABLE turns DROP CONSTRAINT turns_pkey;
ALTER TABLE turns ADD PRIMARY KEY (user_id, event_id);

-- A turn's content as sent: conversation, message, response, timestamp (the
-- one sent, before any clamping) and metadata. An event whose (user, id) is
-- already recorded with the same hash is a redelivery or a frontend's retry
-- and is acknowledged; one with a different hash is a conflicting duplicate
-- and is dead-lettered. Stored, because a processed turn's text is emptied
-- after the retention period. The function is the one definition of the
-- hash: ingest, replay and the backfill below all use it.
CREATE FUNCTION memoryd_turn_hash(conv text, msg text, resp text, sent timestamptz, meta jsonb) RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT sha256(convert_to(jsonb_build_array(conv, msg, resp, extract(epoch FROM sent), meta)::text, 'UTF8'))
$$;
ALTER TABLE turns ADD COLUMN content_hash bytea;
-- Turns whose text was already emptied keep a NULL hash: their content is
-- unknown, so a later event with their key counts as a duplicate, as before.
UPDATE turns
SET content_hash = memoryd_turn_hash(conversation_id, user_message, assistant_response, coalesce(clamped_from, turn_at), metadata)
WHERE text_cleared_at IS NULL;
