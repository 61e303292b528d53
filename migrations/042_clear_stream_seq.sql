-- A clear is final for every turn published before it, whatever the turn's
-- timestamp: a frontend whose clock runs ahead (within the allowed skew)
-- stamps a turn published before a clear later than the clear. So a clear
-- made by a memory tool also records where the turn stream stood: its last
-- sequence (stream_seq) and its creation time (stream_created), since a
-- stream deleted and created again under the same name numbers from 1
-- anew and its sequences say nothing about the clear. A turn is before the
-- clear when its timestamp is no later than cleared_at, or when its
-- sequence is at or below stream_seq in the stream created at
-- stream_created. 0 and NULL: no position known (clears made before this
-- migration, by a process of an earlier release, by a turn, or imported),
-- judged by time alone as before.
--
-- Cost on an existing database: no table rewrite (a constant default and
-- a nullable column only change the catalog), a brief exclusive lock on
-- each table. Processes of the previous release go on writing clears
-- without a position and extracting without this check.
ALTER TABLE context_clears ADD COLUMN stream_seq bigint NOT NULL DEFAULT 0,
    ADD COLUMN stream_created timestamptz;
ALTER TABLE fact_clears ADD COLUMN stream_seq bigint NOT NULL DEFAULT 0,
    ADD COLUMN stream_created timestamptz;
ALTER TABLE fact_direct_clears ADD COLUMN stream_seq bigint NOT NULL DEFAULT 0,
    ADD COLUMN stream_created timestamptz;
