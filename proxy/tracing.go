package proxy

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// traceContext is the W3C Trace Context propagator, the one HTTP and NATS
// (events) share.
var traceContext propagation.TraceContext

// noSpan stands for a request's span when tracing is off.
var noSpan trace.Span = noop.Span{}

// startSpan starts a chat request's span, continuing the client's trace
// (its traceparent header), and returns the request with the span in its
// context. Off (no Config.TracerProvider), it returns r and noSpan and reads
// no header. The span holds no message text and no key: the status code
// and whether memory was injected.
func (p *Proxy) startSpan(r *http.Request) (*http.Request, trace.Span) {
	if p.tracer == nil {
		return r, noSpan
	}
	ctx := traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := p.tracer.Start(ctx, "memoryd.proxy.chat", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
	return r.WithContext(ctx), span
}
