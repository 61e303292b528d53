-- A pair said again (store, or a turn stating what the user already has)
-- moves its item's created_at forward: context.list, newest first, then
-- lists it in front, where a walk already past that position (a cache
-- re-reading after a gap, a reconnect or a summary, docs/protocol.md
-- "Memory changes") does not list it. It is now a change too: a
-- context.stored of the item as it is, so such a cache converges. Text
-- changes stay context.updated; the rest is 024's.
CREATE OR REPLACE FUNCTION memoryd_context_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF memoryd_changes_quiet() THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
        INSERT INTO memory_changes (user_id, payload)
        VALUES (OLD.user_id, jsonb_build_object('type', 'context.deleted', 'id', OLD.id));
    ELSIF TG_OP = 'INSERT' OR NEW.question IS DISTINCT FROM OLD.question OR NEW.answer IS DISTINCT FROM OLD.answer
        OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        INSERT INTO memory_changes (user_id, payload)
        VALUES (NEW.user_id, jsonb_strip_nulls(jsonb_build_object(
            'type', CASE WHEN TG_OP = 'UPDATE' AND (NEW.question IS DISTINCT FROM OLD.question OR NEW.answer IS DISTINCT FROM OLD.answer)
                         THEN 'context.updated' ELSE 'context.stored' END,
            'id', NEW.id, 'question', NEW.question, 'answer', NEW.answer,
            'scope', nullif(NEW.scope, ''), 'event_id', nullif(NEW.event_id, ''))));
    END IF;
    RETURN NULL;
END
$$;
