-- Term statistics stored at write time (issue 18): one row per context item
-- and lexeme of its search vector, with the lexeme's positions in the
-- question (weight A) and in the answer (any other weight), exactly what
-- store's termCounts decodes from the vector's text at read time. A recall
-- whose query is an OR of lexemes (every query but phrases) reads only the
-- rows of the query's lexemes, index-only from the primary key, instead of
-- matching and decoding every one of the user's vectors (on real
-- conversations, ~600 items of ~2 KB vectors a user: docs/performance.md,
-- "Realistic corpus: rank first / term statistics").
--
-- The rows follow the vectors by statement triggers on context, whatever
-- writes it (extraction, memory.store, context.update, import, a change of
-- language, clear, prune, forget): no writer can forget them. A delete
-- removes an item's rows by the primary key (its vector names its
-- lexemes), so no index on item_id is needed.
--
-- Cost: about one row per distinct lexeme of an item (~110 for a real
-- conversation turn of ~2 KB, ~20 for a short synthetic item), measured in
-- docs/performance.md; on an existing database the backfill below reads
-- every item once, inside this migration's transaction.
CREATE TABLE context_terms (
    user_id  text     NOT NULL,
    lexeme   text     NOT NULL,
    item_id  bigint   NOT NULL,
    question smallint NOT NULL,
    answer   smallint NOT NULL,
    PRIMARY KEY (user_id, lexeme, item_id) INCLUDE (question, answer)
);

-- memoryd_item_terms is the rows of one item's vector: a lexeme without
-- positions counts 0 and 0 (it is present all the same). A lexeme keeps at
-- most 256 positions in a tsvector, so smallint holds its counts.
CREATE FUNCTION memoryd_item_terms(v tsvector)
RETURNS TABLE (lexeme text, question smallint, answer smallint)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT u.lexeme,
    coalesce((SELECT count(*) FROM unnest(u.weights) w WHERE w = 'A'), 0)::smallint,
    coalesce((SELECT count(*) FROM unnest(u.weights) w WHERE w <> 'A'), 0)::smallint
FROM unnest(v) u
$$;

CREATE FUNCTION memoryd_context_terms_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO context_terms (user_id, lexeme, item_id, question, answer)
    SELECT n.user_id, t.lexeme, n.id, t.question, t.answer
    FROM new_items n, memoryd_item_terms(n.search) t;
    RETURN NULL;
END
$$;

-- An update replaces the rows of the items whose vector (or user) changed;
-- other updates (a turn's scope, an embedding flag) cost a join of the
-- statement's rows only.
CREATE FUNCTION memoryd_context_terms_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM context_terms t
    USING (SELECT o.user_id, o.id, unnest(tsvector_to_array(o.search)) AS lexeme
        FROM old_items o JOIN new_items n ON n.id = o.id
        WHERE n.search IS DISTINCT FROM o.search OR n.user_id <> o.user_id) d
    WHERE t.user_id = d.user_id AND t.lexeme = d.lexeme AND t.item_id = d.id;
    INSERT INTO context_terms (user_id, lexeme, item_id, question, answer)
    SELECT n.user_id, t.lexeme, n.id, t.question, t.answer
    FROM new_items n JOIN old_items o ON o.id = n.id, memoryd_item_terms(n.search) t
    WHERE n.search IS DISTINCT FROM o.search OR n.user_id <> o.user_id;
    RETURN NULL;
END
$$;

CREATE FUNCTION memoryd_context_terms_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM context_terms t
    USING (SELECT o.user_id, o.id, unnest(tsvector_to_array(o.search)) AS lexeme FROM old_items o) d
    WHERE t.user_id = d.user_id AND t.lexeme = d.lexeme AND t.item_id = d.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER context_terms_insert_trg AFTER INSERT ON context
    REFERENCING NEW TABLE AS new_items
    FOR EACH STATEMENT EXECUTE FUNCTION memoryd_context_terms_insert();
CREATE TRIGGER context_terms_update_trg AFTER UPDATE ON context
    REFERENCING OLD TABLE AS old_items NEW TABLE AS new_items
    FOR EACH STATEMENT EXECUTE FUNCTION memoryd_context_terms_update();
CREATE TRIGGER context_terms_delete_trg AFTER DELETE ON context
    REFERENCING OLD TABLE AS old_items
    FOR EACH STATEMENT EXECUTE FUNCTION memoryd_context_terms_delete();

-- A TRUNCATE of context (tests, a reset) empties the terms too.
CREATE FUNCTION memoryd_context_terms_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE context_terms;
    RETURN NULL;
END
$$;
CREATE TRIGGER context_terms_truncate_trg AFTER TRUNCATE ON context
    FOR EACH STATEMENT EXECUTE FUNCTION memoryd_context_terms_truncate();

INSERT INTO context_terms (user_id, lexeme, item_id, question, answer)
SELECT c.user_id, t.lexeme, c.id, t.question, t.answer
FROM context c, memoryd_item_terms(c.search) t;
