-- Latin accents are folded in what is indexed and searched: a user who
-- types without them finds what was said with them, and the reverse.
-- "which pokemon game was i playing?" did not find "I'm playing Pokémon
-- Sword" (a search walk on real conversations), nor "cafe" "café", "Jose"
-- "José", "Sao Paulo" "São Paulo", nor "résumé" "resume". Now a combining
-- mark (U+0300 to U+036F) written on a Latin letter is dropped, in the
-- canonical decomposition (NFD) of the NFKC text 049 indexes, and the rest
-- is composed again (NFC): é, è, ê, ë, ã, å, ç, ñ, š, ž, ő, ą, ț and the
-- others of Latin-1 and Latin Extended are their letter. The letters
-- without a decomposition that people type as ASCII are mapped too: ø o,
-- ł l, ı i, ß ss, æ ae, œ oe (đ is left: Croatian writes it dj). Marks
-- on other letters stay (Cyrillic й, Greek ά, kana's dakuten, Thai vowel
-- signs), and text without Latin accents is returned as it is: NFD
-- decomposes Hangul and NFC composes it again, but only text holding a
-- Latin accent goes through them.
--
-- Vietnamese writes its words apart by their marks (bạn friend, bán sell,
-- bàn table; mẹ mother, me, a stop word of English, once folded): a word
-- holding a mark only Vietnamese writes, a horn (ơ ư), a dot below (ạ),
-- a hook above (ả) or two marks on one letter (ấ ồ ữ), keeps all its
-- accents. Its other words fold as any (bán and bàn are "ban").
--
-- The stored text stays as sent; enricher.Keywords' words and the fact
-- selection compare words folded the same way (enricher.foldWord).
--
-- Cost on an existing database: the functions are replaced (new items and
-- chunks are indexed with them at once), and the items and chunks holding
-- a Latin accent that folds are re-indexed below, inside this migration's
-- transaction: one sequential read of context and of doc_chunks and an
-- update of those rows (see docs/operations.md, "Upgrading past migration
-- 058"). Processes of the previous release index with the new functions
-- once this commits; what they wrote while it ran is re-indexed at its
-- end, as in 049 and 056.
--
-- As 049, only on a UTF8 database; on any other the functions are left as
-- they were.
DO $migration$
BEGIN
    IF current_setting('server_encoding') <> 'UTF8' THEN
        RAISE NOTICE 'memoryd 058: server encoding is %, not UTF8: accents are not folded', current_setting('server_encoding');
        RETURN;
    END IF;

    -- The first tests are a cheap filter: ASCII
    -- text, and text without a letter of Latin-1 Supplement, Latin
    -- Extended-A and -B and Latin Extended Additional or a combining
    -- mark, is returned as it is. Then, in NFD, a mark on a Latin letter
    -- is dropped unless its word (a run of Latin letters, digits and
    -- marks) holds a horn, a dot below, a hook above or two marks in a
    -- row (Vietnamese); the letters without a decomposition are mapped;
    -- and the text is composed again. The text is read word by word (runs
    -- of Latin letters, digits and marks, and the runs between them): a
    -- lookbehind and a lookahead over the word at each mark made it
    -- quadratic in the text's length (2.6 s for an accented answer of
    -- 64 KiB, about 40 s for the 256 KiB an answer may hold; 0.3 s so),
    -- in a function of its own (memoryd_fold_words): memoryd_fold, the
    -- filter, is not STRICT (a NULL is NULL all the same) so that it is
    -- inlined into its callers, and the text it passes costs the filter
    -- alone.
    -- enricher.foldWord is the same rule, and TestFoldMatchesPostgres
    -- checks the two agree.
    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_fold_words(t text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT normalize(replace(replace(replace(replace(replace(replace(translate(
        (SELECT string_agg(CASE WHEN m[1] IS NULL OR m[1] ~ '[\u031b\u0323\u0309]|[\u0300-\u036f][\u0300-\u036f]' THEN coalesce(m[1], m[2])
                ELSE regexp_replace(m[1], '([A-Za-z\u00c0-\u024f\u1e00-\u1eff])[\u0300-\u036f]', '\1', 'g') END, '' ORDER BY o)
         FROM regexp_matches(normalize(t, NFD), '([0-9A-Za-z\u00c0-\u024f\u0300-\u036f\u1e00-\u1eff]+)|([^0-9A-Za-z\u00c0-\u024f\u0300-\u036f\u1e00-\u1eff]+)', 'g') WITH ORDINALITY AS x(m, o)),
        'øØłŁı', 'oOlLi'), 'ß', 'ss'), 'ẞ', 'SS'), 'æ', 'ae'), 'Æ', 'AE'), 'œ', 'oe'), 'Œ', 'OE'), NFC)
    $$
    $f$;

    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_fold(t text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN octet_length(t) = length(t) OR t !~ '[\u00c0-\u024f\u0300-\u036f\u1e00-\u1eff]' THEN t ELSE memoryd_fold_words(t) END
    $$
    $f$;

    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_tsvector(config text, t text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT to_tsvector(config::regconfig, memoryd_cjk(memoryd_split(memoryd_fold(memoryd_nfkc(t)))))
    $$
    $f$;

    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_tsquery(config text, q text) RETURNS tsquery
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT to_tsquery(config::regconfig, memoryd_cjk(memoryd_split(memoryd_fold(memoryd_nfkc(q)))))
    $$
    $f$;

    EXECUTE $f$
    CREATE OR REPLACE FUNCTION memoryd_query_terms(config text, q text) RETURNS text[]
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT tsvector_to_array(to_tsvector(config::regconfig, memoryd_cjk(memoryd_split(memoryd_fold(memoryd_nfkc(q))))))
    $$
    $f$;

    -- Re-index the items whose NFKC text folds. Naming ts_config fires
    -- context_tsvector_trg (migration 031) and context_terms_update_trg
    -- (025); no memory change is recorded (024).
    UPDATE context SET ts_config = ts_config
    WHERE memoryd_fold(memoryd_nfkc(question)) IS DISTINCT FROM memoryd_nfkc(question)
       OR memoryd_fold(memoryd_nfkc(answer)) IS DISTINCT FROM memoryd_nfkc(answer);

    UPDATE doc_chunks SET
        search = setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B'),
        heading_len = length(memoryd_tsvector(ts_config, heading)),
        text_len = length(memoryd_tsvector(ts_config, text))
    WHERE memoryd_fold(memoryd_nfkc(heading)) IS DISTINCT FROM memoryd_nfkc(heading)
       OR memoryd_fold(memoryd_nfkc(text)) IS DISTINCT FROM memoryd_nfkc(text);

    -- What a process of the previous release wrote while this ran, with
    -- the old functions, after the re-index above read the tables: writers
    -- wait from here to the commit, and those rows are indexed again (as
    -- in 048, 049 and 056).
    LOCK TABLE context, doc_chunks IN SHARE MODE;
    UPDATE context SET ts_config = ts_config
    WHERE inserted_at >= now() - interval '10 minutes'
      AND (memoryd_fold(memoryd_nfkc(question)) IS DISTINCT FROM memoryd_nfkc(question)
        OR memoryd_fold(memoryd_nfkc(answer)) IS DISTINCT FROM memoryd_nfkc(answer))
      AND search IS DISTINCT FROM setweight(memoryd_tsvector(ts_config, question), 'A') || setweight(memoryd_tsvector(ts_config, answer), 'B');
    UPDATE doc_chunks SET
        search = setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B'),
        heading_len = length(memoryd_tsvector(ts_config, heading)),
        text_len = length(memoryd_tsvector(ts_config, text))
    WHERE (memoryd_fold(memoryd_nfkc(heading)) IS DISTINCT FROM memoryd_nfkc(heading)
        OR memoryd_fold(memoryd_nfkc(text)) IS DISTINCT FROM memoryd_nfkc(text))
      AND search IS DISTINCT FROM setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B');
END
$migration$;
