-- The functions that index a context item (and a chunk) and parse a
-- query are no longer parsed and planned again in every transaction. A
-- LANGUAGE sql function that Postgres does not inline is run by its SQL
-- function executor, which (up to Postgres 17) parses, analyses and plans
-- the function's body again in every transaction, and, for a function it
-- calls that is not inlined either, in every call: CPU profiles of a
-- backend storing LongMemEval turns (one item a transaction, as a
-- worker's default job of one turn saves it) showed a third of its CPU in
-- that executor and about a sixth of it parsing and planning those bodies,
-- twice as much as to_tsvector itself (docs/performance.md, "Postgres CPU
-- of storing an item"). None of these is inlined today:
--
-- - memoryd_tsvector_base and memoryd_camel_tsvector (061), which
--   context_tsvector_trg calls for an item's question and answer, and
--   memoryd_tsvector: declared immutable, their bodies cast the
--   configuration's name with ::regconfig, which is only stable, and
--   Postgres inlines no function whose body is more volatile than its
--   declaration.
-- - memoryd_split (056): STRICT with a CASE body (Postgres inlines a
--   strict function only when its body is strict too, and a CASE is not).
-- - memoryd_fold and memoryd_split as arguments of one another: Postgres
--   does not inline a function that reads its parameter more than once
--   (these do) when the argument is more than a few operators, and the
--   argument is the inlined function before it (memoryd_fold of
--   memoryd_nfkc's CASE). memoryd_tsquery and memoryd_query_terms are
--   inlined into enrich's recall statement, but their memoryd_fold and
--   memoryd_split were run by the SQL function executor, and where the
--   query text is a constant (a recall's custom plan) Postgres evaluated
--   memoryd_nfkc, memoryd_fold, memoryd_split and memoryd_cjk while
--   planning, each through that executor: planned again in every recall.
-- - memoryd_fold_words (058) and memoryd_camel_words (061): their bodies
--   hold a sub-SELECT, which Postgres never inlines.
-- - memoryd_item_terms (031) and memoryd_chunk_terms (027), the term rows
--   of context_terms_insert_trg and chunk_terms_insert_trg: a set-returning
--   function is inlined only when it is not STRICT.
--
-- PL/pgSQL, by contrast, plans each statement of a function once per
-- session and keeps the plan. So:
--
-- - memoryd_search_text is the text an item's words are read from and a
--   query is parsed from (058's pipeline, NFKC, folded, split, bigrams),
--   in PL/pgSQL, one step a statement: each step's argument is a
--   variable, so each of those SQL functions is inlined into its step's
--   cached plan.
-- - memoryd_tsvector_base and memoryd_camel_tsvector are PL/pgSQL, and
--   memoryd_tsvector (their concatenation) is now inlined; memoryd_tsquery
--   and memoryd_query_terms call memoryd_search_text, and stay inlined
--   into the recall statement.
-- - memoryd_fold_words and memoryd_camel_words are PL/pgSQL returning the
--   same SELECT.
-- - memoryd_split, memoryd_item_terms and memoryd_chunk_terms are no
--   longer STRICT, so that they are inlined. Their results for NULL are
--   unchanged (NULL, and no rows).
--
-- Every function returns what it returned before, for every input
-- (TestMigration071KeepsEveryOutput compares them over a corpus of
-- languages, scripts, code, empty and 256 KiB texts, and the rows stored
-- before it): no item or chunk is re-indexed, no table is rewritten or
-- locked, and processes of the previous release, which call the functions
-- by name, get the new ones at their next transaction. Names, arguments,
-- volatility and PARALLEL SAFE stay as they were.
--
-- As 049 to 061, the functions of a UTF8 database only: on any other,
-- memoryd_tsvector is still 020's (CJK bigrams of the text), which is made
-- PL/pgSQL, and memoryd_camel_tsvector returns an empty vector in
-- PL/pgSQL; memoryd_tsquery and memoryd_query_terms are inlined there
-- already.

-- memoryd_number_changes (037), the deferred trigger that numbers a
-- commit's changes, plans its UPDATE of the changes at every commit (its
-- ids are an array parameter whose length only a custom plan knows). It
-- is left so: forcing its generic plans kept plans made on a drained
-- outbox, which read the whole outbox once it filled (a review,
-- TestChangeNumberingKeepsToThePrimaryKeyAsTheOutboxGrows), and planning
-- it is about 3 % of a storing backend's CPU.

ALTER FUNCTION memoryd_item_terms(tsvector) CALLED ON NULL INPUT;
ALTER FUNCTION memoryd_chunk_terms(tsvector) CALLED ON NULL INPUT;

CREATE OR REPLACE FUNCTION memoryd_camel_words(t text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
    RETURN coalesce((SELECT string_agg(
            regexp_replace(regexp_replace(m[1], '([a-z])([A-Z])', '\1 \2', 'g'), '([A-Z0-9])([A-Z][a-z][a-z])', '\1 \2', 'g'), ' ')
        FROM regexp_matches(CASE WHEN strpos(t, '%') > 0 THEN regexp_replace(t, '%[0-9A-Fa-f]{2}', ' ', 'g') ELSE t END,
            '([0-9A-Za-z\u00c0-\u024f\u0300-\u036f\u1e00-\u1eff]*(?:[a-z][A-Z]|[A-Z0-9][A-Z][a-z][a-z])[0-9A-Za-z\u00c0-\u024f\u0300-\u036f\u1e00-\u1eff]*)', 'g') AS x(m)), '');
END
$$;

DO $migration$
BEGIN
    IF current_setting('server_encoding') <> 'UTF8' THEN
        EXECUTE $f$
        CREATE OR REPLACE FUNCTION memoryd_tsvector(config text, t text) RETURNS tsvector
        LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
        BEGIN
            RETURN to_tsvector(config::regconfig, memoryd_cjk(t));
        END
        $$
        $f$;
        EXECUTE $f$
        CREATE OR REPLACE FUNCTION memoryd_camel_tsvector(config text, t text) RETURNS tsvector
        LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
        BEGIN
            RETURN ''::tsvector;
        END
        $$
        $f$;
        RETURN;
    END IF;

    ALTER FUNCTION memoryd_split(text) CALLED ON NULL INPUT;

    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_fold_words(t text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
    BEGIN
        RETURN normalize(replace(replace(replace(replace(replace(replace(translate(
            (SELECT string_agg(CASE WHEN m[1] IS NULL OR m[1] ~ '[\u031b\u0323\u0309]|[\u0300-\u036f][\u0300-\u036f]' THEN coalesce(m[1], m[2])
                    ELSE regexp_replace(m[1], '([A-Za-z\u00c0-\u024f\u1e00-\u1eff])[\u0300-\u036f]', '\1', 'g') END, '' ORDER BY o)
             FROM regexp_matches(normalize(t, NFD), '([0-9A-Za-z\u00c0-\u024f\u0300-\u036f\u1e00-\u1eff]+)|([^0-9A-Za-z\u00c0-\u024f\u0300-\u036f\u1e00-\u1eff]+)', 'g') WITH ORDINALITY AS x(m, o)),
            'øØłŁı', 'oOlLi'), 'ß', 'ss'), 'ẞ', 'SS'), 'æ', 'ae'), 'Æ', 'AE'), 'œ', 'oe'), 'Œ', 'OE'), NFC);
    END
    $$
    $f$;

    -- 058's memoryd_cjk(memoryd_split(memoryd_fold(memoryd_nfkc(t)))).
    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_search_text(t text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
    BEGIN
        t := memoryd_nfkc(t);
        t := memoryd_fold(t);
        t := memoryd_split(t);
        RETURN memoryd_cjk(t);
    END
    $$
    $f$;

    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_tsvector_base(config text, t text) RETURNS tsvector
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
    BEGIN
        RETURN to_tsvector(config::regconfig, memoryd_search_text(t));
    END
    $$
    $f$;

    -- 061's to_tsvector(config::regconfig, memoryd_fold(memoryd_camel(t))).
    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_camel_tsvector(config text, t text) RETURNS tsvector
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
    BEGIN
        t := memoryd_camel(t);
        RETURN to_tsvector(config::regconfig, memoryd_fold(t));
    END
    $$
    $f$;

    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_tsquery(config text, q text) RETURNS tsquery
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT to_tsquery(config::regconfig, memoryd_search_text(q))
    $$
    $f$;

    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_query_terms(config text, q text) RETURNS text[]
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT tsvector_to_array(to_tsvector(config::regconfig, memoryd_search_text(q)))
    $$
    $f$;
END
$migration$;
