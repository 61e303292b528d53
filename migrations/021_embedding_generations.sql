-- Embedding generations (issue 17 items 2 and 3): a per-user value that
-- changes whenever the set of the user's usable vectors may have changed, so
-- that a process can cache a user's vectors and check, inside the same
-- statement that reads a request's candidates (store.Recall), that its copy
-- is still exact. Checked in the same round trip, it cannot miss a change
-- the way a notification can, and costs one primary-key probe.
--
-- Every value comes from one sequence, so a generation is never reused: a
-- cache that holds generation g is current exactly when the row still says
-- g. A row exists while the user has vectors (of any model); no row reads as
-- generation 0, "no vectors", which is true of it. Forget, which removes
-- every vector, so leaves no row behind.
--
-- What bumps it, by triggers, so that no writer can forget to:
--   * a vector inserted or replaced (store.SaveEmbeddings, one statement);
--   * a vector deleted, directly or by the cascade of its item's delete
--     (clear, context.delete, prune, forget, reset); the row goes when the
--     user has no vector left;
--   * an item's text (content_hash), scope or time changed: its vector no
--     longer describes it, or the cache's copy of its scope and time is
--     stale.
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
    DELETE FROM embedding_generations g
    WHERE g.user_id IN (SELECT user_id FROM changed)
      AND NOT EXISTS (SELECT FROM context_embeddings e WHERE e.user_id = g.user_id);
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

-- An item edited (context.update), or its scope or time changed: only users
-- with vectors have a row to bump.
CREATE FUNCTION memoryd_context_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE embedding_generations SET generation = nextval('embedding_generation_seq')
    WHERE user_id = NEW.user_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER context_embedding_gen AFTER UPDATE OF content_hash, scope, created_at ON context
    FOR EACH ROW
    WHEN (OLD.content_hash IS DISTINCT FROM NEW.content_hash OR OLD.scope IS DISTINCT FROM NEW.scope
        OR OLD.created_at IS DISTINCT FROM NEW.created_at)
    EXECUTE FUNCTION memoryd_context_changed();
