package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/store"
)

// dropBatchDuplicates makes the batch's turns unique by user and event id
// (the key of the turns table) before they are recorded, so that every recorded turn
// gets a job for its own user and conversation. Of two events with the same
// id, the first is kept; a later copy with the same content (a re-publish)
// is acknowledged with the batch, one with different content is
// dead-lettered. valid[i] is the message of turns[i]; it returns the unique
// turns, their messages (msgs[i] of unique[i]), and the identical copies'
// messages, to acknowledge once the batch is recorded.
func (w *Worker) dropBatchDuplicates(ctx context.Context, turns []store.Turn, valid []jetstream.Msg) (unique []store.Turn, msgs, copies []jetstream.Msg) {
	first := make(map[store.TurnKey]int, len(turns))
	unique = turns[:0:0]
	for i, t := range turns {
		j, seen := first[t.Key()]
		switch {
		case !seen:
			first[t.Key()] = len(unique)
			unique = append(unique, t)
			msgs = append(msgs, valid[i])
		case sameTurn(unique[j], t):
			w.duplicates.Add(1)
			copies = append(copies, valid[i])
		default:
			w.reject(ctx, valid[i], fmt.Errorf("%w: user %q already has event id %q with other content", errConflict, t.UserID, t.EventID))
		}
	}
	return unique, msgs, copies
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
