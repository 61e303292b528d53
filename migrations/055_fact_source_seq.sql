-- Two statements of one fact stamped with the same time (a correction sent
-- within the second of the value it corrects, with the second-precision
-- timestamps the protocol's examples use, or a conversation imported under
-- one time) were ordered by event id as text: "evt-9" beat "evt-10", and
-- with random UUIDs the winner was random. The later published statement
-- now wins such a tie: facts and fact_items record the turn's sequence in
-- the turn stream (source_seq), compared after the source time and the
-- direct-write rule and before the event id. 0: no sequence known (a
-- direct write, an import, a row written before this migration or by a
-- process of an earlier release), which loses a tie to any turn that has
-- one, as before by event id among themselves.
--
-- Cost on an existing database: no table rewrite (a constant default only
-- changes the catalog), a brief exclusive lock on each table. Processes of
-- the previous release go on writing 0. IF NOT EXISTS: memoryd migrate adds
-- them first, before migration 051's Go step (which runs today's code).
ALTER TABLE facts ADD COLUMN IF NOT EXISTS source_seq bigint NOT NULL DEFAULT 0;
ALTER TABLE fact_items ADD COLUMN IF NOT EXISTS source_seq bigint NOT NULL DEFAULT 0;
