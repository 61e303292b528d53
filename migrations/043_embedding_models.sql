-- The dimensions of each embedding model's vectors (context items' and
-- document chunks' alike): recorded from the first reply saved under the
-- model's name. A reply of other dimensions under the same name is another
-- model behind it (an Ollama tag pulled anew, a LiteLLM alias pointed
-- elsewhere): the embed jobs refuse it rather than store vectors that no
-- query of the other size can be compared with, and the sweep and backfill
-- count a vector of other dimensions as missing. `memoryd embed --backfill
-- --dims N` records N for the model, to re-embed with the new one.
CREATE TABLE embedding_models (
    model       text        PRIMARY KEY,
    dims        integer     NOT NULL CHECK (dims > 0),
    recorded_at timestamptz NOT NULL DEFAULT now()
);

-- A database that stored vectors before: each model's most common
-- dimensions (those of most of its vectors), so that a backfill repairs
-- the others.
INSERT INTO embedding_models (model, dims)
SELECT DISTINCT ON (model) model, dims FROM (
    SELECT model, dims, count(*) AS n FROM (
        SELECT model, dims FROM context_embeddings
        UNION ALL
        SELECT model, dims FROM chunk_embeddings
    ) v GROUP BY model, dims
) c ORDER BY model, n DESC, dims DESC;
