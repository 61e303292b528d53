package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/textproto"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StreamConfig describes the turn stream.
type StreamConfig struct {
	// Prefix is the subject prefix. Default "memory".
	Prefix string
	// Stream is the stream name. Default "MEMORY_TURNS".
	Stream string
	// DuplicateWindow is how long JetStream remembers event ids to drop
	// re-publishes. Default 2 minutes (JetStream's own default).
	DuplicateWindow time.Duration
	// Replicas is the replica count the stream is created with (1 on a
	// single server, 3 in a cluster). Default 1. An existing stream keeps
	// its own.
	Replicas int
	// MaxAge discards turns older than this. Default 0: kept forever, since the
	// stream is the source of truth for replay.
	MaxAge time.Duration
}

func (c StreamConfig) withDefaults() StreamConfig {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Stream == "" {
		c.Stream = DefaultStream
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = 2 * time.Minute
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	return c
}

// EnsureStream creates the turn stream when it is missing. An existing stream
// is kept as its operator configured it (replicas, limits, placement); only
// a missing turn subject is added. It is idempotent and safe to call from
// every process at start-up.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) (jetstream.Stream, error) {
	cfg = cfg.withDefaults()
	subject := TurnSubjects(cfg.Prefix)
	ictx, cancel := InfoContext(ctx, js)
	s, err := js.Stream(ictx, cfg.Stream)
	cancel()
	switch {
	case err == nil:
		have := s.CachedInfo().Config
		// A stream made by hand with another retention deletes turns once
		// acknowledged (work queue) or consumed (interest): the stream is
		// then no source of truth, and replay cannot read it.
		if have.Retention != jetstream.LimitsPolicy {
			return nil, fmt.Errorf("ensure stream %s: its retention is %s, but memoryd keeps every turn in the stream (replay reads them again): create the stream again with limits retention (JetStream cannot change a stream's retention)", cfg.Stream, have.Retention)
		}
		if slices.Contains(have.Subjects, subject) {
			return s, nil
		}
		subjects := slices.Clone(have.Subjects)
		have.Subjects = append(have.Subjects, subject)
		if s, err = js.UpdateStream(ctx, have); err != nil {
			return nil, fmt.Errorf("ensure stream %s: add subject %s to its subjects %v (a stream of memoryd's holds %s, not a wider subject, which would take memoryd's requests too): %w",
				cfg.Stream, subject, subjects, subject, overlapping(ctx, js, subject, err))
		}
		return s, nil
	case errors.Is(err, jetstream.ErrStreamNotFound):
		s, err = js.CreateStream(ctx, jetstream.StreamConfig{
			Name:        cfg.Stream,
			Description: "memoryd conversation turns (source of truth for memory)",
			Subjects:    []string{subject},
			Storage:     jetstream.FileStorage,
			Retention:   jetstream.LimitsPolicy,
			Duplicates:  cfg.DuplicateWindow,
			Replicas:    cfg.Replicas,
			MaxAge:      cfg.MaxAge,
			MaxMsgSize:  MaxEventBytes,
		})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return js.Stream(ctx, cfg.Stream) // created concurrently
		}
		if err == nil {
			return s, nil
		}
	}
	err = NoJetStream(err)
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return nil, fmt.Errorf("ensure stream %s: the NATS server runs without JetStream (start it with -js): %w", cfg.Stream, err)
	}
	return nil, fmt.Errorf("ensure stream %s: %w", cfg.Stream, overlapping(ctx, js, subject, err))
}

// NoJetStream returns err, a JetStream API call's error, wrapped in
// jetstream.ErrJetStreamNotEnabled when it is nats.ErrNoResponders: nothing
// answers the JetStream API, so the server runs without JetStream (the
// jetstream package reports such a server as no responders); and in
// ErrJetStreamNoAnswer when the call ran out of time. Other errors are
// returned as they are.
func NoJetStream(err error) error {
	switch {
	case errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, jetstream.ErrJetStreamNotEnabled):
		return fmt.Errorf("%w (%w)", jetstream.ErrJetStreamNotEnabled, err)
	case (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)) && !errors.Is(err, ErrJetStreamNoAnswer):
		return fmt.Errorf("%w (%w)", ErrJetStreamNoAnswer, err)
	}
	return err
}

// ErrJetStreamNoAnswer is a JetStream API call that ran out of time
// (NoJetStream). A server whose account has "jetstream: enabled" but
// which runs no JetStream itself (no -js, no jetstream block: Debian's
// /etc/nats-server.conf) does not answer an account with imports at all
// (nats-server 2.9.10 sends no "no responders"), and commands failed on
// "context deadline exceeded" (a newcomer's walk); an overloaded server
// does the same.
var ErrJetStreamNoAnswer = errors.New("the NATS server's JetStream API did not answer in time")

// errCodeSubjectOverlap is the JetStream API's error code for a stream
// whose subjects another stream holds already (nats-server's
// JSStreamSubjectOverlapErr; nats.go names no constant for it).
const errCodeSubjectOverlap = 10065

// overlapping names the stream that holds subject when err says another
// stream's subjects overlap: the usual cause is a prefix whose stream has
// another name than the one asked for.
func overlapping(ctx context.Context, js jetstream.JetStream, subject string, err error) error {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != errCodeSubjectOverlap {
		return err
	}
	name, lerr := js.StreamNameBySubject(ctx, subject)
	if lerr != nil || name == "" {
		return err
	}
	return fmt.Errorf("the turn subjects %s are in stream %s already: name that stream (memoryd's --stream %s): %w", subject, name, name, err)
}

// Publisher publishes turns to the turn stream. It is safe for concurrent use.
// The acknowledgement comes back on the connection's inbox: a frontend
// confined to its own reply subjects connects with FrontendInbox. Publish
// needs only publish permission on the turn subject; it uses no JetStream API
// subject (EnsureStream does).
type Publisher struct {
	js     jetstream.JetStream
	prefix string
}

// NewPublisher returns a publisher that sends turns under prefix (default
// "memory" when empty). It does not create the stream: memoryd does when it
// starts. EnsureStream creates it too, but needs the JetStream API, which
// the frontend credential docs/protocol.md describes is not granted (with
// it, EnsureStream times out): call it only with a credential that has it.
func NewPublisher(js jetstream.JetStream, prefix string) *Publisher {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return &Publisher{js: js, prefix: prefix}
}

// MsgID is the Nats-Msg-Id of a turn: the user token, a colon and the event
// id. JetStream deduplicates on it across the whole stream, and event ids are
// unique per user only, so the token keeps two users' turns with the same id
// apart.
func MsgID(userID, id string) string { return UserToken(userID) + ":" + id }

// Publish validates turn and publishes it, waiting for JetStream's
// acknowledgement. When ctx holds a span (OpenTelemetry), the message
// carries its traceparent, and memoryd's spans for the turn join that trace. A re-publish of the same user and id inside the duplicate
// window is acknowledged with PubAck.Duplicate set and stored once.
//
// Errors: ErrInvalid (errors.Is) is final: fix the turn. An API error
// 10054 (message size exceeds maximum allowed) is final too. A timeout
// (ctx's deadline, or the JetStream context's default when ctx has none:
// errors.Is(err, context.DeadlineExceeded); nats.go returns no
// nats.ErrTimeout here) may have reached the stream: publish the same turn
// again, same id, which is then a duplicate if it had. ErrRequestRefused
// (the turn's subject is not this credential's) is final: on a connection
// made with TrackViolations (FrontendInbox includes it) the publish ends
// with it as soon as the server reports the refusal, without waiting out
// ctx's deadline; on another, a timeout wraps it when the connection's
// last error tells, which of several turns refused at once only the last
// does. A timeout wrapping ErrReplyRefused means the acknowledgement's
// inbox is not this credential's: the turn may be stored; connect with
// FrontendInbox, then publish it again. Both wrap
// nats.ErrPermissionViolation.
// jetstream.ErrNoStreamResponse means no stream captures the subject: the
// prefix is not memoryd's, or the stream is not created yet (EnsureStream);
// with a short deadline it shows as a timeout, so a publish that keeps
// timing out is worth checking for it.
func (p *Publisher) Publish(ctx context.Context, turn Turn) (*jetstream.PubAck, error) {
	if err := turn.Validate(); err != nil {
		return nil, err
	}
	data, err := json.Marshal(turn)
	if err != nil {
		return nil, fmt.Errorf("encode turn: %w", err)
	}
	if len(data) > MaxEventBytes {
		return nil, invalid("", "event is %d bytes, over the %d byte limit", len(data), MaxEventBytes)
	}
	msg := &nats.Msg{
		Subject: TurnSubject(p.prefix, turn.UserID),
		Data:    data,
		Header:  nats.Header{},
	}
	msgID := MsgID(turn.UserID, turn.ID)
	if textproto.TrimString(msgID) != msgID || strings.ContainsAny(msgID, "\r\n") {
		// nats.go sends a header value trimmed of its edge white space,
		// line breaks as spaces: "x " would go as "x", the Nats-Msg-Id of
		// another turn, and the stream would drop it as that one's
		// duplicate.
		return nil, invalid("id", "has white space at its ends or a line break, which the Nats-Msg-Id header cannot carry")
	}
	msg.Header.Set(jetstream.MsgIDHeader, msgID)
	InjectTrace(ctx, msg)
	// The limit is on the whole message, headers as sent included: the
	// stream refuses a larger one (error 10054) only after the round trip.
	if n := len(data) + headerBytes(msg.Header); n > MaxEventBytes {
		return nil, invalid("", "event is %d bytes with its headers, over the %d byte limit", n, MaxEventBytes)
	}
	ctx, before := watchRefusal(ctx, p.js.Conn(), msg.Subject)
	defer before.done()
	ack, err := p.js.PublishMsg(ctx, msg)
	if err != nil {
		if r := refusedEarly(ctx, err); r != nil {
			return nil, fmt.Errorf("publish turn %s: %w", turn.ID, r)
		}
		if kind, violation := refused(p.js.Conn(), msg.Subject, before); kind != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)) {
			return nil, fmt.Errorf("publish turn %s: %w (%s): %w", turn.ID, kind, violation, err)
		}
		if errors.Is(err, jetstream.ErrNoStreamResponse) {
			// JetStream says only "no response from stream".
			return nil, fmt.Errorf("publish turn %s: no stream answered for %s: none captures it (is memoryd serve running with this publisher's prefix? it creates the stream), or JetStream is unavailable: %w", turn.ID, msg.Subject, err)
		}
		return nil, fmt.Errorf("publish turn %s: %w", turn.ID, err)
	}
	return ack, nil
}

// headerBytes is the size of h as NATS sends it: the "NATS/1.0" line, a
// "Key: value" line for each value and the blank line after them.
func headerBytes(h nats.Header) int {
	n := len("NATS/1.0\r\n") + len("\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}
