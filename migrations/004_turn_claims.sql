-- A debounced burst claims the pending turns of its conversation before the
-- (slow) extraction call, so that the other jobs of the burst do not extract
-- them again. A claim expires, so a crashed job cannot hold turns forever.
ALTER TABLE turns ADD COLUMN claimed_until timestamptz;
