-- Model tokens spent on each user's turns, per model (LLM extractor only).
CREATE TABLE llm_usage (
    user_id           text   NOT NULL,
    model             text   NOT NULL,
    prompt_tokens     bigint NOT NULL DEFAULT 0,
    completion_tokens bigint NOT NULL DEFAULT 0,
    extractions       bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, model)
);
