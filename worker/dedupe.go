package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/store"
)

// errConflictingDuplicate rejects an event whose id another event of the
// same batch already has with different content: only one of them can be
// recorded under the id, and the other must not vanish silently.
var errConflictingDuplicate = errors.New("invalid turn event: its event id is already used by another event with different content")

// dropBatchDuplicates makes the batch's turns unique by event id (the key of
// the turns table) before they are recorded, so that every recorded turn
// gets a job for its own user and conversation. Of two events with the same
// id, the first is kept; a later copy with the same content (a re-publish)
// is acknowledged with the batch, one with different content is
// dead-lettered. valid[i] is the message of turns[i]; it returns the unique
// turns and the messages to acknowledge once they are recorded.
func (w *Worker) dropBatchDuplicates(ctx context.Context, turns []store.Turn, valid []jetstream.Msg) ([]store.Turn, []jetstream.Msg) {
	first := make(map[string]int, len(turns))
	unique := turns[:0:0]
	var ack []jetstream.Msg
	for i, t := range turns {
		j, seen := first[t.EventID]
		switch {
		case !seen:
			first[t.EventID] = len(unique)
			unique = append(unique, t)
			ack = append(ack, valid[i])
		case sameTurn(unique[j], t):
			w.duplicates.Add(1)
			ack = append(ack, valid[i])
		default:
			w.reject(ctx, valid[i], errConflictingDuplicate)
		}
	}
	return unique, ack
}

// sameTurn reports whether two turns carry the same event content: the
// timestamp compared is the one the frontend sent, before any clamping.
func sameTurn(a, b store.Turn) bool {
	sent := func(t store.Turn) time.Time {
		if t.ClampedFrom != nil {
			return *t.ClampedFrom
		}
		return t.TurnAt
	}
	return a.UserID == b.UserID && a.ConversationID == b.ConversationID && a.UserMessage == b.UserMessage &&
		a.AssistantResponse == b.AssistantResponse && sent(a).Equal(sent(b)) && sameJSON(a.Metadata, b.Metadata)
}

// sameJSON compares two JSON texts ignoring insignificant white space.
func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
