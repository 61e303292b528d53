-- Words inside dotted names, paths, addresses and versions are searchable.
-- Postgres' parser keeps "github.com/klauspost/compress", "fmt.Errorf",
-- "node.js", "socket.io", "docs/setup.md", "~/src/app/main.go" and
-- "bob@example.com" as one lexeme each, while a message is searched by its
-- words (enricher.Keywords splits at anything but letters and digits): no
-- search for "compress", "errorf", "node" or "setup" found them, and in a
-- chat about code the rare word a follow-up asks about is often inside
-- one (a TypeScript frontend walk: every miss of a 200-turn chat over
-- READMEs was one). Now a run of . / @ : ~ or \ before a letter or digit
-- (or any non-ASCII character) is a space in what is indexed and
-- searched: "fmt.Errorf" is "fmt Errorf", "C:\Users\bob" "C Users bob".
-- A sentence's full stop is followed by a space and stays. The whole
-- forms were never found by a search (the query side splits them), so
-- nothing findable is lost; "3.14" and "10:30" are now their digits.
-- The stored text stays as sent.
--
-- Cost on an existing database: the functions are replaced (new items and
-- chunks are indexed with them at once), and the items and chunks holding
-- such a run are re-indexed below, inside this migration's transaction:
-- one sequential read of context and of doc_chunks and an update of those
-- rows (on LongMemEval's real conversations, 23% of items: see
-- docs/operations.md, "Upgrading past migration 056"). Processes of the
-- previous release index with the new functions once this commits; what
-- they wrote while it ran is re-indexed at its end, as in 049.
--
-- As 049, only on a UTF8 database; on any other the functions are left as
-- they were.
DO $migration$
BEGIN
    IF current_setting('server_encoding') <> 'UTF8' THEN
        RAISE NOTICE 'memoryd 056: server encoding is %, not UTF8: dotted names stay whole', current_setting('server_encoding');
        RETURN;
    END IF;

    -- Inlined into its callers. The test is a cheap filter: most text
    -- holds no such run before a letter, and is returned as it is.
    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_split(t text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN t ~ '[./@:~\\]([[:alnum:]]|[^\x01-\x7f])' THEN regexp_replace(t, '[./@:~\\]+(?=[[:alnum:]]|[^\x01-\x7f])', ' ', 'g') ELSE t END
    $$
    $f$;

    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_tsvector(config text, t text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT to_tsvector(config::regconfig, memoryd_cjk(memoryd_split(memoryd_nfkc(t))))
    $$
    $f$;

    -- A query's text is store.TSQuery's: quoted keywords joined by
    -- operators, with no weights or prefixes, so only a keyword's own
    -- runs are split (a quoted keyword that splits becomes a phrase).
    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_tsquery(config text, q text) RETURNS tsquery
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT to_tsquery(config::regconfig, memoryd_cjk(memoryd_split(memoryd_nfkc(q))))
    $$
    $f$;

    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_query_terms(config text, q text) RETURNS text[]
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT tsvector_to_array(to_tsvector(config::regconfig, memoryd_cjk(memoryd_split(memoryd_nfkc(q)))))
    $$
    $f$;

    -- Re-index the items holding such a run, in the NFKC form the index
    -- reads (049): full-width "．" "／" "＠" "：" "～" "＼" of Chinese and
    -- Japanese input are such a run there. Naming ts_config fires
    -- context_tsvector_trg (migration 031) and context_terms_update_trg
    -- (025); no memory change is recorded (024).
    UPDATE context SET ts_config = ts_config
    WHERE memoryd_split(memoryd_nfkc(question)) IS DISTINCT FROM memoryd_nfkc(question)
       OR memoryd_split(memoryd_nfkc(answer)) IS DISTINCT FROM memoryd_nfkc(answer);

    UPDATE doc_chunks SET
        search = setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B'),
        heading_len = length(memoryd_tsvector(ts_config, heading)),
        text_len = length(memoryd_tsvector(ts_config, text))
    WHERE memoryd_split(memoryd_nfkc(heading)) IS DISTINCT FROM memoryd_nfkc(heading)
       OR memoryd_split(memoryd_nfkc(text)) IS DISTINCT FROM memoryd_nfkc(text);

    -- What a process of the previous release wrote while this ran, with
    -- the old functions, after the re-index above read the tables: writers
    -- wait from here to the commit, and those rows are indexed again (as
    -- in 048 and 049).
    LOCK TABLE context, doc_chunks IN SHARE MODE;
    UPDATE context SET ts_config = ts_config
    WHERE inserted_at >= now() - interval '10 minutes'
      AND (memoryd_split(memoryd_nfkc(question)) IS DISTINCT FROM memoryd_nfkc(question)
        OR memoryd_split(memoryd_nfkc(answer)) IS DISTINCT FROM memoryd_nfkc(answer))
      AND search IS DISTINCT FROM setweight(memoryd_tsvector(ts_config, question), 'A') || setweight(memoryd_tsvector(ts_config, answer), 'B');
    UPDATE doc_chunks SET
        search = setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B'),
        heading_len = length(memoryd_tsvector(ts_config, heading)),
        text_len = length(memoryd_tsvector(ts_config, text))
    WHERE (memoryd_split(memoryd_nfkc(heading)) IS DISTINCT FROM memoryd_nfkc(heading)
        OR memoryd_split(memoryd_nfkc(text)) IS DISTINCT FROM memoryd_nfkc(text))
      AND search IS DISTINCT FROM setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B');
END
$migration$;
