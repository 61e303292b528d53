package enricher

import "context"

// SweepVectorCache runs one sweep of the service's vector cache now, as
// its sweeper does every vectorSweepEvery, and returns what it dropped.
func (s *Service) SweepVectorCache(ctx context.Context) (int, error) {
	return s.hybrid.sweep(ctx, s.cfg.Store.(GenerationReader))
}
