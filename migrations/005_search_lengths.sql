-- Per-field lengths for search ranking (BM25F length normalisation, see
-- store/search.go): the number of distinct english lexemes of the question
-- and of the answer, the same units the search vector holds. Stored, so a
-- search reads them instead of re-parsing the text; the index lets the user's
-- item count and mean lengths be read from the index alone.
ALTER TABLE context
    ADD COLUMN question_len integer GENERATED ALWAYS AS (length(to_tsvector('english'::regconfig, question))) STORED,
    ADD COLUMN answer_len   integer GENERATED ALWAYS AS (length(to_tsvector('english'::regconfig, answer))) STORED;
CREATE INDEX context_user_len_idx ON context (user_id) INCLUDE (question_len, answer_len);
