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
// tracestate) of the span that inserted the job.
const metaTrace = "memoryd_trace"

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
	for _, p := range params {
		md, err := withMeta(p.Metadata, metaTrace, carrier)
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
	}
	if json.Unmarshal(job.Metadata, &meta) == nil && meta.Trace != nil {
		ctx = propagation.TraceContext{}.Extract(ctx, meta.Trace)
	}
	ctx, span := m.tracer.Start(ctx, "memoryd.job "+job.Kind, trace.WithSpanKind(trace.SpanKindConsumer),
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
