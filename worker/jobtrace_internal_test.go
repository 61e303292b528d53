package worker

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/riverqueue/river/rivertype"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/memoryd/memoryd/store"
)

// TestTracedTurnsJobJoinsItsTraceInAMixedBatch: in an ingest batch that
// also holds another user's untraced turn (so the batch has a trace of its
// own), the extraction job of a turn published in a trace is inserted as a
// child of that trace, linked to the batch, and its span is so; the
// untraced turn's job stays in the batch's trace. Before, every job of such
// a batch followed the batch: a traced turn's extraction was missing from
// its frontend's trace (27 of 100 traced turns in an audit's run).
func TestTracedTurnsJobJoinsItsTraceInAMixedBatch(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	m := &jobTracing{tracer: tp.Tracer(tracerName)}
	const frontend = "4bf92f3577b34da6a3ce929d0e0e4736"
	alice := store.Turn{UserID: "alice", EventID: "a1"}
	bob := store.Turn{UserID: "bob", EventID: "b1"}
	tt := batchTurnTraces([]store.Turn{alice, bob}, []jetstream.Msg{
		headerMsg{h: nats.Header{"traceparent": []string{"00-" + frontend + "-00f067aa0ba902b7-01"}}},
		headerMsg{h: nats.Header{}},
	})
	ctx, ingest := tp.Tracer(tracerName).Start(withTurnTraces(context.Background(), tt), "memoryd.ingest")
	defer ingest.End()
	params := []*rivertype.JobInsertParams{
		{Kind: ExtractJobKind, EncodedArgs: []byte(`{"user_id":"alice","event_ids":["a1"]}`)},
		{Kind: ExtractJobKind, EncodedArgs: []byte(`{"user_id":"bob","event_ids":["b1"]}`)},
		{Kind: ExtractJobKind, EncodedArgs: []byte(`{"user_id":"alice","event_ids":["a1","a2"]}`)}, // a2 of no trace
	}
	if _, err := m.InsertMany(ctx, params, func(context.Context) ([]*rivertype.JobInsertResult, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	batch := ingest.SpanContext().TraceID()
	for i, want := range []struct {
		trace string
		link  bool
	}{{frontend, true}, {batch.String(), false}, {batch.String(), false}} {
		job := &rivertype.JobRow{Kind: ExtractJobKind, Metadata: params[i].Metadata}
		var span trace.Span
		if err := m.Work(context.Background(), job, func(ctx context.Context) error {
			span = trace.SpanFromContext(ctx)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		ro := span.(sdktrace.ReadOnlySpan)
		linked := len(ro.Links()) == 1 && ro.Links()[0].SpanContext.TraceID() == batch
		if got := ro.SpanContext().TraceID().String(); got != want.trace || linked != want.link {
			t.Errorf("job %d: span in trace %s (linked to the batch: %v), want %s (%v); metadata %s", i, got, linked, want.trace, want.link, params[i].Metadata)
		}
	}
}

// TestJobTurnsTraceWithoutTurnTracesDecodesNothing: with tracing on, every
// insert of extraction jobs passes through jobTurnsTrace; one with no turn
// traces (a batch of untraced turns, replay, reconcile) must not decode
// each job's arguments for nothing.
func TestJobTurnsTraceWithoutTurnTracesDecodesNothing(t *testing.T) {
	args := []byte(`{"user_id":"alice","event_ids":["a1","a2","a3"]}`)
	if n := testing.AllocsPerRun(100, func() { jobTurnsTrace(nil, ExtractJobKind, args) }); n != 0 {
		t.Fatalf("%v allocations a job without turn traces, want 0", n)
	}
}

// TestUnsampledTurnsJobStaysUnsampled: a turn published in a trace its
// frontend did not sample (traceparent flags 00), in a batch that has a
// trace of its own, has its extraction job in that trace and unsampled,
// as in a batch of one, not recorded in the batch's trace.
func TestUnsampledTurnsJobStaysUnsampled(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	m := &jobTracing{tracer: tp.Tracer(tracerName)}
	const frontend = "4bf92f3577b34da6a3ce929d0e0e4736"
	tt := batchTurnTraces([]store.Turn{{UserID: "alice", EventID: "a1"}, {UserID: "bob", EventID: "b1"}}, []jetstream.Msg{
		headerMsg{h: nats.Header{"traceparent": []string{"00-" + frontend + "-00f067aa0ba902b7-00"}}},
		headerMsg{h: nats.Header{}},
	})
	ctx, ingest := tp.Tracer(tracerName).Start(withTurnTraces(context.Background(), tt), "memoryd.ingest")
	defer ingest.End()
	params := []*rivertype.JobInsertParams{{Kind: ExtractJobKind, EncodedArgs: []byte(`{"user_id":"alice","event_ids":["a1"]}`)}}
	if _, err := m.InsertMany(ctx, params, func(context.Context) ([]*rivertype.JobInsertResult, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	var span trace.Span
	if err := m.Work(context.Background(), &rivertype.JobRow{Kind: ExtractJobKind, Metadata: params[0].Metadata}, func(ctx context.Context) error {
		span = trace.SpanFromContext(ctx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if sc := span.SpanContext(); sc.TraceID().String() != frontend || sc.IsSampled() || span.IsRecording() {
		t.Fatalf("job span in trace %s, sampled %v, recording %v; want %s, unsampled; metadata %s", sc.TraceID(), sc.IsSampled(), span.IsRecording(), frontend, params[0].Metadata)
	}
}
