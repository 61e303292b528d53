package worker

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/redact"
	"github.com/memoryd/memoryd/store"
)

// The worker's mapping between the wire's, the store's and the extractor's
// types, in one place: a turn as published (events.Turn) becomes a turn as
// recorded (store.Turn), which the extractor reads as an extractor.Turn; the
// tokens an extraction spent (extractor.Usage) are counted as the store's
// TokenUsage. The enricher maps store types to the wire in enricher/wire.go.

// storeTurn is the turn as recorded. A timestamp later than the time the
// stream stored the event plus skew is clamped to that stored time (and the
// sent one kept in ClampedFrom): a frontend's clock cannot date a turn in
// the future, where it would outrank every later turn and facts.set. The
// stored time is part of the event, so a replay clamps the same way.
//
// The texts are recorded redacted (redact.Text; redacted lists the
// kinds of the spans replaced): Postgres never holds a turn's secrets, and
// no extractor, model server included, is shown them. The stream keeps the
// event as published, under its own retention (docs/operations.md,
// "Sensitive data"); redaction is deterministic, so a replay records the
// same text.
func storeTurn(turn events.Turn, m jetstream.Msg, skew time.Duration) (t store.Turn, clamped bool, redacted []redact.Kind) {
	var (
		seq      uint64
		storedAt time.Time
	)
	if md, err := m.Metadata(); err == nil {
		seq, storedAt = md.Sequence.Stream, md.Timestamp
	}
	userMessage, ku := redact.Text(turn.UserMessage)
	response, kr := redact.Text(turn.AssistantResponse)
	redacted = append(ku, kr...)
	t = store.Turn{
		EventID:           turn.ID,
		UserID:            turn.UserID,
		ConversationID:    turn.ConversationID,
		UserMessage:       userMessage,
		AssistantResponse: response,
		TurnAt:            turn.Timestamp,
		Metadata:          turn.Metadata,
		Scope:             turn.Scope,
		Placed:            store.StreamPosition{Seq: seq, Stored: storedAt},
	}
	if !storedAt.IsZero() && turn.Timestamp.After(storedAt.Add(skew)) {
		sent := turn.Timestamp
		// Postgres keeps microseconds.
		// In the sent offset: the turn's relative dates are its own day's.
		t.TurnAt, t.ClampedFrom = storedAt.In(sent.Location()).Truncate(time.Microsecond), &sent
		return t, true, redacted
	}
	return t, false, redacted
}

// extractorTurn is what the extractor reads of a recorded turn.
func extractorTurn(t store.Turn) extractor.Turn {
	return extractor.Turn{EventID: t.EventID, UserMessage: t.UserMessage, AssistantResponse: t.AssistantResponse, Timestamp: t.TurnAt}
}

// storeUsage counts one extraction's tokens.
func storeUsage(u extractor.Usage) store.TokenUsage {
	return store.TokenUsage{PromptTokens: int64(u.PromptTokens), CompletionTokens: int64(u.CompletionTokens), Extractions: 1}
}
