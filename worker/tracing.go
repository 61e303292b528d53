package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// Tracing (Config.TracerProvider). A turn's trace runs from the frontend's
// publish (its traceparent header, events.InjectTrace) through the ingest
// batch that records it, the River job that extracts it (the trace context
// travels in the job's metadata, metaTrace) and the model call, to the
// transaction that saves its memory. Without a TracerProvider none of this
// runs: w.tracer is nil and every site checks it first, so that tracing off
// costs neither a span nor an allocation.

// tracerName is the instrumentation scope of the worker's spans.
const tracerName = "github.com/memoryd/memoryd/worker"

// metaTrace is the job metadata key holding the trace context (traceparent,
// tracestate) of the job's parent: the span that inserted the job, or the
// trace its turns were published in (turnTraces).
const metaTrace = "memoryd_trace"

// metaTraceLink is the job metadata key holding the trace context of the
// span that inserted the job when metaTrace is its turns' trace instead:
// the job's span links to it.
const metaTraceLink = "memoryd_trace_link"

// turnTraces maps the turns of an ingest batch that were published in a
// trace (their traceparent) to its span context, for jobTracing: a job
// whose turns all belong to one trace joins it, whatever the rest of the
// batch, so that a frontend's trace shows its turn's extraction even when
// the batch held other users' turns.
type turnTraces map[store.TurnKey]trace.SpanContext

type turnTracesKey struct{}

// withTurnTraces returns ctx carrying the batch's turn traces (none: ctx).
func withTurnTraces(ctx context.Context, tt turnTraces) context.Context {
	if len(tt) == 0 {
		return ctx
	}
	return context.WithValue(ctx, turnTracesKey{}, tt)
}

// batchTurnTraces maps each of turns (recorded from msgs, in order) that
// was published in a trace to its span context.
func batchTurnTraces(turns []store.Turn, msgs []jetstream.Msg) turnTraces {
	var tt turnTraces
	for i, m := range msgs {
		sc := trace.SpanContextFromContext(events.ExtractTrace(context.Background(), m.Headers()))
		if !sc.IsValid() {
			continue
		}
		if tt == nil {
			tt = turnTraces{}
		}
		tt[turns[i].Key()] = sc
	}
	return tt
}

// jobTurnsTrace is the one trace every turn of an extraction job (its
// encoded ExtractArgs) was published in, if there is one.
// Without turn traces (a batch of untraced turns, or an insert outside
// ingest: replay, reconcile, takeover, a spend cap's) it decodes nothing.
func jobTurnsTrace(tt turnTraces, kind string, encodedArgs []byte) (trace.SpanContext, bool) {
	if len(tt) == 0 || kind != ExtractJobKind {
		return trace.SpanContext{}, false
	}
	var args struct {
		UserID   string   `json:"user_id"`
		EventIDs []string `json:"event_ids"`
	}
	if json.Unmarshal(encodedArgs, &args) != nil || len(args.EventIDs) == 0 {
		return trace.SpanContext{}, false
	}
	var sc trace.SpanContext
	for _, id := range args.EventIDs {
		t, ok := tt[store.TurnKey{UserID: args.UserID, EventID: id}]
		if !ok || (sc.IsValid() && t.TraceID() != sc.TraceID()) {
			return trace.SpanContext{}, false
		}
		if !sc.IsValid() {
			sc = t
		}
	}
	return sc, true
}

// noSpan stands for a span when tracing is off: ending it does nothing.
var noSpan trace.Span = noop.Span{}

// startIngestSpan starts the span of one ingest batch. The batch belongs to
// its messages' trace when they all carry one and the same trace (the usual
// case: a batch of one); otherwise it starts a trace of its own. Either
// way it links every message's span context, so that a trace viewer leads
// from each publish to the batch that recorded it.
func (w *Worker) startIngestSpan(ctx context.Context, batch []jetstream.Msg) (context.Context, trace.Span) {
	if w.tracer == nil {
		return ctx, noSpan
	}
	var (
		links  []trace.Link
		parent trace.SpanContext
		shared = true
	)
	for _, m := range batch {
		sc := trace.SpanContextFromContext(events.ExtractTrace(context.Background(), m.Headers()))
		if !sc.IsValid() {
			// A message of no trace (another frontend's, another user's)
			// does not join the others' trace: its job would be shown
			// in a trace it has nothing to do with.
			shared = false
			continue
		}
		links = append(links, trace.Link{SpanContext: sc})
		switch {
		case !parent.IsValid():
			parent = sc
		case parent.TraceID() != sc.TraceID():
			shared = false
		}
	}
	if parent.IsValid() && shared {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	return w.tracer.Start(ctx, "memoryd.ingest", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(links...),
		trace.WithAttributes(attribute.String("messaging.system", "nats"), attribute.Int("messaging.batch.message_count", len(batch))))
}

// startSaveSpan starts the span of the transaction that stores turns'
// extracted memory.
func (w *Worker) startSaveSpan(ctx context.Context, turns int) (context.Context, trace.Span) {
	if w.tracer == nil {
		return ctx, noSpan
	}
	return w.tracer.Start(ctx, "memoryd.save", trace.WithAttributes(attribute.Int("memoryd.turns", turns)))
}

// endSpan records err (its kind of failure, not its text, which may quote
// data) and ends span.
func endSpan(span trace.Span, err error, kind string) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, kind)
		span.SetAttributes(attribute.String("error.type", kind))
	}
	span.End()
}

// jobTracing is the River middleware that carries a trace from the
// inserting span to the job's run: on insert it writes the span context of
// the insert's ctx into each job's metadata (metaTrace), and around each
// run it starts the job's span as a child of it. Installed only with a
// TracerProvider.
type jobTracing struct {
	river.MiddlewareDefaults
	tracer trace.Tracer
}

func (m *jobTracing) InsertMany(ctx context.Context, params []*rivertype.JobInsertParams, doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return doInner(ctx)
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	tt, _ := ctx.Value(turnTracesKey{}).(turnTraces)
	for _, p := range params {
		parent, link := carrier, propagation.MapCarrier(nil)
		if sc, ok := jobTurnsTrace(tt, p.Kind, p.EncodedArgs); ok && sc.TraceID() != trace.SpanContextFromContext(ctx).TraceID() {
			// Its turns' own trace, linked to the batch that recorded
			// them.
			parent, link = propagation.MapCarrier{}, carrier
			propagation.TraceContext{}.Inject(trace.ContextWithRemoteSpanContext(context.Background(), sc), parent)
		}
		md, err := withMeta(p.Metadata, metaTrace, parent)
		if err == nil && link != nil {
			md, err = withMeta(md, metaTraceLink, link)
		}
		if err != nil {
			return nil, err
		}
		p.Metadata = md
	}
	return doInner(ctx)
}

func (m *jobTracing) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	var meta struct {
		Trace propagation.MapCarrier `json:"memoryd_trace"`
		Link  propagation.MapCarrier `json:"memoryd_trace_link"`
	}
	var links []trace.Link
	if json.Unmarshal(job.Metadata, &meta) == nil && meta.Trace != nil {
		ctx = propagation.TraceContext{}.Extract(ctx, meta.Trace)
		if meta.Link != nil {
			if sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), meta.Link)); sc.IsValid() {
				links = append(links, trace.Link{SpanContext: sc})
			}
		}
	}
	ctx, span := m.tracer.Start(ctx, "memoryd.job "+job.Kind, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(links...),
		trace.WithAttributes(attribute.String("river.job.kind", job.Kind), attribute.Int64("river.job.id", job.ID),
			attribute.String("river.job.queue", job.Queue), attribute.Int("river.job.attempt", job.Attempt)))
	err := doInner(ctx)
	endSpan(span, err, jobErrorKind(err))
	return err
}

// jobErrorKind labels a job's error for its span: River's outcome when it
// is one, else "error".
func jobErrorKind(err error) string {
	var end *jobEnd
	switch {
	case err == nil:
		return ""
	case errors.As(err, &end):
		return end.label
	}
	return "error"
}

// withMeta returns the job metadata md (a JSON object, or empty) with key
// set to v.
func withMeta(md []byte, key string, v any) ([]byte, error) {
	m := map[string]json.RawMessage{}
	if len(md) > 0 {
		if err := json.Unmarshal(md, &m); err != nil {
			return nil, fmt.Errorf("job metadata: %w", err)
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("job metadata: %w", err)
	}
	m[key] = b
	return json.Marshal(m)
}
