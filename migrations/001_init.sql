-- Turns received from the stream. One row per event id: the primary key is the
-- idempotency key of ingestion, so a redelivered event never creates a second
-- job. Opted-out turns (memory:false) are never written here.
CREATE TABLE turns (
    event_id           text        PRIMARY KEY,
    user_id            text        NOT NULL,
    conversation_id    text        NOT NULL DEFAULT '',
    user_message       text        NOT NULL,
    assistant_response text        NOT NULL DEFAULT '',
    turn_at            timestamptz NOT NULL,
    metadata           jsonb,
    stream_seq         bigint,
    status             text        NOT NULL DEFAULT 'pending'
                       CHECK (status IN ('pending', 'processed', 'failed')),
    attempts           integer     NOT NULL DEFAULT 0,
    last_error         text,
    received_at        timestamptz NOT NULL DEFAULT now(),
    processed_at       timestamptz,
    extractor          text,
    model              text,
    prompt_version     text
);
CREATE INDEX turns_user_status_idx ON turns (user_id, status);
CREATE INDEX turns_failed_idx ON turns (received_at) WHERE status = 'failed';

-- Durable facts, one value per (user, key). source_at is the timestamp of the
-- turn (or direct write) that set the value: a write with an older source_at
-- never overwrites a newer one, so job order and replays do not matter.
CREATE TABLE facts (
    user_id        text        NOT NULL,
    key            text        NOT NULL,
    value          text        NOT NULL,
    source_at      timestamptz NOT NULL,
    event_id       text        NOT NULL DEFAULT '',
    extractor      text        NOT NULL DEFAULT '',
    model          text        NOT NULL DEFAULT '',
    prompt_version text        NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, key)
);

-- Every change of a fact: insert (old_value NULL), update of the value, delete
-- (new_value NULL). Written by a trigger so that no write path can skip it.
CREATE TABLE fact_history (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id    text        NOT NULL,
    key        text        NOT NULL,
    old_value  text,
    new_value  text,
    event_id   text        NOT NULL DEFAULT '',
    source_at  timestamptz,
    changed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX fact_history_user_key_idx ON fact_history (user_id, key, id);

CREATE FUNCTION memoryd_fact_history() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO fact_history (user_id, key, old_value, new_value, event_id, source_at)
        VALUES (NEW.user_id, NEW.key, NULL, NEW.value, NEW.event_id, NEW.source_at);
    ELSIF TG_OP = 'UPDATE' THEN
        IF NEW.value IS DISTINCT FROM OLD.value THEN
            INSERT INTO fact_history (user_id, key, old_value, new_value, event_id, source_at)
            VALUES (NEW.user_id, NEW.key, OLD.value, NEW.value, NEW.event_id, NEW.source_at);
        END IF;
    ELSE
        INSERT INTO fact_history (user_id, key, old_value, new_value, event_id, source_at)
        VALUES (OLD.user_id, OLD.key, OLD.value, NULL, '', NULL);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER facts_history_trg AFTER INSERT OR UPDATE OR DELETE ON facts
    FOR EACH ROW EXECUTE FUNCTION memoryd_fact_history();

-- Question/answer pairs worth remembering. created_at is the turn's own
-- timestamp (recency is about when it was said, not when it was processed).
-- content_hash covers the user id and the normalised question and answer, and
-- is unique per user only: the same pair stored by two users is kept for both.
CREATE TABLE context (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id         text        NOT NULL,
    question        text        NOT NULL,
    answer          text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    event_id        text        NOT NULL DEFAULT '',
    conversation_id text        NOT NULL DEFAULT '',
    content_hash    bytea       NOT NULL,
    extractor       text        NOT NULL DEFAULT '',
    model           text        NOT NULL DEFAULT '',
    prompt_version  text        NOT NULL DEFAULT '',
    inserted_at     timestamptz NOT NULL DEFAULT now(),
    search          tsvector    GENERATED ALWAYS AS (
                        setweight(to_tsvector('english'::regconfig, question), 'A') ||
                        setweight(to_tsvector('english'::regconfig, answer), 'B')
                    ) STORED,
    CONSTRAINT context_user_hash_key UNIQUE (user_id, content_hash)
);
CREATE INDEX context_search_idx ON context USING gin (search);
CREATE INDEX context_user_created_idx ON context (user_id, created_at DESC);
CREATE INDEX context_event_idx ON context (event_id);
