package enricher

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/memoryd/memoryd/events"
)

// noSpan stands for a request's span when tracing is off.
var noSpan trace.Span = noop.Span{}

// startSpan starts the span of one request to endpoint, continuing the
// requester's trace from the message's traceparent header
// (events.ExtractTrace). With tracing off (no Config.TracerProvider) it
// returns a background context and noSpan, allocating nothing. The span
// names the user by a hash (userHash), never by id or token, and holds no
// message text.
func (s *Service) startSpan(req micro.Request, endpoint, token string) (context.Context, trace.Span) {
	if s.tracer == nil {
		return context.Background(), noSpan
	}
	ctx := events.ExtractTrace(context.Background(), nats.Header(req.Headers()))
	return s.tracer.Start(ctx, "memoryd."+endpoint, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("messaging.system", "nats"), attribute.String("memoryd.user_hash", userHash(s.traceKey, token))))
}

// userHash names a request's user in its span without the user id (a plain
// id is its own token): the first 8 bytes of the token's HMAC-SHA-256 under
// key, in hex, the same for all of one user's requests to one process. An
// unkeyed hash was reversible: hashing guessed ids (names, e-mail
// addresses) found every user of an audit's spans.
func userHash(key []byte, token string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(token))
	return hex.EncodeToString(m.Sum(nil)[:8])
}

// endSpan ends a request's span; code is the error code replied, 0 for
// success.
func endSpan(span trace.Span, code int) {
	if code != 0 && span.IsRecording() {
		span.SetStatus(codes.Error, genericError(code))
		span.SetAttributes(attribute.Int("memoryd.error_code", code))
	}
	span.End()
}
