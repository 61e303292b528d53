-- Thai, Lao, Khmer and Myanmar (Burmese) are written without spaces
-- between words, like Chinese and Japanese: Postgres' parser made a whole
-- sentence one word ('ฉันชอบกินข้าวผัดมาก' one lexeme), so no search for
-- a word of it (ข้าวผัด) found anything, in any language setting. Now
-- memoryd_cjk bigrams runs of these scripts too, after the CJK runs. Their
-- unit is a letter with the combining marks after it (vowel signs, tone
-- marks, Khmer's coeng), so a bigram never parts a letter from its marks:
-- 'ข้าวผัด' becomes ' ข้า  าว  วผั  ผัด '. Marks that open a run (after
-- other text) form its first unit. The letters and marks are those of
-- enricher.seaLetters and enricher.seaMarks (Unicode general categories L
-- and M of the four scripts; their digits and punctuation separate
-- words); TestBigramTokensMatchPostgres checks the two sides agree on every
-- code point of the scripts' blocks.
--
-- Text without these characters is rewritten exactly as before (the CJK
-- passes are 020's, unchanged), so no other item's vector changes.
--
-- Cost on an existing database: the function is replaced (new items and
-- chunks are indexed with it at once), and the items and chunks holding
-- these scripts are re-indexed below: one sequential read of context and of
-- doc_chunks (a regular expression test of each text), and an update of
-- those rows only, inside this migration's transaction.

-- Two more linear passes, of the same form as the CJK ones, over the CJK
-- passes' result; written as one expression, as before, so that Postgres
-- can still inline the function. Their cost on text without these scripts,
-- measured on 20,000 texts of 2 KB (md5 words, 2 shared cores): 12 µs a
-- text for the CJK passes, 22 µs for all four; to_tsvector('english') of
-- the same text is about 63 µs.
CREATE OR REPLACE FUNCTION memoryd_cjk(t text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT regexp_replace(
    regexp_replace(
        regexp_replace(
            regexp_replace(t,
                '(?<=[\u1100-\u11ff\u3005\u3006\u3041-\u309a\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3131-\u318e\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f\uffa0-\uffdc\U00020000-\U0003fffd])([\u1100-\u11ff\u3005\u3006\u3041-\u309a\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3131-\u318e\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f\uffa0-\uffdc\U00020000-\U0003fffd])(?=[\u1100-\u11ff\u3005\u3006\u3041-\u309a\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3131-\u318e\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f\uffa0-\uffdc\U00020000-\U0003fffd])',
                '\1\1', 'g'),
            '([\u1100-\u11ff\u3005\u3006\u3041-\u309a\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3131-\u318e\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f\uffa0-\uffdc\U00020000-\U0003fffd]{1,2})',
            ' \1 ', 'g'),
        '(?<=[\u0e01-\u0e30\u0e32-\u0e33\u0e40-\u0e46\u0e81-\u0e82\u0e84\u0e86-\u0e8a\u0e8c-\u0ea3\u0ea5\u0ea7-\u0eb0\u0eb2-\u0eb3\u0ebd\u0ec0-\u0ec4\u0ec6\u0edc-\u0edf\u1000-\u102a\u103f\u1050-\u1055\u105a-\u105d\u1061\u1065-\u1066\u106e-\u1070\u1075-\u1081\u108e\u1780-\u17b3\u17d7\u17dc\ua9e0-\ua9e4\ua9e6-\ua9ef\ua9fa-\ua9fe\uaa60-\uaa76\uaa7a\uaa7e-\uaa7f\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1\u0eb4-\u0ebc\u0ec8-\u0ece\u102b-\u103e\u1056-\u1059\u105e-\u1060\u1062-\u1064\u1067-\u106d\u1071-\u1074\u1082-\u108d\u108f\u109a-\u109d\u17b4-\u17d3\u17dd\ua9e5\uaa7b-\uaa7d])([\u0e01-\u0e30\u0e32-\u0e33\u0e40-\u0e46\u0e81-\u0e82\u0e84\u0e86-\u0e8a\u0e8c-\u0ea3\u0ea5\u0ea7-\u0eb0\u0eb2-\u0eb3\u0ebd\u0ec0-\u0ec4\u0ec6\u0edc-\u0edf\u1000-\u102a\u103f\u1050-\u1055\u105a-\u105d\u1061\u1065-\u1066\u106e-\u1070\u1075-\u1081\u108e\u1780-\u17b3\u17d7\u17dc\ua9e0-\ua9e4\ua9e6-\ua9ef\ua9fa-\ua9fe\uaa60-\uaa76\uaa7a\uaa7e-\uaa7f][\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1\u0eb4-\u0ebc\u0ec8-\u0ece\u102b-\u103e\u1056-\u1059\u105e-\u1060\u1062-\u1064\u1067-\u106d\u1071-\u1074\u1082-\u108d\u108f\u109a-\u109d\u17b4-\u17d3\u17dd\ua9e5\uaa7b-\uaa7d]*)(?=[\u0e01-\u0e30\u0e32-\u0e33\u0e40-\u0e46\u0e81-\u0e82\u0e84\u0e86-\u0e8a\u0e8c-\u0ea3\u0ea5\u0ea7-\u0eb0\u0eb2-\u0eb3\u0ebd\u0ec0-\u0ec4\u0ec6\u0edc-\u0edf\u1000-\u102a\u103f\u1050-\u1055\u105a-\u105d\u1061\u1065-\u1066\u106e-\u1070\u1075-\u1081\u108e\u1780-\u17b3\u17d7\u17dc\ua9e0-\ua9e4\ua9e6-\ua9ef\ua9fa-\ua9fe\uaa60-\uaa76\uaa7a\uaa7e-\uaa7f])',
        '\1\1', 'g'),
    '((?:[\u0e01-\u0e30\u0e32-\u0e33\u0e40-\u0e46\u0e81-\u0e82\u0e84\u0e86-\u0e8a\u0e8c-\u0ea3\u0ea5\u0ea7-\u0eb0\u0eb2-\u0eb3\u0ebd\u0ec0-\u0ec4\u0ec6\u0edc-\u0edf\u1000-\u102a\u103f\u1050-\u1055\u105a-\u105d\u1061\u1065-\u1066\u106e-\u1070\u1075-\u1081\u108e\u1780-\u17b3\u17d7\u17dc\ua9e0-\ua9e4\ua9e6-\ua9ef\ua9fa-\ua9fe\uaa60-\uaa76\uaa7a\uaa7e-\uaa7f][\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1\u0eb4-\u0ebc\u0ec8-\u0ece\u102b-\u103e\u1056-\u1059\u105e-\u1060\u1062-\u1064\u1067-\u106d\u1071-\u1074\u1082-\u108d\u108f\u109a-\u109d\u17b4-\u17d3\u17dd\ua9e5\uaa7b-\uaa7d]*|[\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1\u0eb4-\u0ebc\u0ec8-\u0ece\u102b-\u103e\u1056-\u1059\u105e-\u1060\u1062-\u1064\u1067-\u106d\u1071-\u1074\u1082-\u108d\u108f\u109a-\u109d\u17b4-\u17d3\u17dd\ua9e5\uaa7b-\uaa7d]+){1,2})',
    ' \1 ', 'g')
$$;

-- Re-index the items holding these scripts. Naming ts_config fires
-- context_tsvector_trg (migration 031), which recomputes the vector and
-- lengths; context_terms_update_trg (025) replaces their term rows. The
-- question and answer do not change, so no memory change is recorded
-- (migration 024).
UPDATE context SET ts_config = ts_config
WHERE question ~ '[\u0e01-\u0e30\u0e32-\u0e33\u0e40-\u0e46\u0e81-\u0e82\u0e84\u0e86-\u0e8a\u0e8c-\u0ea3\u0ea5\u0ea7-\u0eb0\u0eb2-\u0eb3\u0ebd\u0ec0-\u0ec4\u0ec6\u0edc-\u0edf\u1000-\u102a\u103f\u1050-\u1055\u105a-\u105d\u1061\u1065-\u1066\u106e-\u1070\u1075-\u1081\u108e\u1780-\u17b3\u17d7\u17dc\ua9e0-\ua9e4\ua9e6-\ua9ef\ua9fa-\ua9fe\uaa60-\uaa76\uaa7a\uaa7e-\uaa7f\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1\u0eb4-\u0ebc\u0ec8-\u0ece\u102b-\u103e\u1056-\u1059\u105e-\u1060\u1062-\u1064\u1067-\u106d\u1071-\u1074\u1082-\u108d\u108f\u109a-\u109d\u17b4-\u17d3\u17dd\ua9e5\uaa7b-\uaa7d]' OR answer ~ '[\u0e01-\u0e30\u0e32-\u0e33\u0e40-\u0e46\u0e81-\u0e82\u0e84\u0e86-\u0e8a\u0e8c-\u0ea3\u0ea5\u0ea7-\u0eb0\u0eb2-\u0eb3\u0ebd\u0ec0-\u0ec4\u0ec6\u0edc-\u0edf\u1000-\u102a\u103f\u1050-\u1055\u105a-\u105d\u1061\u1065-\u1066\u106e-\u1070\u1075-\u1081\u108e\u1780-\u17b3\u17d7\u17dc\ua9e0-\ua9e4\ua9e6-\ua9ef\ua9fa-\ua9fe\uaa60-\uaa76\uaa7a\uaa7e-\uaa7f\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1\u0eb4-\u0ebc\u0ec8-\u0ece\u102b-\u103e\u1056-\u1059\u105e-\u1060\u1062-\u1064\u1067-\u106d\u1071-\u1074\u1082-\u108d\u108f\u109a-\u109d\u17b4-\u17d3\u17dd\ua9e5\uaa7b-\uaa7d]';

-- Chunks' vectors are written by store.PutDocument (migration 026);
-- chunk_terms_update_trg (027) replaces their term rows.
UPDATE doc_chunks SET
    search = setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B'),
    heading_len = length(memoryd_tsvector(ts_config, heading)),
    text_len = length(memoryd_tsvector(ts_config, text))
WHERE heading ~ '[\u0e01-\u0e30\u0e32-\u0e33\u0e40-\u0e46\u0e81-\u0e82\u0e84\u0e86-\u0e8a\u0e8c-\u0ea3\u0ea5\u0ea7-\u0eb0\u0eb2-\u0eb3\u0ebd\u0ec0-\u0ec4\u0ec6\u0edc-\u0edf\u1000-\u102a\u103f\u1050-\u1055\u105a-\u105d\u1061\u1065-\u1066\u106e-\u1070\u1075-\u1081\u108e\u1780-\u17b3\u17d7\u17dc\ua9e0-\ua9e4\ua9e6-\ua9ef\ua9fa-\ua9fe\uaa60-\uaa76\uaa7a\uaa7e-\uaa7f\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1\u0eb4-\u0ebc\u0ec8-\u0ece\u102b-\u103e\u1056-\u1059\u105e-\u1060\u1062-\u1064\u1067-\u106d\u1071-\u1074\u1082-\u108d\u108f\u109a-\u109d\u17b4-\u17d3\u17dd\ua9e5\uaa7b-\uaa7d]' OR text ~ '[\u0e01-\u0e30\u0e32-\u0e33\u0e40-\u0e46\u0e81-\u0e82\u0e84\u0e86-\u0e8a\u0e8c-\u0ea3\u0ea5\u0ea7-\u0eb0\u0eb2-\u0eb3\u0ebd\u0ec0-\u0ec4\u0ec6\u0edc-\u0edf\u1000-\u102a\u103f\u1050-\u1055\u105a-\u105d\u1061\u1065-\u1066\u106e-\u1070\u1075-\u1081\u108e\u1780-\u17b3\u17d7\u17dc\ua9e0-\ua9e4\ua9e6-\ua9ef\ua9fa-\ua9fe\uaa60-\uaa76\uaa7a\uaa7e-\uaa7f\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1\u0eb4-\u0ebc\u0ec8-\u0ece\u102b-\u103e\u1056-\u1059\u105e-\u1060\u1062-\u1064\u1067-\u106d\u1071-\u1074\u1082-\u108d\u108f\u109a-\u109d\u17b4-\u17d3\u17dd\ua9e5\uaa7b-\uaa7d]';

-- Items and chunks that a process of the previous release wrote while
-- this migration ran were indexed with the old function (the new one is
-- not visible to other transactions until this one commits), and the
-- re-index above had already read the tables: an upgrade walk found 12 to
-- 31 such items unsearchable for good. From here to the commit writers
-- wait (SHARE conflicts with their row locks, so this first waits for the
-- writes in flight to commit), and what they wrote meanwhile is indexed
-- again: the items inserted since shortly before this migration began,
-- and the chunks, whose vectors differ from the new function's.
LOCK TABLE context, doc_chunks IN SHARE MODE;

UPDATE context SET ts_config = ts_config
WHERE inserted_at >= now() - interval '10 minutes'
  AND (question ~ '[\u0e01-\u0e30\u0e32-\u0e33\u0e40-\u0e46\u0e81-\u0e82\u0e84\u0e86-\u0e8a\u0e8c-\u0ea3\u0ea5\u0ea7-\u0eb0\u0eb2-\u0eb3\u0ebd\u0ec0-\u0ec4\u0ec6\u0edc-\u0edf\u1000-\u102a\u103f\u1050-\u1055\u105a-\u105d\u1061\u1065-\u1066\u106e-\u1070\u1075-\u1081\u108e\u1780-\u17b3\u17d7\u17dc\ua9e0-\ua9e4\ua9e6-\ua9ef\ua9fa-\ua9fe\uaa60-\uaa76\uaa7a\uaa7e-\uaa7f\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1\u0eb4-\u0ebc\u0ec8-\u0ece\u102b-\u103e\u1056-\u1059\u105e-\u1060\u1062-\u1064\u1067-\u106d\u1071-\u1074\u1082-\u108d\u108f\u109a-\u109d\u17b4-\u17d3\u17dd\ua9e5\uaa7b-\uaa7d]' OR answer ~ '[\u0e01-\u0e30\u0e32-\u0e33\u0e40-\u0e46\u0e81-\u0e82\u0e84\u0e86-\u0e8a\u0e8c-\u0ea3\u0ea5\u0ea7-\u0eb0\u0eb2-\u0eb3\u0ebd\u0ec0-\u0ec4\u0ec6\u0edc-\u0edf\u1000-\u102a\u103f\u1050-\u1055\u105a-\u105d\u1061\u1065-\u1066\u106e-\u1070\u1075-\u1081\u108e\u1780-\u17b3\u17d7\u17dc\ua9e0-\ua9e4\ua9e6-\ua9ef\ua9fa-\ua9fe\uaa60-\uaa76\uaa7a\uaa7e-\uaa7f\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1\u0eb4-\u0ebc\u0ec8-\u0ece\u102b-\u103e\u1056-\u1059\u105e-\u1060\u1062-\u1064\u1067-\u106d\u1071-\u1074\u1082-\u108d\u108f\u109a-\u109d\u17b4-\u17d3\u17dd\ua9e5\uaa7b-\uaa7d]')
  AND search IS DISTINCT FROM setweight(memoryd_tsvector(ts_config, question), 'A') || setweight(memoryd_tsvector(ts_config, answer), 'B');

UPDATE doc_chunks SET
    search = setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B'),
    heading_len = length(memoryd_tsvector(ts_config, heading)),
    text_len = length(memoryd_tsvector(ts_config, text))
WHERE (heading ~ '[\u0e01-\u0e30\u0e32-\u0e33\u0e40-\u0e46\u0e81-\u0e82\u0e84\u0e86-\u0e8a\u0e8c-\u0ea3\u0ea5\u0ea7-\u0eb0\u0eb2-\u0eb3\u0ebd\u0ec0-\u0ec4\u0ec6\u0edc-\u0edf\u1000-\u102a\u103f\u1050-\u1055\u105a-\u105d\u1061\u1065-\u1066\u106e-\u1070\u1075-\u1081\u108e\u1780-\u17b3\u17d7\u17dc\ua9e0-\ua9e4\ua9e6-\ua9ef\ua9fa-\ua9fe\uaa60-\uaa76\uaa7a\uaa7e-\uaa7f\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1\u0eb4-\u0ebc\u0ec8-\u0ece\u102b-\u103e\u1056-\u1059\u105e-\u1060\u1062-\u1064\u1067-\u106d\u1071-\u1074\u1082-\u108d\u108f\u109a-\u109d\u17b4-\u17d3\u17dd\ua9e5\uaa7b-\uaa7d]' OR text ~ '[\u0e01-\u0e30\u0e32-\u0e33\u0e40-\u0e46\u0e81-\u0e82\u0e84\u0e86-\u0e8a\u0e8c-\u0ea3\u0ea5\u0ea7-\u0eb0\u0eb2-\u0eb3\u0ebd\u0ec0-\u0ec4\u0ec6\u0edc-\u0edf\u1000-\u102a\u103f\u1050-\u1055\u105a-\u105d\u1061\u1065-\u1066\u106e-\u1070\u1075-\u1081\u108e\u1780-\u17b3\u17d7\u17dc\ua9e0-\ua9e4\ua9e6-\ua9ef\ua9fa-\ua9fe\uaa60-\uaa76\uaa7a\uaa7e-\uaa7f\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1\u0eb4-\u0ebc\u0ec8-\u0ece\u102b-\u103e\u1056-\u1059\u105e-\u1060\u1062-\u1064\u1067-\u106d\u1071-\u1074\u1082-\u108d\u108f\u109a-\u109d\u17b4-\u17d3\u17dd\ua9e5\uaa7b-\uaa7d]')
  AND search IS DISTINCT FROM setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B');
