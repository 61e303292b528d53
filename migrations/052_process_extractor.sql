-- The extractor each live worker process extracts with ("rules", or "llm"
-- and the model; NULL for a process that extracts nothing: an enrich
-- serve, an embed backfill), so that a replay run by hand with another
-- one (the offline rules where the serves ask a model) is refused before
-- it runs the extraction jobs, its own and the live turns' alike, with it.
ALTER TABLE memoryd_processes ADD COLUMN extractor text;
