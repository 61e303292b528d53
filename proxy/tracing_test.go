package proxy_test

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/proxy"
)

// chatWith sends a chat request for alice with extra headers and returns
// the traceparent the upstream received.
func chatWith(t *testing.T, e *env, header http.Header) string {
	t.Helper()
	e.chat(t, `{"model":"m","messages":[{"role":"user","content":"I live in Lisbon"}]}`, header)
	e.up.mu.Lock()
	defer e.up.mu.Unlock()
	return e.up.parents[len(e.up.parents)-1]
}

// publishedParent is the traceparent of alice's last published turn, once
// the proxy has published it.
func publishedParent(t *testing.T, e *env) string {
	t.Helper()
	e.stop() // waits for the turn's publish
	msg, err := e.turnStream(t).GetLastMsgForSubject(context.Background(), events.TurnSubject(e.prefix, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	return msg.Header.Get(events.HeaderTraceParent)
}

// TestTraceContinuesClientTrace: a chat request carrying a client's
// traceparent gets a span of its trace, child of the client's span; the
// upstream request and the published turn carry that span's context.
func TestTraceContinuesClientTrace(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	e := newEnv(t, func(c *proxy.Config) { c.TracerProvider = tp })

	ctx, client := tp.Tracer("client").Start(context.Background(), "client.chat")
	h := http.Header{}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
	client.End()
	upstream := chatWith(t, e, h)
	published := publishedParent(t, e)

	var span tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == "memoryd.proxy.chat" {
			span = s
		}
	}
	if !span.SpanContext.IsValid() {
		t.Fatal("no memoryd.proxy.chat span")
	}
	if span.SpanContext.TraceID() != client.SpanContext().TraceID() || span.Parent.SpanID() != client.SpanContext().SpanID() {
		t.Fatalf("proxy span %v (parent %v), want a child of the client's %v", span.SpanContext, span.Parent, client.SpanContext())
	}
	for where, parent := range map[string]string{"upstream request": upstream, "published turn": published} {
		got := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
			propagation.MapCarrier{"traceparent": parent}))
		if got.TraceID() != span.SpanContext.TraceID() || got.SpanID() != span.SpanContext.SpanID() {
			t.Errorf("%s carries traceparent %q, want the proxy span %v", where, parent, span.SpanContext)
		}
	}
}

// TestTracingOffAddsNoHeader: without a TracerProvider the proxy adds no
// traceparent, to the upstream request or to the published turn.
func TestTracingOffAddsNoHeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	if got := chatWith(t, e, nil); got != "" {
		t.Errorf("upstream received traceparent %q from a proxy without tracing", got)
	}
	if got := publishedParent(t, e); got != "" {
		t.Errorf("published turn carries traceparent %q from a proxy without tracing", got)
	}
}
