-- A vector delete's bump of its users' embedding generations (021) locks
-- their rows in user order, as the other bumps do. 021's UPDATE ... FROM
-- (... ORDER BY 1) left the order to the plan: from about ten deleted
-- vectors on, a hash join that reads embedding_generations in the table's
-- order, which is the order the rows were last written in. A save of
-- several users' vectors bumps them in user order (an insert sorted by
-- user), and each held a row the other waited for: a deadlock failing the
-- save or the delete, such as the prune's drop of an earlier model's
-- vectors beside the embedding of every item in the new one
-- (TestDropOfOtherModelsBesideSaveOfSeveralUsers). The rows are locked
-- first, sorted (a locking SELECT locks the rows as its sort hands them
-- over), and only those are bumped.
CREATE OR REPLACE FUNCTION memoryd_embeddings_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    users text[];
BEGIN
    SELECT array_agg(l.user_id) INTO users FROM (
        SELECT g.user_id FROM embedding_generations g
        WHERE g.user_id IN (SELECT user_id FROM changed)
        ORDER BY g.user_id
        FOR NO KEY UPDATE) l;
    UPDATE embedding_generations SET generation = nextval('embedding_generation_seq')
    WHERE user_id = ANY(users);
    RETURN NULL;
END
$$;
