-- The event ids an import brought (issue 20's review, "replay --reset
-- deletes imported memory"). A reset deletes the facts, list items and
-- context items a replay rebuilds, found by their source turn's event id;
-- but event ids are unique per user only, and an export's (another
-- memoryd's, or another user's) may name one of this user's recorded turns
-- that said something else, which a replay could never rebuild them from.
-- A reset keeps rows whose event id an import brought. Rows an extraction
-- later took over carry that turn's id, and go with a reset as any other.
CREATE TABLE import_sources (
    user_id  text NOT NULL,
    event_id text NOT NULL,
    PRIMARY KEY (user_id, event_id)
);
