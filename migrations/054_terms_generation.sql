-- An item's lexemes (context_terms) changing moves its user's embedding
-- generation (021), whatever changed them: an edit did already (its
-- content hash), but a change of the user's language re-indexes every
-- item with the same text, and so does a migration that re-reads the
-- text search configuration (048, 049). enricher.PrunedRead reads a heavy
-- user's candidates in two statements and compares the generation across
-- them: an item whose lexemes changed in between may have moved from the
-- second read's candidates to the first's and be in neither. Bumped here,
-- where context_terms changes, the rule holds for every writer, present
-- and future. Users are bumped in user_id order, as 021's functions do, so
-- that two statements touching the same users lock their rows in the same
-- order; a vector cache of the user's (enricher) reloads once.
CREATE OR REPLACE FUNCTION memoryd_context_terms_update() RETURNS trigger
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
    INSERT INTO embedding_generations AS g (user_id, generation)
    SELECT u, nextval('embedding_generation_seq')
    FROM (SELECT n.user_id AS u FROM new_items n JOIN old_items o ON o.id = n.id
            WHERE n.search IS DISTINCT FROM o.search OR n.user_id <> o.user_id
        UNION -- distinct: one bump a user
        SELECT o.user_id FROM new_items n JOIN old_items o ON o.id = n.id
            WHERE n.user_id <> o.user_id
        ORDER BY 1) x
    ON CONFLICT (user_id) DO UPDATE SET generation = excluded.generation;
    RETURN NULL;
END
$$;
