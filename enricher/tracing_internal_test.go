package enricher

import "testing"

// TestTracingOffAllocatesNothing: with tracing off, a request's span costs
// no allocation on the enrich path (startSpan returns before reading the
// request, and noSpan is a no-op).
func TestTracingOffAllocatesNothing(t *testing.T) {
	s := &Service{}
	allocs := testing.AllocsPerRun(1000, func() {
		ctx, span := s.startSpan(nil, "enrich", "tok")
		if span.IsRecording() {
			t.Fatal("tracing off made a recording span")
		}
		endSpan(span, 500)
		_ = ctx
	})
	if allocs != 0 {
		t.Fatalf("tracing off allocates %v times per request, want 0", allocs)
	}
}
