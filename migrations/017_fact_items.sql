-- List-valued facts (issue 16 item 1): a list key (allergies, languages,
-- pets: the events vocabulary says which) holds a set of items, each added
-- and removed on its own. A row is one item's latest operation, the last
-- writer by source time (ties: a direct write, then the larger event id, an
-- add over a remove, the larger value): present after an add, a tombstone
-- after a remove. An item stated no later than the key's clear (fact_clears)
-- is not present. The key's facts row is materialised from the present
-- items by the store (store/factitems.go), so every read path keeps reading
-- facts alone.
CREATE TABLE fact_items (
    user_id         text        NOT NULL,
    key             text        NOT NULL,
    -- The item's identity: its value lowercased, white space collapsed.
    item            text        NOT NULL,
    -- The value as stated by the latest operation.
    value           text        NOT NULL,
    present         boolean     NOT NULL,
    source_at       timestamptz NOT NULL,
    event_id        text        NOT NULL DEFAULT '',
    conversation_id text        NOT NULL DEFAULT '',
    extractor       text        NOT NULL DEFAULT '',
    model           text        NOT NULL DEFAULT '',
    prompt_version  text        NOT NULL DEFAULT '',
    PRIMARY KEY (user_id, key, item)
);

-- Value tombstones of single-valued keys: a delete at cleared_at of one
-- value ("I don't live in Berlin anymore"), by the value's identity (as a
-- list item's, above), the latest kept. A value stated no later than it is
-- not written; its statement still superseded the values before it, so
-- the key is cleared at the value's source time instead (fact_clears). A
-- delete without a value is a clear of the key alone.
CREATE TABLE fact_value_clears (
    user_id    text        NOT NULL,
    key        text        NOT NULL,
    item       text        NOT NULL,
    cleared_at timestamptz NOT NULL,
    PRIMARY KEY (user_id, key, item)
);

-- History entries say which operation changed a fact: besides 'set' and
-- 'clear', 'add' and 'remove' (a list key's items) and 'delete' (a turn said
-- the fact is no longer true). The store names the operation and its source
-- (turn, conversation, source time) in the transaction-local setting
-- memoryd.fact_change (a JSON object: op, event_id, conversation_id,
-- source_at) before the statement that changes the row, and resets it after;
-- without it an insert or update is a 'set' from the row's own source and a
-- deletion a 'clear'.
CREATE OR REPLACE FUNCTION memoryd_fact_history() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    c jsonb := nullif(current_setting('memoryd.fact_change', true), '')::jsonb;
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.value IS NOT DISTINCT FROM OLD.value THEN
        RETURN NULL;
    END IF;
    IF c IS NOT NULL AND TG_OP = 'DELETE' THEN
        INSERT INTO fact_history (user_id, key, old_value, new_value, event_id, conversation_id, source_at, op)
        VALUES (OLD.user_id, OLD.key, OLD.value, NULL,
                coalesce(c->>'event_id', ''), coalesce(c->>'conversation_id', ''), (c->>'source_at')::timestamptz, c->>'op');
    ELSIF c IS NOT NULL THEN
        INSERT INTO fact_history (user_id, key, old_value, new_value, event_id, conversation_id, source_at, op)
        VALUES (NEW.user_id, NEW.key, CASE WHEN TG_OP = 'UPDATE' THEN OLD.value END, NEW.value,
                coalesce(c->>'event_id', ''), coalesce(c->>'conversation_id', ''), (c->>'source_at')::timestamptz, c->>'op');
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO fact_history (user_id, key, old_value, new_value, event_id, conversation_id, source_at, op)
        VALUES (NEW.user_id, NEW.key, NULL, NEW.value, NEW.event_id, NEW.conversation_id, NEW.source_at, 'set');
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO fact_history (user_id, key, old_value, new_value, event_id, conversation_id, source_at, op)
        VALUES (NEW.user_id, NEW.key, OLD.value, NEW.value, NEW.event_id, NEW.conversation_id, NEW.source_at, 'set');
    ELSE
        INSERT INTO fact_history (user_id, key, old_value, new_value, event_id, conversation_id, source_at, op)
        VALUES (OLD.user_id, OLD.key, OLD.value, NULL, '', '', NULL, 'clear');
    END IF;
    RETURN NULL;
END
$$;

-- The clears made by direct writes (facts.clear, and facts.set of a whole
-- list), beside fact_clears, which holds every clear: extracted deletes and
-- list sets record theirs there too. A reset before a replay drops the
-- extracted clears (the replay makes them again, maybe otherwise, with
-- another model) and keeps these. Clears recorded before this migration
-- were all made by facts.clear.
CREATE TABLE fact_direct_clears (
    user_id    text        NOT NULL,
    key        text        NOT NULL,
    cleared_at timestamptz NOT NULL,
    PRIMARY KEY (user_id, key)
);
INSERT INTO fact_direct_clears (user_id, key, cleared_at) SELECT user_id, key, cleared_at FROM fact_clears;
