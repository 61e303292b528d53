-- Knowledge base leftovers (issue 19).
--
-- 1. A chunk's search vector and its two field lengths were three generated
-- columns, so each chunk's heading and text went through memoryd_tsvector
-- twice (once for the vector, once for the length). They become plain
-- columns that store.PutDocument/IndexDocument fill from one
-- memoryd_tsvector per field (existing rows keep their values).
ALTER TABLE doc_chunks ALTER COLUMN search DROP EXPRESSION;
ALTER TABLE doc_chunks ALTER COLUMN heading_len DROP EXPRESSION;
ALTER TABLE doc_chunks ALTER COLUMN text_len DROP EXPRESSION;
ALTER TABLE doc_chunks ALTER COLUMN search SET NOT NULL;
ALTER TABLE doc_chunks ALTER COLUMN heading_len SET NOT NULL;
ALTER TABLE doc_chunks ALTER COLUMN text_len SET NOT NULL;
