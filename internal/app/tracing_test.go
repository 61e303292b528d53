package app

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor/extractortest"
)

// spanRecorder is an in-memory trace pipeline for tests: the SDK's
// in-memory exporter, and a channel of the names of ended spans to wait on.
type spanRecorder struct {
	tp    *sdktrace.TracerProvider
	exp   *tracetest.InMemoryExporter
	ended chan string
}

func newSpanRecorder(t *testing.T) *spanRecorder {
	t.Helper()
	r := &spanRecorder{exp: tracetest.NewInMemoryExporter(), ended: make(chan string, 1000)}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(r.exp), sdktrace.WithSpanProcessor(endNotifier(r.ended)))
	t.Cleanup(func() { _ = r.tp.Shutdown(context.Background()) })
	return r
}

// waitEnded waits until a span named name has ended.
func (r *spanRecorder) waitEnded(t *testing.T, name string) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case n := <-r.ended:
			if n == name {
				return
			}
		case <-timeout:
			t.Fatalf("span %q did not end; spans: %v", name, spanNames(r.exp.GetSpans()))
		}
	}
}

// byName returns the one exported span named name.
func (r *spanRecorder) byName(t *testing.T, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range r.exp.GetSpans() {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q, want 1; spans: %v", len(found), name, spanNames(r.exp.GetSpans()))
	}
	return found[0]
}

func spanNames(spans tracetest.SpanStubs) []string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
	}
	return names
}

// endNotifier is a span processor that sends the name of every ended span.
type endNotifier chan string

func (n endNotifier) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (n endNotifier) OnEnd(s sdktrace.ReadOnlySpan)                   { n <- s.Name() }
func (n endNotifier) Shutdown(context.Context) error                  { return nil }
func (n endNotifier) ForceFlush(context.Context) error                { return nil }

// TestTraceFromPublishToStoredContext follows one turn: a frontend's span
// around events.Publisher.Publish, then memoryd's ingest batch, the River
// extraction job, the model call (a fake OpenAI-compatible server) and the
// save of its memory must all be one trace, each span the child of the one
// before (the model call and the save both of the job), with no message
// text or user id in any attribute. Then an enrich request sent inside a
// frontend span is answered in a span continuing that trace.
func TestTraceFromPublishToStoredContext(t *testing.T) {
	t.Parallel()
	rec := newSpanRecorder(t)
	llm := extractortest.NewServer(t, extractortest.Content(`{"facts":{"location":"Oslo"},"context":[{"q":"Where do I live?","a":"Oslo"}]}`))
	a := startTestApp(t, func(c *Config) {
		c.LLM.BaseURL, c.LLM.Model = llm.URL(), "fake-model"
		c.Tracing.Provider = rec.tp
	})
	frontend := rec.tp.Tracer("frontend")

	ctx, root := frontend.Start(context.Background(), "frontend.publish")
	js, err := jetstream.New(a.nc)
	if err != nil {
		t.Fatal(err)
	}
	turn := events.Turn{ID: "t-1", UserID: "alice-secret-id", UserMessage: "I live in Oslo", Timestamp: time.Now().UTC()}
	if _, err := events.NewPublisher(js, a.cfg.Prefix).Publish(ctx, turn); err != nil {
		t.Fatal(err)
	}
	root.End()
	wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.WaitProcessed(wctx, turn.UserID, 1, nil); err != nil {
		t.Fatal(err)
	}
	rec.waitEnded(t, "memoryd.job memoryd_extract") // ends after the save

	client := events.NewClient(a.nc, a.cfg.Prefix)
	if st, err := client.Stats(context.Background(), turn.UserID); err != nil || st.ContextItems != 1 {
		t.Fatalf("stored context: %+v, %v", st, err)
	}
	publish := rec.byName(t, "frontend.publish")
	ingest := rec.byName(t, "memoryd.ingest")
	job := rec.byName(t, "memoryd.job memoryd_extract")
	call := rec.byName(t, "memoryd.llm.chat")
	save := rec.byName(t, "memoryd.save")
	traceID := publish.SpanContext.TraceID()
	for _, c := range []struct {
		span   tracetest.SpanStub
		parent trace.SpanContext
	}{{ingest, publish.SpanContext}, {job, ingest.SpanContext}, {call, job.SpanContext}, {save, job.SpanContext}} {
		if got := c.span.SpanContext.TraceID(); got != traceID {
			t.Errorf("%s: trace %s, want the publish's %s", c.span.Name, got, traceID)
		}
		if got := c.span.Parent.SpanID(); got != c.parent.SpanID() {
			t.Errorf("%s: parent span %s, want %s", c.span.Name, got, c.parent.SpanID())
		}
	}
	if len(ingest.Links) != 1 || ingest.Links[0].SpanContext.SpanID() != publish.SpanContext.SpanID() {
		t.Errorf("ingest links %+v, want the publish's span", ingest.Links)
	}
	for _, kv := range save.Attributes {
		if kv.Key == "memoryd.context.written" && kv.Value.AsInt64() != 1 {
			t.Errorf("save span: %s = %d, want 1", kv.Key, kv.Value.AsInt64())
		}
	}

	// Enrich continues the requester's trace.
	ctx, asker := frontend.Start(context.Background(), "frontend.enrich")
	reply, err := client.Enrich(ctx, events.EnrichRequest{UserID: turn.UserID, Message: "Where do I live?"})
	asker.End()
	if err != nil || reply.Degraded {
		t.Fatalf("enrich: %+v, %v", reply, err)
	}
	rec.waitEnded(t, "memoryd.enrich")
	enrich := rec.byName(t, "memoryd.enrich")
	if enrich.Parent.SpanID() != asker.SpanContext().SpanID() || enrich.SpanContext.TraceID() != asker.SpanContext().TraceID() {
		t.Errorf("enrich span parent %s in trace %s, want %s in %s", enrich.Parent.SpanID(), enrich.SpanContext.TraceID(),
			asker.SpanContext().SpanID(), asker.SpanContext().TraceID())
	}

	for _, s := range rec.exp.GetSpans() {
		for _, kv := range s.Attributes {
			v := kv.Value.Emit()
			if strings.Contains(v, "Oslo") || strings.Contains(v, "live") || strings.Contains(v, turn.UserID) {
				t.Errorf("span %s attribute %s = %q holds message text or the user id", s.Name, kv.Key, v)
			}
		}
	}
}

// TestTracingOff runs memoryd without tracing while the process's global
// OpenTelemetry provider records: memoryd must make no span (it never
// falls back to the global provider), and a turn published and an enrich
// sent without a span carry no trace header.
func TestTracingOff(t *testing.T) {
	// Not parallel: it sets the global provider.
	rec := newSpanRecorder(t)
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(rec.tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	a := startTestApp(t, nil)
	turn := events.Turn{ID: "t-1", UserID: "bob", UserMessage: "I live in Bergen", Timestamp: time.Now().UTC()}
	publishAndWait(t, a, turn.UserID, turn)
	reply, err := events.NewClient(a.nc, a.cfg.Prefix).Enrich(context.Background(), events.EnrichRequest{UserID: turn.UserID, Message: "Where do I live?"})
	if err != nil || reply.Degraded {
		t.Fatalf("enrich: %+v, %v", reply, err)
	}
	js, err := jetstream.New(a.nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(context.Background(), a.cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.GetMsg(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get(jetstream.MsgIDHeader) == "" {
		t.Fatalf("stored message has no %s: not the published turn (headers %v)", jetstream.MsgIDHeader, msg.Header)
	}
	if v := msg.Header.Get(events.HeaderTraceParent); v != "" {
		t.Errorf("published turn carries traceparent %q without a span", v)
	}
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if spans := rec.exp.GetSpans(); len(spans) != 0 {
		t.Errorf("tracing off made spans: %v", spanNames(spans))
	}
}

// TestStopWithCollectorRefusing stops memoryd while its OTLP endpoint
// answers every export 503 (a collector's memory limiter refusing, or one
// restarting): the buffered spans are lost at the deadline, but the stop is
// clean. Found by an outside-in audit: `serve` took the whole
// --shutdown-timeout and exited 1 with "shutdown: tracing: shutdown:
// context deadline exceeded" on every SIGTERM.
func TestStopWithCollectorRefusing(t *testing.T) {
	t.Parallel()
	refused := make(chan struct{}, 1)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case refused <- struct{}{}:
		default:
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(collector.Close)
	if err := stopWithCollector(t, collector.URL, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("stop with the collector refusing: %v", err)
	}
	select {
	case <-refused:
	default:
		t.Fatal("no span was sent to the collector: the test did not test a refused export")
	}
}

// TestTracingEndpointChecked: an OTLP endpoint that is not an http(s) URL,
// or that carries credentials (which the exporter would drop without a
// word, the collector then refusing every export), is refused naming the
// field, and the refusal does not print the password.
func TestTracingEndpointChecked(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ endpoint, want string }{
		{"127.0.0.1:4318", "is not an http(s) URL"},
		{"https://alice:pw-SECRET@collector:4318", "carries credentials"},
		{"https://pw-SECRET@collector:4318", "carries credentials"}, // a token as the user
		// Not URLs, and shown in the error that says so.
		{"https://alice:pw/SECRET@collector:4318", "is not an http(s) URL"},
		{"https://alice:pw%zzSECRET@collector:4318", "is not an http(s) URL"},
		{"alice:pw-SECRET@collector:4318", "is not an http(s) URL"},
		{"http://collector:4318", ""},
	} {
		tr, err := StartTracing(TracingConfig{OTLPEndpoint: tt.endpoint}, "test")
		if err == nil {
			_ = tr.Shutdown(context.Background()) // nothing buffered: no export
		}
		var cerr *ConfigError
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.endpoint, err)
		case tt.want != "" && (!errors.As(err, &cerr) || cerr.Field != "Tracing.OTLPEndpoint" || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want a ConfigError of Tracing.OTLPEndpoint saying %q", tt.endpoint, err, tt.want)
		case err != nil && strings.Contains(err.Error(), "SECRET"):
			t.Errorf("%s: the error prints the password: %v", tt.endpoint, err)
		}
	}
}

// TestStopWithCollectorDown stops memoryd while nothing listens at its
// OTLP endpoint (the collector down): the stop is clean, and the spans
// still buffered, lost, are logged as such.
func TestStopWithCollectorDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	var logs eventstest.SyncBuffer
	if err := stopWithCollector(t, "http://"+addr, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatalf("stop with the collector down: %v", err)
	}
	if !strings.Contains(logs.String(), "traces still buffered at stop were not all exported") {
		t.Errorf("no warning of the spans lost at stop; log:\n%s", logs.String())
	}
}

// stopWithCollector starts memoryd exporting spans to endpoint, has it
// process a turn, and returns what its Stop (within 2 s) returns.
func stopWithCollector(t *testing.T, endpoint string, logger *slog.Logger) error {
	t.Helper()
	cfg := testConfig(t)
	cfg.Logger = logger
	cfg.Tracing.OTLPEndpoint = endpoint
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	turn := events.Turn{ID: "t-1", UserID: "bob", UserMessage: "I live in Bergen", Timestamp: time.Now().UTC()}
	publishAndWait(t, a, turn.UserID, turn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return a.Stop(ctx)
}
