-- A turn-stream sequence means something only in the stream that numbered
-- it: a stream deleted and created again under the same name numbers from
-- 1 anew. So a place in the stream is now its sequence and the time
-- JetStream stored the event there (stream_stored_at): the new stream's
-- events are stored after every event of the old one. Migration 042 told
-- streams apart
-- by their creation time, but nats-server 2.9.10 reports a later creation
-- time after a configuration update and a restart, which made turns
-- published before a clear look published after it; an event's stored time
-- does not change.
--
-- A turn records when its event was stored; a forget's tombstone and a
-- clear record the stream's last event (its sequence and stored time; the
-- stream's creation time while it has held none). A turn is before a
-- tombstone or a clear when it is stored more than 2 s before it, or at or
-- below its sequence and stored no more than 2 s after it: within one
-- stream the sequence decides (stored times follow the storing server's
-- clock, which may differ between a cluster's servers or step back), and a
-- stream created again stores its events after the old one's. Before, a
-- user forgotten at sequence 90,000 who came back after the stream was
-- created again had every new turn dropped until the new stream passed
-- 90,000.
--
-- NULL: not known (rows written before this migration, or by a process of
-- an earlier release). A tombstone or a turn without it is compared by
-- sequence alone, as before; a clear without it covers turns by their
-- timestamps alone (its stream_created of migration 042 is no longer read).
-- A tombstone's stream_stored_seq is the sequence its stored time goes
-- with; stream_seq stays what turns without a stored time are compared with
-- (the greatest sequence of them all, as before: such turns may be of a
-- stream since created again, whose sequences say nothing of the new one's
-- turns stored just after the forget). Its stream_stored_for is the
-- forgotten_at those go with: a forget by a process of an earlier release
-- sets forgotten_at and stream_seq alone, and the tombstone is then
-- compared by sequence alone, as that release's own checks compare it.
--
-- Cost on an existing database: no table rewrite (nullable columns without
-- a default only change the catalog), a brief exclusive lock on each table.
ALTER TABLE turns ADD COLUMN stream_stored_at timestamptz;
ALTER TABLE tombstones ADD COLUMN stream_stored_seq bigint, ADD COLUMN stream_stored_at timestamptz,
    ADD COLUMN stream_stored_for timestamptz;
ALTER TABLE context_clears ADD COLUMN stream_stored_at timestamptz;
ALTER TABLE fact_clears ADD COLUMN stream_stored_at timestamptz;
ALTER TABLE fact_direct_clears ADD COLUMN stream_stored_at timestamptz;
