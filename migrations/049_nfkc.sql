-- Width and compatibility forms (Unicode NFKC) in what is indexed and
-- searched. Japanese input methods type Latin letters and digits full
-- width ("ＩＫＥＡ", "２つ") and some keyboards half-width katakana
-- ("ｽﾀｰﾊﾞｯｸｽ"); Arabic text copied from old sources holds presentation
-- forms, and text from PDFs ligatures ("ﬁle"). Under NFC (migration 041)
-- each is other text than its ordinary form, so "IKEA" did not find
-- "ＩＫＥＡ港北で本棚を買った", nor "スターバックス" the half-width
-- spelling. Now an item's text and a query are put in NFKC before parsing
-- (NFKC includes NFC's composition: "cafe\u0301" is still "café"). The
-- stored question and answer (and a chunk's text) stay byte for byte as
-- sent; only their search vectors, lengths and term rows see the NFKC
-- form. enricher.Keywords normalizes a message the same way in Go.
--
-- memoryd_nfkc skips the normalization of text that is already NFKC, as
-- memoryd_nfc did of NFC: pure ASCII by a byte/character count, the rest
-- by Postgres' quick check (IS NFKC NORMALIZED).
--
-- Cost on an existing database: no table rewrite. The functions are
-- replaced (new items and chunks are indexed with them at once), and the
-- items and chunks whose NFKC form differs from their NFC form (full-width
-- or half-width letters, ligatures, compatibility characters: typically
-- none or a handful) are re-indexed below: one sequential read of context
-- and of doc_chunks, and an update of only those rows, inside this
-- migration's transaction.
--
-- As 041, only on a UTF8 database (normalize() needs it); on any other the
-- functions are left as they were.
DO $migration$
BEGIN
    IF current_setting('server_encoding') <> 'UTF8' THEN
        RAISE NOTICE 'memoryd 049: server encoding is %, not UTF8: search text is not normalized', current_setting('server_encoding');
        RETURN;
    END IF;

    -- Inlined into its callers, as memoryd_nfc (041).
    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_nfkc(t text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN octet_length(t) = length(t) OR t IS NFKC NORMALIZED THEN t ELSE normalize(t, NFKC) END
    $$
    $f$;

    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_tsvector(config text, t text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT to_tsvector(config::regconfig, memoryd_cjk(memoryd_nfkc(t)))
    $$
    $f$;

    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_tsquery(config text, q text) RETURNS tsquery
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT to_tsquery(config::regconfig, memoryd_cjk(memoryd_nfkc(q)))
    $$
    $f$;

    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_query_terms(config text, q text) RETURNS text[]
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT tsvector_to_array(to_tsvector(config::regconfig, memoryd_cjk(memoryd_nfkc(q))))
    $$
    $f$;

    -- Re-index the items whose text NFKC changes beyond NFC. Naming
    -- ts_config fires context_tsvector_trg (migration 031) and
    -- context_terms_update_trg (025); no memory change is recorded (024).
    UPDATE context SET ts_config = ts_config
    WHERE memoryd_nfkc(question) IS DISTINCT FROM memoryd_nfc(question)
       OR memoryd_nfkc(answer) IS DISTINCT FROM memoryd_nfc(answer);

    UPDATE doc_chunks SET
        search = setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B'),
        heading_len = length(memoryd_tsvector(ts_config, heading)),
        text_len = length(memoryd_tsvector(ts_config, text))
    WHERE memoryd_nfkc(heading) IS DISTINCT FROM memoryd_nfc(heading)
       OR memoryd_nfkc(text) IS DISTINCT FROM memoryd_nfc(text);

    -- What a process of the previous release wrote while this ran, with
    -- the old functions, after the re-index above read the tables: writers
    -- wait from here to the commit, and those rows are indexed again (as
    -- in 048).
    LOCK TABLE context, doc_chunks IN SHARE MODE;
    UPDATE context SET ts_config = ts_config
    WHERE inserted_at >= now() - interval '10 minutes'
      AND (memoryd_nfkc(question) IS DISTINCT FROM memoryd_nfc(question)
        OR memoryd_nfkc(answer) IS DISTINCT FROM memoryd_nfc(answer))
      AND search IS DISTINCT FROM setweight(memoryd_tsvector(ts_config, question), 'A') || setweight(memoryd_tsvector(ts_config, answer), 'B');
    UPDATE doc_chunks SET
        search = setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B'),
        heading_len = length(memoryd_tsvector(ts_config, heading)),
        text_len = length(memoryd_tsvector(ts_config, text))
    WHERE (memoryd_nfkc(heading) IS DISTINCT FROM memoryd_nfc(heading)
        OR memoryd_nfkc(text) IS DISTINCT FROM memoryd_nfc(text))
      AND search IS DISTINCT FROM setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B');
END
$migration$;
