-- Knowledge bases (issue 19): collections of documents, cut into chunks
-- (package chunker) that are searched beside context items and ranked the
-- same way (BM25F: the chunk's heading path is one field, its text the
-- other). Documents are not derived from the turn stream: replay never
-- touches these tables.

-- A collection is owned by one user (owner_kind 'user', owner the user id)
-- or by a shared scope (owner_kind 'shared', owner the scope's name) that
-- users read only through an explicit grant (collection_readers). Its chunk
-- size and overlap are in chunker tokens; ts_config is the text search
-- configuration its chunks are indexed with: its owner user's language when
-- the collection was created (english for a shared scope).
CREATE TABLE collections (
    id             bigserial   PRIMARY KEY,
    owner_kind     text        NOT NULL CHECK (owner_kind IN ('user', 'shared')),
    owner          text        NOT NULL,
    name           text        NOT NULL,
    chunk_tokens   integer     NOT NULL DEFAULT 200,
    overlap_tokens integer     NOT NULL DEFAULT 30,
    ts_config      text        NOT NULL DEFAULT 'english',
    created_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (owner_kind, owner, name)
);

-- A document: its id in the collection (the client's, or derived from its
-- source name), its content (kept so that a River job can chunk it later and
-- so that a re-put of the same bytes is recognised by hash), and its status:
-- 'pending' until its current content's chunks are written, then 'ready'.
CREATE TABLE documents (
    collection_id bigint      NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
    doc_id        text        NOT NULL,
    source        text        NOT NULL,
    content_hash  text        NOT NULL,
    content       text        NOT NULL,
    metadata      jsonb       NOT NULL DEFAULT '{}',
    size_bytes    bigint      NOT NULL,
    status        text        NOT NULL CHECK (status IN ('pending', 'ready')),
    chunks        integer     NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (collection_id, doc_id)
);

-- A chunk of a document's current content. heading is the heading path
-- joined with " > " (what the search vector indexes, weight A); the text
-- weight B; both under the collection's configuration, CJK as bigrams as
-- context items have (memoryd_tsvector, migration 020). Replacing a
-- document's content deletes and inserts its chunks in one transaction.
CREATE TABLE doc_chunks (
    collection_id bigint  NOT NULL,
    doc_id        text    NOT NULL,
    chunk_index   integer NOT NULL,
    heading_path  text[]  NOT NULL DEFAULT '{}',
    heading       text    NOT NULL DEFAULT '',
    text          text    NOT NULL,
    byte_start    integer NOT NULL,
    byte_end      integer NOT NULL,
    ts_config     text    NOT NULL,
    search        tsvector GENERATED ALWAYS AS (
        setweight(memoryd_tsvector(ts_config, heading), 'A') ||
        setweight(memoryd_tsvector(ts_config, text), 'B')
    ) STORED,
    heading_len   integer GENERATED ALWAYS AS (length(memoryd_tsvector(ts_config, heading))) STORED,
    text_len      integer GENERATED ALWAYS AS (length(memoryd_tsvector(ts_config, text))) STORED,
    PRIMARY KEY (collection_id, doc_id, chunk_index),
    FOREIGN KEY (collection_id, doc_id) REFERENCES documents (collection_id, doc_id) ON DELETE CASCADE
);
CREATE INDEX doc_chunks_search_idx ON doc_chunks USING gin (search);
-- Per-collection statistics (count and mean lengths) by an index-only scan.
CREATE INDEX doc_chunks_collection_len_idx ON doc_chunks (collection_id) INCLUDE (heading_len, text_len);

-- Who may read a shared scope's collections from their own subjects
-- (memory.docs.search, enrich): granted by an operator (memoryd docs grant),
-- never by a frontend.
CREATE TABLE collection_readers (
    scope      text        NOT NULL,
    user_id    text        NOT NULL,
    granted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, user_id)
);
CREATE INDEX collection_readers_user_idx ON collection_readers (user_id);
