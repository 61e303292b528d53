package enricher

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/nats-io/nats.go/micro"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store/storetest"
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

// TestUserHashIsKeyedPerProcess: a span's user hash is one user's across
// their requests and not another's, and it cannot be found by hashing a
// guessed user id: it is keyed, with a key of each service's own.
func TestUserHashIsKeyedPerProcess(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	st := storetest.New(t)
	nc := eventstest.Conn(t)
	hash := func(s *Service, token string) string {
		t.Helper()
		exp.Reset()
		_, span := s.startSpan(headerRequest{}, "enrich", token)
		endSpan(span, 0)
		spans := exp.GetSpans()
		if len(spans) != 1 {
			t.Fatalf("%d spans, want 1", len(spans))
		}
		for _, a := range spans[0].Attributes {
			if a.Key == "memoryd.user_hash" {
				return a.Value.AsString()
			}
		}
		t.Fatalf("span has no memoryd.user_hash: %v", spans[0].Attributes)
		return ""
	}
	newService := func() *Service {
		s, err := New(Config{Conn: nc, Store: st, TracerProvider: tp})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := newService(), newService()
	alice := hash(a, "alice")
	sum := sha256.Sum256([]byte("alice"))
	switch {
	case alice != hash(a, "alice"):
		t.Fatal("one user's two requests have different hashes")
	case alice == hash(a, "bob"):
		t.Fatal("two users have one hash")
	case alice == hex.EncodeToString(sum[:8]):
		t.Fatal("the user hash is the token's plain SHA-256: hashing a guessed id finds the user")
	case len(alice) != 16:
		t.Fatalf("user hash %q, want 16 hex digits", alice)
	case alice == hash(b, "alice"):
		t.Fatal("two services hash a user alike: their key is not their own")
	}
}
