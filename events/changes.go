package events

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// Change types (Change.Type). The first five are one row each; the others
// summarise an operation on many rows, after which a cache re-reads the
// user's memory (facts.list, context.list) or, for a forget, empties it.
const (
	ChangeFactSet        = "fact.set"        // Key set to Value (OldValue: the value it replaced)
	ChangeFactRemoved    = "fact.removed"    // Key deleted (OldValue: its last value)
	ChangeContextStored  = "context.stored"  // item ID stored, with its Question, Answer, Scope
	ChangeContextUpdated = "context.updated" // item ID's question or answer changed (the new ones)
	ChangeContextDeleted = "context.deleted" // item ID deleted (clear, context.delete, pruning)
	ChangeContextCleared = "context.cleared" // all the user's items deleted (Count of them)
	ChangeMemoryImported = "memory.imported" // an import merged Count rows
	ChangeMemoryReset    = "memory.reset"    // memory deleted before a replay rebuilds it
	// ChangeMemoryForgotten: everything was deleted (the changes not yet
	// published too, a gap in Seq); Seq goes on after it as before.
	ChangeMemoryForgotten = "memory.forgotten"
)

// Change is one committed change of a user's memory, published on
// ChangesSubject(prefix, user) after its transaction committed. Seq numbers
// the user's changes in commit order, from 1, without gaps, and never goes
// back (not even after a forget); delivery is at
// least once and only while subscribed (core NATS), so a subscriber that
// sees a Seq it already had drops it, and one that sees a gap (or was away)
// re-reads the memory.
type Change struct {
	UserID string `json:"user_id"`
	// Seq is the change's number among the user's changes, in commit order.
	Seq int64 `json:"seq"`
	// Type is one of the Change* constants.
	Type string `json:"type"`
	// At is when the change was committed.
	At time.Time `json:"at"`
	// EventID is the turn the change came from; empty for a direct write
	// (store, facts.set, facts.clear, clear, context.update, context.delete)
	// and for the summaries.
	EventID string `json:"event_id,omitempty"`
	// Key, OldValue and Value describe a fact change.
	Key      string `json:"key,omitempty"`
	OldValue string `json:"old_value,omitempty"`
	Value    string `json:"value,omitempty"`
	// ID, Question, Answer and Scope describe a context item change
	// (context.deleted carries ID alone).
	ID       int64  `json:"id,omitempty"`
	Question string `json:"question,omitempty"`
	Answer   string `json:"answer,omitempty"`
	Scope    string `json:"scope,omitempty"`
	// Count is how many rows a context.cleared or memory.imported covers.
	Count int64 `json:"count,omitempty"`
	// Truncated: the change was too large for one NATS message and comes
	// without Question, Answer, Value and OldValue (read them with
	// facts.get or context.get).
	Truncated bool `json:"truncated,omitempty"`
}

// IsChangeOf reports whether ch, as decoded from a message on userID's
// changes subject, is one of memoryd's changes of userID: it names the
// user and has a type, a seq and a time. Other messages can reach the
// subject: a frontend that may publish turns can name any subject as a
// turn's reply, and JetStream then publishes its acknowledgement there,
// {"stream":"MEMORY_TURNS","seq":977}, whose seq taken as the user's would
// make a subscriber drop the real changes up to it.
func (ch Change) IsChangeOf(userID string) bool {
	return ch.UserID == userID && ch.Type != "" && ch.Seq > 0 && !ch.At.IsZero()
}

// ChangesSubject is the subject userID's changes are published on:
// "<prefix>.changes.<token>" (prefix DefaultPrefix when empty).
func ChangesSubject(prefix, userID string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return prefix + ".changes." + UserToken(userID)
}

// Changes subscribes to userID's changes and calls fn with each, in the
// order they arrive (NATS keeps one publisher's order). A message that is
// not a change of userID (see IsChangeOf) is passed to fn as an error, with
// a zero Change: the subscriber must not apply it, nor take its seq.
// Unsubscribe the returned subscription when done.
//
// Changes does not wait for the NATS server: the subscription may still be
// in the connection's write buffer when it returns. A request on the same
// connection (a Client made on it) reaches the server after it, since a
// connection's messages keep their order; before reading the user's memory
// over another connection, Flush this one, or changes committed meanwhile
// are missed.
func (c *Client) Changes(userID string, fn func(Change, error)) (*nats.Subscription, error) {
	sub, err := c.nc.Subscribe(ChangesSubject(c.prefix, userID), func(m *nats.Msg) {
		var ch Change
		if err := json.Unmarshal(m.Data, &ch); err != nil {
			fn(Change{}, fmt.Errorf("decode change on %s: %w", m.Subject, err))
			return
		}
		if !ch.IsChangeOf(userID) {
			fn(Change{}, fmt.Errorf("message on %s is not a change of %q (no user_id of the user, type, seq or at): ignored", m.Subject, userID))
			return
		}
		fn(ch, nil)
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to changes of %q: %w", userID, err)
	}
	return sub, nil
}
