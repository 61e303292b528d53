-- Languages (issue 17 item 6). Each user has one text search language,
-- English unless set (memory.language): it chooses the Postgres text search
-- configuration that both indexes the user's context items and parses
-- their queries, so an item is always searched with the configuration it
-- was indexed with ("simple" for the languages Postgres does not stem:
-- Japanese, Chinese, Korean, ...). Under every configuration CJK text is
-- made searchable by memoryd_cjk below; text without CJK characters is
-- indexed exactly as before.
--
-- Cost on an existing database: the generated columns search, question_len
-- and answer_len are re-created, which rewrites the context table under an
-- ACCESS EXCLUSIVE lock (reads and writes of context wait) and rebuilds its
-- three indexes over those columns. Nothing is lost: the columns are derived
-- from question and answer, and text without CJK characters gets exactly the vectors it had.
-- Measured on 200,000 items of about 290 bytes (docs/operations.md,
-- "Languages"): 21 s in all, 16 s of it the rewrite and 5 s the indexes, on
-- the 2-core test machine at load average 7 (inserting the rows had taken
-- 27 s); every item's vector and lengths came out byte-identical.

-- memoryd_cjk rewrites each run of CJK characters (Han, Hiragana, Katakana,
-- Hangul: the ranges of enricher.isCJK, which TestCJKTokensMatchPostgres
-- keeps in step) as its overlapping character bigrams, each between spaces,
-- or the character alone when the run is one character long: '東京の天気' →
-- ' 東京  京の  の天  天気 '. Postgres' parser then makes each bigram a
-- word, in order, so a bigram phrase matches a substring. Text without CJK
-- characters is returned unchanged. Two linear regular expression passes:
-- the first doubles every character inside a run (both neighbours CJK),
-- which makes a run of n characters the 2(n-1) characters of its bigrams
-- end to end; the second puts spaces around each pair (or lone character).
CREATE FUNCTION memoryd_cjk(t text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT regexp_replace(
    regexp_replace(t,
        '(?<=[\u1100-\u11ff\u3005\u3006\u3041-\u309a\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3131-\u318e\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f\uffa0-\uffdc\U00020000-\U0003fffd])([\u1100-\u11ff\u3005\u3006\u3041-\u309a\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3131-\u318e\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f\uffa0-\uffdc\U00020000-\U0003fffd])(?=[\u1100-\u11ff\u3005\u3006\u3041-\u309a\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3131-\u318e\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f\uffa0-\uffdc\U00020000-\U0003fffd])',
        '\1\1', 'g'),
    '([\u1100-\u11ff\u3005\u3006\u3041-\u309a\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3131-\u318e\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f\uffa0-\uffdc\U00020000-\U0003fffd]{1,2})',
    ' \1 ', 'g')
$$;

-- memoryd_tsvector is to_tsvector under the configuration named config, of
-- the text rewritten by memoryd_cjk (which leaves text without CJK
-- characters as it is, so that such an item's vector stays byte-identical):
-- how an item is indexed. config is a text, not a regconfig, because pg_upgrade
-- refuses tables holding regconfig values; the cast makes the function only
-- stable in Postgres' eyes, and it is declared immutable (as generated
-- columns require) because memoryd uses only the built-in configurations,
-- which do not change.
--
-- memoryd_tsquery and memoryd_query_terms parse a query (store/search.go)
-- the same way: its tsquery, and the lexemes of its keywords. They are
-- declared stable and not strict, which they are, so that Postgres inlines
-- them into the recall statement (a function call it cannot inline costs
-- about 30 microseconds of planning per statement, measured).
CREATE FUNCTION memoryd_tsvector(config text, t text) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT to_tsvector(config::regconfig, memoryd_cjk(t))
$$;

CREATE FUNCTION memoryd_tsquery(config text, q text) RETURNS tsquery
LANGUAGE sql STABLE PARALLEL SAFE AS $$
SELECT to_tsquery(config::regconfig, memoryd_cjk(q))
$$;

CREATE FUNCTION memoryd_query_terms(config text, q text) RETURNS text[]
LANGUAGE sql STABLE PARALLEL SAFE AS $$
SELECT tsvector_to_array(to_tsvector(config::regconfig, memoryd_cjk(q)))
$$;

-- A user's language: as the caller named it (an ISO 639-1 code or a name,
-- echoed back) and the configuration it maps to. No row is English.
CREATE TABLE user_languages (
    user_id    text        PRIMARY KEY,
    language   text        NOT NULL,
    ts_config  text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The configuration an item is indexed with: always its user's (the trigger
-- below on insert, store.SetLanguage on a change of language). Adding a
-- column with a constant default does not rewrite the table.
ALTER TABLE context ADD COLUMN ts_config text NOT NULL DEFAULT 'english';

-- Every insert of an item, whatever its path (extraction, memory.store,
-- import), takes its user's configuration here. The shared advisory lock
-- (held to the end of the inserting transaction) is the one
-- store.SetLanguage takes exclusively: a change of language waits for the
-- inserts in flight and re-indexes them too, and an insert after it reads
-- the new language.
CREATE FUNCTION memoryd_context_ts_config() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtextextended('memoryd.language.' || current_schema() || '.' || NEW.user_id, 0));
    NEW.ts_config := coalesce((SELECT l.ts_config FROM user_languages l WHERE l.user_id = NEW.user_id), 'english');
    RETURN NEW;
END
$$;
CREATE TRIGGER context_ts_config_trg BEFORE INSERT ON context
    FOR EACH ROW EXECUTE FUNCTION memoryd_context_ts_config();

-- The search vector and field lengths under the item's configuration (one
-- ALTER: one rewrite). Dropping the columns drops the indexes that hold
-- them; they are re-created as they were (001, 005, 018).
ALTER TABLE context
    DROP COLUMN search,
    DROP COLUMN question_len,
    DROP COLUMN answer_len,
    ADD COLUMN search tsvector GENERATED ALWAYS AS (
        setweight(memoryd_tsvector(ts_config, question), 'A') ||
        setweight(memoryd_tsvector(ts_config, answer), 'B')
    ) STORED,
    ADD COLUMN question_len integer GENERATED ALWAYS AS (length(memoryd_tsvector(ts_config, question))) STORED,
    ADD COLUMN answer_len   integer GENERATED ALWAYS AS (length(memoryd_tsvector(ts_config, answer))) STORED;
CREATE INDEX context_search_idx ON context USING gin (search);
CREATE INDEX context_user_len_idx ON context (user_id) INCLUDE (question_len, answer_len);
CREATE INDEX context_user_scope_idx ON context (user_id, scope, created_at DESC, id DESC)
    INCLUDE (question_len, answer_len);
