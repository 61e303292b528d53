-- The write cost of a context item (issue 18, ingest of real text). On
-- LongMemEval turns (~2 KB) most of an item's insert was text search
-- parsing and the term statistics of migration 025 (docs/performance.md,
-- "Ingest of real text: where the time goes"):
--
-- 1. The generated columns search, question_len and answer_len each parsed
--    their text: the question and the answer were parsed twice each. They
--    become plain columns (DROP EXPRESSION keeps every stored value and
--    does not rewrite the table) that one BEFORE trigger fills from one
--    parse of each text: the same values, half the parsing. The trigger
--    runs on every insert and on every update that names a text, the
--    language or one of the derived columns, so nothing else can set them
--    (as with generated columns); an update of other columns (created_at
--    on a duplicate's upsert, scope, flags) no longer parses at all.
--    BEFORE row triggers run in name order: context_tsvector_trg after
--    context_ts_config_trg (020), which sets the item's configuration.
--
-- 2. memoryd_item_terms counted each lexeme's weights with two correlated
--    subqueries; array_positions does it in one pass (about 4× faster on
--    real items). Same rows: a lexeme without positions (weights NULL)
--    counts 0 and 0.
CREATE OR REPLACE FUNCTION memoryd_item_terms(v tsvector)
RETURNS TABLE (lexeme text, question smallint, answer smallint)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT u.lexeme, q::smallint, (coalesce(cardinality(u.weights), 0) - q)::smallint
FROM unnest(v) u, LATERAL coalesce(cardinality(array_positions(u.weights, 'A')), 0) q
$$;

ALTER TABLE context
    ALTER COLUMN search DROP EXPRESSION,
    ALTER COLUMN question_len DROP EXPRESSION,
    ALTER COLUMN answer_len DROP EXPRESSION;

-- memoryd_context_search sets an item's search vector and field lengths as
-- the generated columns of 020 did, from one parse of each text.
CREATE FUNCTION memoryd_context_search() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    qv tsvector := memoryd_tsvector(NEW.ts_config, NEW.question);
    av tsvector := memoryd_tsvector(NEW.ts_config, NEW.answer);
BEGIN
    NEW.search := setweight(qv, 'A') || setweight(av, 'B');
    NEW.question_len := length(qv);
    NEW.answer_len := length(av);
    RETURN NEW;
END
$$;
CREATE TRIGGER context_tsvector_trg BEFORE INSERT OR UPDATE OF question, answer, ts_config, search, question_len, answer_len ON context
    FOR EACH ROW EXECUTE FUNCTION memoryd_context_search();
