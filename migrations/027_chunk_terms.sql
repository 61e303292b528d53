-- Chunk term statistics stored at write time (issue 19), as context_terms
-- (migration 025) does for context items: one row per chunk and lexeme of
-- its search vector, with the lexeme's positions in the heading path
-- (weight A) and in the text (weight B). A chunk search whose query is an OR
-- of lexemes (every query but phrases) reads only the rows of the query's
-- lexemes in the searched collections, index-only from the primary key, and
-- aggregates them per chunk in SQL, instead of matching and printing every
-- matching chunk's vector for Go to decode (store.SearchChunks; on a 10,000
-- chunk collection and a query in most chunks, that read was most of an
-- enrich: docs/performance.md, "Knowledge base documents").
--
-- 1. A chunk gets a surrogate id, the terms' key: the chunk's own key holds
-- the document id (text, up to 512 bytes), which each lexeme row would
-- repeat. A replaced document's chunks are deleted and inserted again, so
-- ids are never updated.
ALTER TABLE doc_chunks ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY;
CREATE UNIQUE INDEX doc_chunks_id_idx ON doc_chunks (id);

-- 2. The rows. heading and body count the lexeme's positions in the heading
-- path and in the text (weight A and the others); a lexeme keeps at most
-- 256 positions in a tsvector, so smallint holds them.
CREATE TABLE chunk_terms (
    collection_id bigint   NOT NULL,
    lexeme        text     NOT NULL,
    chunk_id      bigint   NOT NULL,
    heading       smallint NOT NULL,
    body          smallint NOT NULL,
    PRIMARY KEY (collection_id, lexeme, chunk_id) INCLUDE (heading, body)
);

-- 3. memoryd_chunk_terms is the rows of one chunk's vector: a lexeme's
-- positions of weight A (the heading path) and the others (the text); a
-- lexeme without positions counts 0 and 0. It computes what
-- memoryd_item_terms (migration 025) does, without a subquery per lexeme:
-- a put writes a row per distinct lexeme of every chunk, and the
-- subqueries took about two thirds of the rows' computation (measured).
CREATE FUNCTION memoryd_chunk_terms(v tsvector)
RETURNS TABLE (lexeme text, heading smallint, body smallint)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT u.lexeme, a::smallint, (coalesce(cardinality(u.weights), 0) - a)::smallint
FROM unnest(v) u, LATERAL coalesce(cardinality(array_positions(u.weights, 'A')), 0) a
$$;

-- 4. The rows follow the chunks by statement triggers on doc_chunks,
-- whatever writes them (a put, an index job, a delete, a collection's
-- delete or its owner's forget by cascade): no writer can forget them. The
-- terms come from the vector the insert computed (memoryd_chunk_terms reads
-- it, no text is parsed again). A delete removes a chunk's rows by the
-- primary key (its vector names its lexemes), so no index on chunk_id is
-- needed.
CREATE FUNCTION memoryd_chunk_terms_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chunk_terms (collection_id, lexeme, chunk_id, heading, body)
    SELECT n.collection_id, t.lexeme, n.id, t.heading, t.body
    FROM new_chunks n, memoryd_chunk_terms(n.search) t;
    RETURN NULL;
END
$$;

-- No writer updates a chunk's vector today; an update that does (or moves
-- a chunk) replaces its rows all the same.
CREATE FUNCTION memoryd_chunk_terms_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM chunk_terms t
    USING (SELECT o.collection_id, o.id, unnest(tsvector_to_array(o.search)) AS lexeme
        FROM old_chunks o JOIN new_chunks n ON n.id = o.id
        WHERE n.search IS DISTINCT FROM o.search OR n.collection_id <> o.collection_id) d
    WHERE t.collection_id = d.collection_id AND t.lexeme = d.lexeme AND t.chunk_id = d.id;
    INSERT INTO chunk_terms (collection_id, lexeme, chunk_id, heading, body)
    SELECT n.collection_id, t.lexeme, n.id, t.heading, t.body
    FROM new_chunks n JOIN old_chunks o ON o.id = n.id, memoryd_chunk_terms(n.search) t
    WHERE n.search IS DISTINCT FROM o.search OR n.collection_id <> o.collection_id;
    RETURN NULL;
END
$$;

CREATE FUNCTION memoryd_chunk_terms_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM chunk_terms t
    USING (SELECT o.collection_id, o.id, unnest(tsvector_to_array(o.search)) AS lexeme FROM old_chunks o) d
    WHERE t.collection_id = d.collection_id AND t.lexeme = d.lexeme AND t.chunk_id = d.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER chunk_terms_insert_trg AFTER INSERT ON doc_chunks
    REFERENCING NEW TABLE AS new_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION memoryd_chunk_terms_insert();
CREATE TRIGGER chunk_terms_update_trg AFTER UPDATE ON doc_chunks
    REFERENCING OLD TABLE AS old_chunks NEW TABLE AS new_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION memoryd_chunk_terms_update();
CREATE TRIGGER chunk_terms_delete_trg AFTER DELETE ON doc_chunks
    REFERENCING OLD TABLE AS old_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION memoryd_chunk_terms_delete();

-- A TRUNCATE of doc_chunks (tests, a reset) empties the terms too.
CREATE FUNCTION memoryd_chunk_terms_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE chunk_terms;
    RETURN NULL;
END
$$;
CREATE TRIGGER chunk_terms_truncate_trg AFTER TRUNCATE ON doc_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION memoryd_chunk_terms_truncate();

-- On an existing database the backfill reads every chunk's vector once,
-- inside this migration's transaction.
INSERT INTO chunk_terms (collection_id, lexeme, chunk_id, heading, body)
SELECT ch.collection_id, t.lexeme, ch.id, t.heading, t.body
FROM doc_chunks ch, memoryd_chunk_terms(ch.search) t;

-- 5. The documents' total content size, which a put checks against serve's
-- --max-docs-size (store.DocumentPut.MaxTotalBytes), by an index-only scan
-- rather than a read of every document's row (small documents keep their
-- content in it).
CREATE INDEX documents_size_idx ON documents (collection_id) INCLUDE (size_bytes);
