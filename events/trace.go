package events

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The W3C Trace Context headers (https://www.w3.org/TR/trace-context/) a
// published turn or a request may carry, so that memoryd's spans join the
// sender's trace. Both are optional; a malformed traceparent is ignored.
const (
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
)

// traceContext is the one propagator of the contract: W3C Trace Context
// only, whatever global propagator a program installed, so that the headers
// are the ones protocol.md names.
var traceContext propagation.TraceContext

// InjectTrace sets traceparent (and tracestate, when there is one) on msg
// from the span context of ctx. Without a valid span context (no tracing,
// or none started) it adds nothing, not even an empty header. Publisher and
// Client call it for every message they send.
func InjectTrace(ctx context.Context, msg *nats.Msg) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	traceContext.Inject(ctx, headerCarrier(msg.Header))
}

// ExtractTrace returns ctx with the remote span context of h's traceparent
// and tracestate, for a span that continues the sender's trace. Without a
// valid traceparent it returns ctx unchanged.
func ExtractTrace(ctx context.Context, h nats.Header) context.Context {
	if h.Get(HeaderTraceParent) == "" {
		return ctx
	}
	return traceContext.Extract(ctx, headerCarrier(h))
}

// headerCarrier adapts nats.Header, whose keys are kept as written (the
// lower-case names above), to the propagator.
type headerCarrier nats.Header

func (c headerCarrier) Get(key string) string { return nats.Header(c).Get(key) }
func (c headerCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }
func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
