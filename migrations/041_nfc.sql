-- Unicode normalization of what is indexed and searched. The same word
-- typed composed (NFC: "café", most keyboards) or decomposed (NFD: "cafe" +
-- U+0301, macOS input, some Vietnamese IMEs; Hangul as conjoining Jamo)
-- is different text to Postgres' parser, so one never found the other. Now
-- both an item's text and a query are put in NFC before parsing: the
-- stored question and answer (and a chunk's text) stay byte for byte as
-- sent; only their search vectors, lengths and term rows see the NFC form.
-- enricher.Keywords normalizes a message the same way in Go.
--
-- memoryd_nfc skips the normalization of text that is already NFC: pure
-- ASCII by a byte/character count, the rest by Postgres' quick check (IS
-- NFC NORMALIZED), so only text that changes pays for normalize().
-- Measured on 200,000 texts of ~290 characters (load average ~26, so
-- rough): to_tsvector('english') about 240 µs a text, normalize() about
-- 115 µs (half the parse again), the quick check of non-ASCII text about
-- 30 µs, the ASCII test lost in the noise.
--
-- Cost on an existing database: no table rewrite. The functions are
-- replaced (new items and chunks are indexed with them at once), and the
-- items and chunks whose text is not NFC, typically none or a handful, are
-- re-indexed below: one sequential read of context and of doc_chunks
-- (a quick check of each text), and an update of only those rows, inside
-- this migration's transaction. Measured on 200,000 items: see
-- docs/operations.md.
--
-- normalize() and IS NORMALIZED need a UTF8 database; on any other the
-- functions are left as they were (nothing to normalize that the encoding
-- can hold differently is indexed there).
DO $migration$
BEGIN
    IF current_setting('server_encoding') <> 'UTF8' THEN
        RAISE NOTICE 'memoryd 041: server encoding is %, not UTF8: search text is not normalized', current_setting('server_encoding');
        RETURN;
    END IF;

    -- Inlined into its callers (a plain SQL expression, immutable; not
    -- STRICT, which keeps Postgres from inlining a CASE: NULL gives NULL
    -- through it anyway).
    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_nfc(t text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN octet_length(t) = length(t) OR t IS NFC NORMALIZED THEN t ELSE normalize(t, NFC) END
    $$
    $f$;

    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_tsvector(config text, t text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT to_tsvector(config::regconfig, memoryd_cjk(memoryd_nfc(t)))
    $$
    $f$;

    -- Still stable and not strict, so that they stay inlined into the
    -- recall statement (migration 020).
    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_tsquery(config text, q text) RETURNS tsquery
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT to_tsquery(config::regconfig, memoryd_cjk(memoryd_nfc(q)))
    $$
    $f$;

    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_query_terms(config text, q text) RETURNS text[]
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT tsvector_to_array(to_tsvector(config::regconfig, memoryd_cjk(memoryd_nfc(q))))
    $$
    $f$;

    -- Re-index the items whose text the normalization changes. Naming
    -- ts_config fires context_tsvector_trg (migration 031), which recomputes
    -- the vector and lengths; context_terms_update_trg (025) replaces their
    -- term rows. The question and answer do not change, so no memory change
    -- is recorded (migration 024).
    UPDATE context SET ts_config = ts_config
    WHERE memoryd_nfc(question) IS DISTINCT FROM question OR memoryd_nfc(answer) IS DISTINCT FROM answer;

    -- Chunks' vectors are written by store.PutDocument (migration 026);
    -- chunk_terms_update_trg (027) replaces their term rows.
    UPDATE doc_chunks SET
        search = setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B'),
        heading_len = length(memoryd_tsvector(ts_config, heading)),
        text_len = length(memoryd_tsvector(ts_config, text))
    WHERE memoryd_nfc(heading) IS DISTINCT FROM heading OR memoryd_nfc(text) IS DISTINCT FROM text;
END
$migration$;
