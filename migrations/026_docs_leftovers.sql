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

-- 2. A user's default collections: what enrich searches when a request
-- names no collections (memory.docs.defaults). Rows go with their
-- collection (deleted, or forgotten with its owner) and with the user
-- (forget); a shared collection whose grant was revoked stays listed but is
-- no longer read (store.readable checks the grant at every search).
CREATE TABLE doc_defaults (
    user_id       text    NOT NULL,
    collection_id bigint  NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
    position      integer NOT NULL,
    PRIMARY KEY (user_id, collection_id)
);
CREATE INDEX doc_defaults_collection_idx ON doc_defaults (collection_id);
