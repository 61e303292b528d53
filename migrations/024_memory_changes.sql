-- Memory change events (issue 20 item 4): a transactional outbox. Every
-- change of a user's facts or context items is written here by a trigger in
-- the transaction that makes it, so that no write path can skip it and
-- nothing of a rolled-back transaction is ever there; the publisher
-- (worker.Changes) sends the rows on <prefix>.changes.<token> after they
-- committed and deletes them once NATS has them.
--
-- seq numbers a user's changes in commit order, from 1, without gaps: it is
-- assigned at commit time (a deferred trigger) from the user's counter row,
-- whose row lock the transaction then holds until it commits, so the next
-- writer of the same user numbers after it. A plain sequence would not do:
-- ids are drawn in statement order, not commit order. A rollback rolls the
-- counter back. seq is NULL only inside the transaction that wrote the row.
CREATE TABLE memory_change_seqs (
    user_id text   PRIMARY KEY,
    seq     bigint NOT NULL
);

CREATE TABLE memory_changes (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id    text        NOT NULL,
    seq        bigint,
    -- The change without user_id, seq and at (events.Change's other fields).
    payload    jsonb       NOT NULL,
    -- When it was numbered, at commit: the change's at.
    created_at timestamptz NOT NULL DEFAULT now()
);
-- The publisher's reads: a user's pending changes in order, the users with
-- pending changes, and the oldest (MaxAge).
CREATE UNIQUE INDEX memory_changes_user_seq_idx ON memory_changes (user_id, seq);
CREATE INDEX memory_changes_unnumbered_idx ON memory_changes (user_id, id) WHERE seq IS NULL;
CREATE INDEX memory_changes_created_idx ON memory_changes (created_at);

-- The row triggers stay silent while the transaction-local setting
-- memoryd.changes_quiet is 'on': a forget, a clear of all items, a reset
-- before a replay and an import write one summary change instead of one per
-- row (store/changes.go).
CREATE FUNCTION memoryd_changes_quiet() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce(current_setting('memoryd.changes_quiet', true), '') = 'on'
$$;

-- A facts row inserted, its value changed, or deleted. The source event is
-- the one memoryd.fact_change names (see 017_fact_items.sql), else the
-- row's own for a set (a delete without it is a direct clear).
CREATE FUNCTION memoryd_fact_change() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    c jsonb := nullif(current_setting('memoryd.fact_change', true), '')::jsonb;
BEGIN
    IF memoryd_changes_quiet() OR (TG_OP = 'UPDATE' AND NEW.value IS NOT DISTINCT FROM OLD.value) THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
        INSERT INTO memory_changes (user_id, payload)
        VALUES (OLD.user_id, jsonb_strip_nulls(jsonb_build_object('type', 'fact.removed', 'key', OLD.key,
            'old_value', OLD.value, 'event_id', nullif(coalesce(c->>'event_id', ''), ''))));
    ELSE
        INSERT INTO memory_changes (user_id, payload)
        VALUES (NEW.user_id, jsonb_strip_nulls(jsonb_build_object('type', 'fact.set', 'key', NEW.key,
            'old_value', CASE WHEN TG_OP = 'UPDATE' THEN OLD.value END, 'value', NEW.value,
            'event_id', nullif(coalesce(c->>'event_id', NEW.event_id), ''))));
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER facts_changes_trg AFTER INSERT OR UPDATE OR DELETE ON facts
    FOR EACH ROW EXECUTE FUNCTION memoryd_fact_change();

-- A context item stored, its question or answer changed (context.update),
-- or deleted (clear, context.delete, pruning). A stored pair that was
-- already there (dedup) only moves its time: no change.
CREATE FUNCTION memoryd_context_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF memoryd_changes_quiet() THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
        INSERT INTO memory_changes (user_id, payload)
        VALUES (OLD.user_id, jsonb_build_object('type', 'context.deleted', 'id', OLD.id));
    ELSIF TG_OP = 'INSERT' OR NEW.question IS DISTINCT FROM OLD.question OR NEW.answer IS DISTINCT FROM OLD.answer THEN
        INSERT INTO memory_changes (user_id, payload)
        VALUES (NEW.user_id, jsonb_strip_nulls(jsonb_build_object(
            'type', CASE WHEN TG_OP = 'INSERT' THEN 'context.stored' ELSE 'context.updated' END,
            'id', NEW.id, 'question', NEW.question, 'answer', NEW.answer,
            'scope', nullif(NEW.scope, ''), 'event_id', nullif(NEW.event_id, ''))));
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER context_changes_trg AFTER INSERT OR UPDATE OR DELETE ON context
    FOR EACH ROW EXECUTE FUNCTION memoryd_context_change();

-- At commit: number the transaction's changes. The first firing numbers
-- them all (later ones find none), user by user in user order, so that two
-- transactions changing several users lock the counters in the same order;
-- within a user, in the order they were written. Then wake the publishers:
-- pg_notify is delivered at commit, with the schema as payload, since
-- every schema of the database shares the channel.
CREATE FUNCTION memoryd_number_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    u    text;
    n    bigint;
    last bigint;
BEGIN
    IF (SELECT seq FROM memory_changes WHERE id = NEW.id) IS NOT NULL THEN
        RETURN NULL; -- numbered by an earlier firing: one lookup, not a scan
    END IF;
    FOR u, n IN SELECT user_id, count(*) FROM memory_changes WHERE seq IS NULL GROUP BY user_id ORDER BY user_id LOOP
        INSERT INTO memory_change_seqs AS s (user_id, seq) VALUES (u, n)
        ON CONFLICT (user_id) DO UPDATE SET seq = s.seq + excluded.seq
        RETURNING seq INTO last;
        UPDATE memory_changes c SET seq = last - n + r.rn, created_at = clock_timestamp()
        FROM (SELECT id, row_number() OVER (ORDER BY id) AS rn FROM memory_changes
              WHERE user_id = u AND seq IS NULL) r
        WHERE c.id = r.id;
        PERFORM pg_notify('memoryd_changes', current_schema());
    END LOOP;
    RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER memory_changes_number_trg AFTER INSERT ON memory_changes
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION memoryd_number_changes();
