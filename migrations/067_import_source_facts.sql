-- The fact lines an import brought, beside its record of them
-- (import_sources, 036). A fact line that lost to the user's own later
-- statement of the key (the latest wins) was written nowhere but that
-- record's fingerprint: a reset deleted the user's fact, which the replay
-- extracts again, and a replay by a model that no longer extracted it
-- left the user without the key, though the import still said it. A reset
-- now writes each recorded line back by the facts' rule once it has
-- deleted what the replay rebuilds (store.reinstateImportedFacts), so the
-- key holds what the sources that survive it say.
--
-- The line as the import read it (key, value, source time, provenance,
-- updated_at), on the 'f:' rows only; NULL for the other rows and for
-- those of before, which a reset cannot write back (as before). No row is
-- rewritten. import_sources is written by imports of serves of the
-- previous release meanwhile; the ALTER's lock waits at most a second for
-- them (as 059's), then the migration is run again (store.Migrate).
SET LOCAL lock_timeout = '1s';
ALTER TABLE import_sources ADD COLUMN fact jsonb;
