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
-- stored text stays as sent. A field's length (context's question_len
-- and answer_len, doc_chunks' heading_len and text_len: the lexemes BM25
-- normalises by) counts the text's own words, not the parts: counted, a
-- chunk dense with names (a CHANGELOG's) grew 25% longer where the
-- average grew 6%, and its rare name ("CopyFrom") fell out of the top 5
-- (a knowledge-base walk).
--
-- memoryd_tsvector_base is the text's own vector (058's memoryd_tsvector),
-- memoryd_camel_tsvector the parts', and memoryd_tsvector their
-- concatenation, so that every reader of memoryd_tsvector (the re-index
-- statements of the upgrade notes, tests) sees the vector stored.
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
-- cool"), not "ber Cool"; a join is ASCII's. A URL's escapes are not
-- names: "is%3Aissue" is not "3 Aissue" (a knowledge-base walk found
-- "aissu" and "aopen" indexed from GitHub links).
CREATE OR REPLACE FUNCTION memoryd_camel_words(t text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT coalesce((SELECT string_agg(
        regexp_replace(regexp_replace(m[1], '([a-z])([A-Z])', '\1 \2', 'g'), '([A-Z0-9])([A-Z][a-z][a-z])', '\1 \2', 'g'), ' ')
    FROM regexp_matches(CASE WHEN strpos(t, '%') > 0 THEN regexp_replace(t, '%[0-9A-Fa-f]{2}', ' ', 'g') ELSE t END,
        '([0-9A-Za-z\u00c0-\u024f\u0300-\u036f\u1e00-\u1eff]*(?:[a-z][A-Z]|[A-Z0-9][A-Z][a-z][a-z])[0-9A-Za-z\u00c0-\u024f\u0300-\u036f\u1e00-\u1eff]*)', 'g') AS x(m)), '')
$$;

CREATE OR REPLACE FUNCTION memoryd_camel(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE WHEN t ~ '[a-z][A-Z]|[A-Z0-9][A-Z][a-z][a-z]' THEN memoryd_camel_words(t) ELSE '' END
$$;

-- An item's vector with the parts, its lengths without them (031's
-- trigger otherwise, one parse of each text). Replaced before the DO block
-- below, whose re-index fires it; the functions it calls are made there.
CREATE OR REPLACE FUNCTION memoryd_context_search() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    qb tsvector := memoryd_tsvector_base(NEW.ts_config, NEW.question);
    ab tsvector := memoryd_tsvector_base(NEW.ts_config, NEW.answer);
BEGIN
    NEW.search := setweight(qb || memoryd_camel_tsvector(NEW.ts_config, NEW.question), 'A')
        || setweight(ab || memoryd_camel_tsvector(NEW.ts_config, NEW.answer), 'B');
    NEW.question_len := length(qb);
    NEW.answer_len := length(ab);
    RETURN NEW;
END
$$;

DO $migration$
DECLARE
    v_from bigint;
BEGIN
    -- As 049 and the migrations after it, only on a UTF8 database: on any
    -- other, memoryd_tsvector is left as it was, the base is it and there
    -- are no parts (the functions exist, which store/ and the trigger call).
    IF current_setting('server_encoding') <> 'UTF8' THEN
        RAISE NOTICE 'memoryd 061: server encoding is %, not UTF8: camelCase names stay whole', current_setting('server_encoding');
        EXECUTE $f$
        CREATE OR REPLACE FUNCTION memoryd_tsvector_base(config text, t text) RETURNS tsvector
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT memoryd_tsvector(config, t) $$
        $f$;
        EXECUTE $f$
        CREATE OR REPLACE FUNCTION memoryd_camel_tsvector(config text, t text) RETURNS tsvector
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT ''::tsvector $$
        $f$;
        RETURN;
    END IF;

    -- Used for what is stored (items, chunks) only; memoryd_tsquery and
    -- memoryd_query_terms, the query side, are 058's.
    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_tsvector_base(config text, t text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT to_tsvector(config::regconfig, memoryd_cjk(memoryd_split(memoryd_fold(memoryd_nfkc(t)))))
    $$
    $f$;

    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_camel_tsvector(config text, t text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT to_tsvector(config::regconfig, memoryd_fold(memoryd_camel(t)))
    $$
    $f$;

    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_tsvector(config text, t text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT memoryd_tsvector_base(config, t) || memoryd_camel_tsvector(config, t)
    $$
    $f$;

    -- The oldest transaction the re-index below may not see: what it
    -- commits is read again at the end.
    v_from := txid_snapshot_xmin(txid_current_snapshot());

    -- Re-index the items and chunks holding such a name. Naming ts_config
    -- fires context_tsvector_trg (migration 031) and context_terms_update_trg
    -- (025); no memory change is recorded (024).
    UPDATE context SET ts_config = ts_config
    WHERE memoryd_camel(question) <> '' OR memoryd_camel(answer) <> '';

    UPDATE doc_chunks SET
        search = setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B'),
        heading_len = length(memoryd_tsvector_base(ts_config, heading)),
        text_len = length(memoryd_tsvector_base(ts_config, text))
    WHERE memoryd_camel(heading) <> '' OR memoryd_camel(text) <> '';

    -- What a process of the previous release wrote while this ran, with
    -- the old functions, after the re-index above read the tables: writers
    -- wait from here to the commit, and the rows written by a transaction
    -- from v_from on, other than this one, are indexed again. By the
    -- rows' xmin, not by inserted_at as 048 to 058 did: an item older
    -- than their 10 minutes that a previous-release process rewrote
    -- meanwhile to text holding such a name (context.update) kept the old
    -- vector (an upgrade walk: 20 of 20), and the window re-read every item
    -- of the last 10 minutes under the lock (2 s there).
    LOCK TABLE context, doc_chunks IN SHARE MODE;
    UPDATE context SET ts_config = ts_config
    WHERE age(xmin) <= age((v_from % 4294967296)::text::xid)
      AND NOT xmin = (txid_current() % 4294967296)::text::xid
      AND (memoryd_camel(question) <> '' OR memoryd_camel(answer) <> '')
      AND search IS DISTINCT FROM setweight(memoryd_tsvector(ts_config, question), 'A') || setweight(memoryd_tsvector(ts_config, answer), 'B');
    UPDATE doc_chunks SET
        search = setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B'),
        heading_len = length(memoryd_tsvector_base(ts_config, heading)),
        text_len = length(memoryd_tsvector_base(ts_config, text))
    WHERE age(xmin) <= age((v_from % 4294967296)::text::xid)
      AND NOT xmin = (txid_current() % 4294967296)::text::xid
      AND (memoryd_camel(heading) <> '' OR memoryd_camel(text) <> '')
      AND search IS DISTINCT FROM setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B');
END
$migration$;
