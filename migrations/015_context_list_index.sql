-- Listing a user's context items newest first, paged by (created_at, id)
-- (store.ListContext): with id in the index, a page is one index range scan
-- with no sort, ties on created_at included. It serves every use of the
-- (user_id, created_at DESC) index it replaces.
CREATE INDEX context_user_created_id_idx ON context (user_id, created_at DESC, id DESC);
DROP INDEX context_user_created_idx;
