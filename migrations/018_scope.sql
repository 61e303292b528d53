-- Scope (issue 16 item 7): an optional label a frontend puts on a turn (a
-- conversation, agent or app id) so that enrich, search and context.list can
-- read only the context items of that scope. '' is no scope. Facts are
-- user-wide and carry none.
ALTER TABLE turns ADD COLUMN scope text NOT NULL DEFAULT '';
ALTER TABLE context ADD COLUMN scope text NOT NULL DEFAULT '';

-- A context item extracted from a turn inherits the turn's scope. Set here,
-- where every path that inserts an extracted item passes (the extraction
-- job, the re-extraction after a spend cap's reset), rather than by each
-- caller: the turn is locked by the transaction that inserts its items, so
-- its row is there to read. An insert that names a scope (an import) keeps
-- it; an item stored directly (event_id '') has no turn and no scope.
CREATE FUNCTION memoryd_context_scope() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.scope = '' AND NEW.event_id <> '' THEN
        NEW.scope := coalesce((SELECT t.scope FROM turns t WHERE t.user_id = NEW.user_id AND t.event_id = NEW.event_id), '');
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER context_scope_trg BEFORE INSERT ON context
    FOR EACH ROW EXECUTE FUNCTION memoryd_context_scope();

-- Serves the scoped reads: a scoped search's candidates and statistics (the
-- statistics index-only, as context_user_len_idx does for the whole user)
-- and a scoped context.list page (one range scan, no sort).
CREATE INDEX context_user_scope_idx ON context (user_id, scope, created_at DESC, id DESC)
    INCLUDE (question_len, answer_len);
