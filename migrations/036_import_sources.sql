-- What an import brought (issue 20's review, "replay --reset deletes
-- imported memory"). A reset deletes the facts, list items and context
-- items a replay rebuilds, found by their source turn's event id; but event
-- ids are unique per user only, and an export's (another memoryd's, or
-- another user's) may name one of this user's recorded turns that said
-- something else, which a replay could never rebuild it from. Each row an
-- import writes is recorded by its event id and what it holds: 'c:' and the
-- context item's content hash in hex, 'f:<key>:' and the md5 of a fact's
-- value, 'i:<key>:' and a list item's identity. A reset keeps the rows that
-- still hold exactly that; the user's own rows under the same event id, and
-- rows an extraction later took over, go with a reset as any other.
CREATE TABLE import_sources (
    user_id  text NOT NULL,
    event_id text NOT NULL,
    content  text NOT NULL,
    PRIMARY KEY (user_id, event_id, content)
);
