package enricher

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/micro"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

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

// BenchmarkRequestSpan measures what tracing adds to one request: off (no
// TracerProvider) and on (the SDK, every span sampled, exported to memory).
// The header read is left out: startSpan is given no request off, and
// builds its context from an empty header on.
func BenchmarkRequestSpan(b *testing.B) {
	b.Run("off", func(b *testing.B) {
		s := &Service{}
		b.ReportAllocs()
		for b.Loop() {
			_, span := s.startSpan(nil, "enrich", "tok")
			endSpan(span, 0)
		}
	})
	b.Run("on", func(b *testing.B) {
		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		defer func() { _ = tp.Shutdown(context.Background()) }()
		s := &Service{tracer: tp.Tracer("bench")}
		req := headerRequest{}
		b.ReportAllocs()
		for b.Loop() {
			_, span := s.startSpan(req, "enrich", "tok")
			endSpan(span, 0)
			exp.Reset()
		}
	})
}

// headerRequest is a micro.Request with no headers, for the benchmark.
type headerRequest struct{ micro.Request }

func (headerRequest) Headers() micro.Headers { return nil }
