-- Provenance on the wire (issue 16, item 6): a fact and each change in its
-- history carry the conversation of the turn that stated it, stored with
-- them because turns may be pruned. '' for a direct write (facts.set) and
-- for a clear.
ALTER TABLE facts ADD COLUMN conversation_id text NOT NULL DEFAULT '';
ALTER TABLE fact_history ADD COLUMN conversation_id text NOT NULL DEFAULT '';

-- The operation a history entry records: 'set' (a value written, first or
-- replacing another) or 'clear' (the fact deleted: facts.clear, a replay's
-- reset, a forget of the fact). Entries written before this migration are
-- classified by their new value, which is NULL exactly for a deletion.
ALTER TABLE fact_history ADD COLUMN op text NOT NULL DEFAULT 'set';
UPDATE fact_history SET op = 'clear' WHERE new_value IS NULL;

-- Facts and history entries already stored take their turn's conversation
-- when the turn is still recorded.
UPDATE facts f SET conversation_id = t.conversation_id
FROM turns t
WHERE f.event_id <> '' AND t.user_id = f.user_id AND t.event_id = f.event_id AND t.conversation_id <> '';
UPDATE fact_history h SET conversation_id = t.conversation_id
FROM turns t
WHERE h.event_id <> '' AND t.user_id = h.user_id AND t.event_id = h.event_id AND t.conversation_id <> '';

CREATE OR REPLACE FUNCTION memoryd_fact_history() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO fact_history (user_id, key, old_value, new_value, event_id, conversation_id, source_at, op)
        VALUES (NEW.user_id, NEW.key, NULL, NEW.value, NEW.event_id, NEW.conversation_id, NEW.source_at, 'set');
    ELSIF TG_OP = 'UPDATE' THEN
        IF NEW.value IS DISTINCT FROM OLD.value THEN
            INSERT INTO fact_history (user_id, key, old_value, new_value, event_id, conversation_id, source_at, op)
            VALUES (NEW.user_id, NEW.key, OLD.value, NEW.value, NEW.event_id, NEW.conversation_id, NEW.source_at, 'set');
        END IF;
    ELSE
        INSERT INTO fact_history (user_id, key, old_value, new_value, event_id, conversation_id, source_at, op)
        VALUES (OLD.user_id, OLD.key, OLD.value, NULL, '', '', NULL, 'clear');
    END IF;
    RETURN NULL;
END
$$;
