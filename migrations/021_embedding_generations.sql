-- Embedding generations (issue 17 items 2 and 3): a per-user value that
-- changes whenever the set of the user's usable vectors may have changed, so
-- that a process can cache a user's vectors and check, inside the same
-- statement that reads a request's candidates (store.Recall), that its copy
-- is still exact. Checked in the same round trip, it cannot miss a change
-- the way a notification can, and costs one primary-key probe.
--
-- Every value comes from one sequence, so a generation is never reused: a
-- cache that holds generation g is current exactly when the row still says
-- g. A row exists once the user has had a vector (of any model), or an item
-- of theirs changed; no row reads as generation 0, "no vectors", which is
-- true of it. Triggers only insert or bump rows, never delete them: a
-- delete decided from a statement's snapshot ("no vector left") could miss
-- a vector a concurrent transaction is saving, and the user would read as
-- "no vectors" with vectors. Forget deletes the row (store.ForgetUser),
-- under the user's forget lock, after deleting every vector.
--
-- What bumps it, by triggers, so that no writer can forget to:
--   * a vector inserted or replaced (store.SaveEmbeddings, one statement);
--   * a vector deleted, directly or by the cascade of its item's delete
--     (clear, context.delete, prune, forget, reset);
--   * an item's text (content_hash), scope or time changed: its vector no
--     longer describes it, or the cache's copy of its scope and time is
--     stale. This one upserts: an edit racing the user's first vector
--     save then waits for the save's row and bumps it after, rather than
--     finding no row to bump.
CREATE SEQUENCE embedding_generation_seq;

CREATE TABLE embedding_generations (
    user_id    text   PRIMARY KEY,
    generation bigint NOT NULL
);

INSERT INTO embedding_generations (user_id, generation)
SELECT u, nextval('embedding_generation_seq')
FROM (SELECT DISTINCT user_id AS u FROM context_embeddings ORDER BY 1) x;

-- Users are bumped in user_id order, so that two statements touching the
-- same users lock their rows in the same order.
CREATE FUNCTION memoryd_embeddings_written() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO embedding_generations AS g (user_id, generation)
    SELECT u, nextval('embedding_generation_seq')
    FROM (SELECT DISTINCT user_id AS u FROM changed ORDER BY 1) x
    ON CONFLICT (user_id) DO UPDATE SET generation = excluded.generation;
    RETURN NULL;
END
$$;

CREATE FUNCTION memoryd_embeddings_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE embedding_generations g SET generation = nextval('embedding_generation_seq')
    FROM (SELECT DISTINCT user_id AS u FROM changed ORDER BY 1) x
    WHERE g.user_id = x.u;
    RETURN NULL;
END
$$;

-- Statement triggers with transition tables: one bump per user and
-- statement, however many vectors it wrote (a cascade runs as one statement
-- per deleting statement on context).
CREATE TRIGGER context_embeddings_insert_gen AFTER INSERT ON context_embeddings
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION memoryd_embeddings_written();
CREATE TRIGGER context_embeddings_update_gen AFTER UPDATE ON context_embeddings
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION memoryd_embeddings_written();
CREATE TRIGGER context_embeddings_delete_gen AFTER DELETE ON context_embeddings
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION memoryd_embeddings_deleted();

-- An item edited (context.update), or its scope or time changed.
CREATE FUNCTION memoryd_context_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO embedding_generations AS g (user_id, generation)
    VALUES (NEW.user_id, nextval('embedding_generation_seq'))
    ON CONFLICT (user_id) DO UPDATE SET generation = excluded.generation;
    RETURN NULL;
END
$$;
CREATE TRIGGER context_embedding_gen AFTER UPDATE OF content_hash, scope, created_at ON context
    FOR EACH ROW
    WHEN (OLD.content_hash IS DISTINCT FROM NEW.content_hash OR OLD.scope IS DISTINCT FROM NEW.scope
        OR OLD.created_at IS DISTINCT FROM NEW.created_at)
    EXECUTE FUNCTION memoryd_context_changed();
