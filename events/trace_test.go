package events_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/memoryd/memoryd/events"
)

// TestTraceHeaders: without a span nothing is added (not even a header
// map); with one, the traceparent written is the one ExtractTrace reads
// back as the same remote span context.
func TestTraceHeaders(t *testing.T) {
	msg := &nats.Msg{Subject: "x"}
	events.InjectTrace(context.Background(), msg)
	if msg.Header != nil {
		t.Fatalf("no span, yet headers %v", msg.Header)
	}
	if allocs := testing.AllocsPerRun(100, func() { events.InjectTrace(context.Background(), msg) }); allocs != 0 {
		t.Fatalf("InjectTrace without a span allocates %v times", allocs)
	}

	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(context.Background(), "send")
	defer span.End()
	events.InjectTrace(ctx, msg)
	if msg.Header.Get(events.HeaderTraceParent) == "" {
		t.Fatalf("span, but no traceparent: %v", msg.Header)
	}
	got := trace.SpanContextFromContext(events.ExtractTrace(context.Background(), msg.Header))
	if !got.IsRemote() || got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() {
		t.Fatalf("extracted %v, want the remote form of %v", got, span.SpanContext())
	}
	bad := nats.Header{events.HeaderTraceParent: {"00-zz-zz-01"}}
	if sc := trace.SpanContextFromContext(events.ExtractTrace(context.Background(), bad)); sc.IsValid() {
		t.Fatalf("a malformed traceparent gave %v", sc)
	}
}
