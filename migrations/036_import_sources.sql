-- What an import brought that no turn memoryd recorded stated (issue 20's
-- review, "replay --reset deletes imported memory"): the event id and time
-- of each imported fact, list item and context item whose turn is not the
-- user's recorded turn with that id and time. A reset keeps rows carrying
-- such a provenance: an export's event ids are another memoryd's (or
-- another user's), unique per user only, and may name a recorded turn
-- here that said something else, which a replay could never rebuild them
-- from. Rows that an extraction later took over carry that turn's
-- provenance, and go with a reset as any other.
CREATE TABLE import_sources (
    user_id  text NOT NULL,
    event_id text NOT NULL,
    at       timestamptz NOT NULL,
    PRIMARY KEY (user_id, event_id, at)
);
