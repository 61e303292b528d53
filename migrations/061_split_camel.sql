-- The words of camelCase and PascalCase names are searchable. Postgres'
-- parser keeps "MaxAckPending", "CopyFrom", "getUserName" and
-- "HTTPServer" as one lexeme each, while a message is searched by its
-- words in lower case (enricher.Keywords): "max ack pending",
-- "max_ack_pending" or "what does CopyFrom do" typed "copy from" found
-- none of them, and in a knowledge base of code documentation (a walk over
-- 289 Go modules' READMEs and CHANGELOGs) such a name is often the rare
-- word a question is about. Now an indexed text's words that join an
-- ASCII lower-case letter to a capital ("maxAck"), or a capital or digit
-- to a capitalised word ("HTTPServer", "utf8Decode"), are indexed twice:
-- whole, where they stand, as before (so "MaxAckPending" typed as one word,
-- in any case, still finds it), and in their parts ("Max Ack Pending",
-- "HTTP Server", "utf8 Decode") after the text's own words: the parts'
-- positions follow the text's last, so that a phrase of the text is not
-- broken by them and a phrase of the parts ("max ack pending") is one. A
-- capital followed by fewer than two lower-case letters does not start a
-- part, so plurals of acronyms ("URLs", "IDs", "CDs") are one word.
-- Only what is indexed changes; queries are read as before, and the
-- stored text stays as sent.
--
-- Cost on an existing database: the function is replaced (new items and
-- chunks are indexed with it at once), and the items and chunks holding
-- such a name are re-indexed below, inside this migration's transaction,
-- as in 056 and 058 (see docs/operations.md, "Upgrading past migration
-- 061").
--
-- memoryd_camel is the filter: text without such a join (most chat text)
-- costs one test and gives '', whose vector is empty. It is not STRICT
-- and holds no sub-SELECT, so it is inlined into its callers;
-- memoryd_camel_words, which reads the names, is a function of its own.
-- A name is a run of the letters 058 folds and digits, so that
-- "ÜberCool" is "Über Cool" (folded, as the text's words are, to "uber
-- cool"), not "ber Cool"; a join is ASCII's.
CREATE OR REPLACE FUNCTION memoryd_camel_words(t text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT coalesce((SELECT string_agg(
        regexp_replace(regexp_replace(m[1], '([a-z])([A-Z])', '\1 \2', 'g'), '([A-Z0-9])([A-Z][a-z][a-z])', '\1 \2', 'g'), ' ')
    FROM regexp_matches(t, '([0-9A-Za-z\u00c0-\u024f\u0300-\u036f\u1e00-\u1eff]*(?:[a-z][A-Z]|[A-Z0-9][A-Z][a-z][a-z])[0-9A-Za-z\u00c0-\u024f\u0300-\u036f\u1e00-\u1eff]*)', 'g') AS x(m)), '')
$$;

CREATE OR REPLACE FUNCTION memoryd_camel(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN t ~ '[a-z][A-Z]|[A-Z0-9][A-Z][a-z][a-z]' THEN memoryd_camel_words(t) ELSE '' END
$$;

DO $migration$
BEGIN
    -- As 049 and the migrations after it, only on a UTF8 database: on any
    -- other, memoryd_tsvector is 020's and is left as it was.
    IF current_setting('server_encoding') <> 'UTF8' THEN
        RAISE NOTICE 'memoryd 061: server encoding is %, not UTF8: camelCase names stay whole', current_setting('server_encoding');
        RETURN;
    END IF;

    -- memoryd_tsvector is used for what is stored (items, chunks) only;
    -- memoryd_tsquery and memoryd_query_terms, the query side, are 058's.
    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_tsvector(config text, t text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT to_tsvector(config::regconfig, memoryd_cjk(memoryd_split(memoryd_fold(memoryd_nfkc(t)))))
        || to_tsvector(config::regconfig, memoryd_fold(memoryd_camel(t)))
    $$
    $f$;

    -- Re-index the items and chunks holding such a name. Naming ts_config
    -- fires context_tsvector_trg (migration 031) and context_terms_update_trg
    -- (025); no memory change is recorded (024).
    UPDATE context SET ts_config = ts_config
    WHERE memoryd_camel(question) <> '' OR memoryd_camel(answer) <> '';

    UPDATE doc_chunks SET
        search = setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B'),
        heading_len = length(memoryd_tsvector(ts_config, heading)),
        text_len = length(memoryd_tsvector(ts_config, text))
    WHERE memoryd_camel(heading) <> '' OR memoryd_camel(text) <> '';

    -- What a process of the previous release wrote while this ran, with
    -- the old function, after the re-index above read the tables: writers
    -- wait from here to the commit, and those rows are indexed again (as
    -- in 048, 049, 056 and 058).
    LOCK TABLE context, doc_chunks IN SHARE MODE;
    UPDATE context SET ts_config = ts_config
    WHERE inserted_at >= now() - interval '10 minutes'
      AND (memoryd_camel(question) <> '' OR memoryd_camel(answer) <> '')
      AND search IS DISTINCT FROM setweight(memoryd_tsvector(ts_config, question), 'A') || setweight(memoryd_tsvector(ts_config, answer), 'B');
    UPDATE doc_chunks SET
        search = setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B'),
        heading_len = length(memoryd_tsvector(ts_config, heading)),
        text_len = length(memoryd_tsvector(ts_config, text))
    WHERE (memoryd_camel(heading) <> '' OR memoryd_camel(text) <> '')
      AND search IS DISTINCT FROM setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B');
END
$migration$;
