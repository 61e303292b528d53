package worker_test

import (
	"fmt"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/worker"
)

// TestTracedTurnsExtractionInItsTrace: a turn published in a trace has its
// extraction job in that trace, and another user's untraced turn, published
// beside it, does not, whether ingest records them in one batch (the batch
// then has a trace of its own) or in two.
func TestTracedTurnsExtractionInItsTrace(t *testing.T) {
	e := setup(t)
	ctx, chat := sdktrace.NewTracerProvider().Tracer("frontend").Start(e.ctx, "chat")
	if _, err := e.pub.Publish(ctx, events.Turn{ID: "a1", UserID: "alice", UserMessage: "I live in Oslo", Timestamp: t0}); err != nil {
		t.Fatal(err)
	}
	chat.End()
	e.publish(events.Turn{ID: "b1", UserID: "bob", UserMessage: "I live in Rome"})
	rec := tracetest.NewSpanRecorder()
	e.start(extractor.NewRules(), func(c *worker.Config) { c.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)) })
	e.waitDone(2)
	jobs := func() []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == "memoryd.job "+worker.ExtractJobKind {
				out = append(out, s)
			}
		}
		return out
	}
	e.waitFor("both extraction jobs' spans", func() (bool, string) {
		return len(jobs()) >= 2, fmt.Sprint(len(jobs()), " job spans")
	})
	in := 0
	for _, s := range jobs() {
		if s.SpanContext().TraceID() == chat.SpanContext().TraceID() {
			in++
		}
	}
	if in != 1 {
		t.Fatalf("%d of %d extraction job spans in the frontend's trace, want alice's alone", in, len(jobs()))
	}
}
