package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
)

// The dead-letter side of the turn contract (docs/protocol.md, "Publishing
// turns"): memoryd copies an event it rejects to
// "<prefix>.deadletter.<user-token>" in the stream "<turn stream>_DEADLETTER",
// with these headers, and terminates it. Operators read dead letters with
// these names; forgetting a user finds that user's dead letters by them.

// Dead-letter headers: why an event was rejected and where it came from.
const (
	// HeaderReason says why the event was rejected.
	HeaderReason = "Memoryd-Reason"
	// HeaderOriginalSubject is the subject the event was published on.
	HeaderOriginalSubject = "Memoryd-Original-Subject"
	// HeaderStreamSeq is the event's sequence in the turn stream.
	HeaderStreamSeq = "Memoryd-Stream-Seq"
	// HeaderStreamStored is when the turn stream stored the event (RFC
	// 3339, nanoseconds): with HeaderStreamSeq, the event's place in the
	// stream, which a forget compares with its tombstone's.
	HeaderStreamStored = "Memoryd-Stream-Stored"
	// HeaderUserToken is the user token of the event's user_id, when the
	// body has one that can be read, so that forgetting the user finds the
	// dead letter whatever subject the event came on.
	HeaderUserToken = "Memoryd-User-Token"
	// HeaderOptedOut is "true" on the dead letter of an event sent with
	// memory off: it holds the event's ids, timestamp and the sizes of its
	// fields (OptedOutCopy), never its text, and the event itself was
	// erased from the turn stream.
	HeaderOptedOut = "Memoryd-Opted-Out"
)

// deadLetterSuffix turns a turn stream's name into its dead-letter stream's.
const deadLetterSuffix = "_DEADLETTER"

// DefaultDeadLetterStream is the dead-letter stream of DefaultStream.
const DefaultDeadLetterStream = DefaultStream + deadLetterSuffix

// DeadLetterStream is the name of the dead-letter stream that goes with the
// turn stream named stream: stream + "_DEADLETTER".
func DeadLetterStream(stream string) string { return stream + deadLetterSuffix }

// DeadLetterSubject is the subject a rejected event is copied to:
// "<prefix>.deadletter.<token>", where token is the user token of the
// subject the event came on, or "_" when that subject carried none.
func DeadLetterSubject(prefix, token string) string {
	if token == "" {
		token = "_"
	}
	return prefix + ".deadletter." + token
}

// DeadLetterSubjects is the wildcard subject the dead-letter stream captures.
func DeadLetterSubjects(prefix string) string { return prefix + ".deadletter.>" }

// DeadLetter is one rejected event as the dead-letter stream holds it.
type DeadLetter struct {
	// Seq is its sequence in the dead-letter stream, Time when it was
	// stored there, Subject the dead-letter subject it is on.
	Seq     uint64
	Time    time.Time
	Subject string
	// Reason, OriginalSubject, StreamSeq and UserToken are its headers
	// (HeaderReason, ...); UserToken is empty when the body had no
	// readable user_id.
	Reason, OriginalSubject, StreamSeq, UserToken string
	// OptedOut: the event was sent with memory off, and Data is its
	// OptedOutCopy, without its text (HeaderOptedOut).
	OptedOut bool
	// Data is the event as it was published, when asked for; nil otherwise.
	Data []byte
}

// ErrNoDeadLetters is returned by ReadDeadLetters when the dead-letter
// stream does not exist: nothing was ever rejected (memoryd creates it
// when it starts ingesting).
var ErrNoDeadLetters = errors.New("no dead-letter stream")

// deadLetterStall is how long ReadDeadLetters waits for the next message
// before it looks whether one is left to read.
const deadLetterStall = 2 * time.Second

// ReadDeadLetters returns the last limit dead letters (at most; limit ≥ 1)
// that the dead-letter stream of the turn stream named stream holds when it
// is called, oldest first: every one under prefix, or, when userID is not
// empty, those attributed to that user (on the user's dead-letter subject,
// or naming the user's token in HeaderUserToken: an event the user
// published on another user's subject). With withData it reads the events
// too, which hold the users' text; without, headers only.
func ReadDeadLetters(ctx context.Context, js jetstream.JetStream, prefix, stream, userID string, limit int, withData bool) ([]DeadLetter, error) {
	if limit < 1 {
		return nil, fmt.Errorf("read dead letters: limit %d is not positive", limit)
	}
	ictx, cancel := InfoContext(ctx, js)
	st, err := js.Stream(ictx, DeadLetterStream(stream))
	cancel()
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%w %s", ErrNoDeadLetters, DeadLetterStream(stream))
	}
	if err != nil {
		return nil, fmt.Errorf("read dead letters: %w", NoJetStream(err))
	}
	through := st.CachedInfo().State.LastSeq
	if st.CachedInfo().State.Msgs == 0 {
		return nil, nil
	}
	subj, token := DeadLetterSubjects(prefix), ""
	if userID != "" {
		token = UserToken(userID)
	}
	var (
		out  []DeadLetter // a ring of the last limit, oldest at next
		next int
	)
	err = ReadThrough(ctx, st, subj, through, withData, deadLetterStall, func(m jetstream.Msg, md *jetstream.MsgMetadata) bool {
		h := m.Headers()
		d := DeadLetter{Seq: md.Sequence.Stream, Time: md.Timestamp, Subject: m.Subject(),
			Reason: h.Get(HeaderReason), OriginalSubject: h.Get(HeaderOriginalSubject),
			StreamSeq: h.Get(HeaderStreamSeq), UserToken: h.Get(HeaderUserToken), OptedOut: h.Get(HeaderOptedOut) == "true"}
		if withData {
			d.Data = slices.Clone(m.Data())
		}
		if token != "" && d.Subject != DeadLetterSubject(prefix, token) && d.UserToken != token {
			return true
		}
		if len(out) < limit {
			out = append(out, d)
		} else {
			out[next] = d
			next = (next + 1) % limit
		}
		return true
	})
	if err != nil {
		// Not NoJetStream: the stream answered above, so a read that runs
		// out of time is no server without JetStream (a review).
		return nil, fmt.Errorf("read dead letters: %w", err)
	}
	// Oldest first.
	return append(out[next:], out[:next]...), nil
}

// OptedOutCopy returns what the dead letter of an invalid event sent with
// memory off holds in its place, and whether data is such an event: its
// ids (each cut to its limit), its timestamp as sent, "memory": false, and
// in "sizes" the encoded size of each of its fields and of the event, but
// none of its text (user_message, assistant_response, metadata), which
// the user asked memoryd not to keep.
//
// Only the "memory" field is read, leniently: memory is off when data is
// a JSON object whose "memory" is present and neither true nor null, so a
// value memoryd cannot take for a boolean ("false", 0) counts as off, the
// safe reading. A body that is not a JSON object (malformed, truncated)
// says nothing about memory: it is not one, and is dead-lettered whole.
func OptedOutCopy(data []byte) ([]byte, bool) {
	var raw map[string]json.RawMessage
	if json.NewDecoder(bytes.NewReader(data)).Decode(&raw) != nil {
		return nil, false
	}
	// Field names as Decode reads them: case-insensitively ("Memory" is
	// memory). Any spelling of memory saying other than true or null is
	// memory off: when one event holds several, the safe reading.
	body, optedOut := make(map[string]json.RawMessage, len(raw)), false
	for k, v := range raw {
		k = strings.ToLower(k)
		body[k] = v
		if k == "memory" {
			if v := string(bytes.TrimSpace(v)); v != "true" && v != "null" {
				optedOut = true
			}
		}
	}
	if !optedOut {
		return nil, false
	}
	out := map[string]any{"memory": false}
	sizes := map[string]int{"event": len(data)}
	for _, f := range []string{"id", "user_id", "conversation_id", "scope", "timestamp", "memory", "user_message", "assistant_response", "metadata"} {
		if raw, ok := body[f]; ok {
			sizes[f] = len(raw)
		}
	}
	out["sizes"] = sizes
	for f, limit := range map[string]int{"id": MaxIDBytes, "user_id": MaxUserIDBytes, "conversation_id": MaxConversationIDBytes, "scope": MaxScopeBytes,
		"timestamp": maxTimestampBytes} {
		var v string
		if json.Unmarshal(body[f], &v) == nil && v != "" {
			out[f] = cutUTF8(v, limit)
		}
	}
	copied, err := json.Marshal(out)
	if err != nil {
		return nil, false
	}
	return copied, true
}

// maxTimestampBytes bounds the timestamp an OptedOutCopy keeps: an RFC
// 3339 time with nanoseconds and an offset is 35 bytes.
const maxTimestampBytes = 64

// cutUTF8 cuts s to at most limit bytes, at a character boundary.
func cutUTF8(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	s = s[:limit]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
