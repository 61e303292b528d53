-- A takeover ends the claims of the jobs it takes over (store.TakeOverJobs):
-- find them without scanning every turn.
CREATE INDEX turns_claimed_by_idx ON turns (claimed_by) WHERE claimed_by IS NOT NULL;
