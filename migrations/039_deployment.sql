-- What this database serves: the NATS subject prefix whose memory it holds,
-- and its turn stream. One row, recorded by the first memoryd serve or
-- replay to use the database. Memory is keyed by user id alone, so two
-- prefixes' memoryd on one database would read and write each other's
-- users, and one's extraction jobs would publish changes under the other's
-- prefix: serve, replay and forget of another prefix are refused.
CREATE TABLE deployment (
    one        boolean PRIMARY KEY DEFAULT true CHECK (one),
    prefix     text NOT NULL,
    stream     text NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT now()
);
