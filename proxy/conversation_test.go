package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
)

// TestChatTurnsShareAConversation: the turns of one chat, a request each
// carrying the history, are published with one conversation_id, so that
// memoryd extracts each with the chat's earlier turns as context (as it
// does for any frontend's conversation); another chat has another, and a
// regenerated reply stays in its chat. Before, every proxy turn had none,
// and a message such as "I went with the second one" was extracted
// without the turn it answers.
func TestChatTurnsShareAConversation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	s := e.turnStream(t)
	subj := events.TurnSubject(e.prefix, "alice")
	n := uint64(0)
	send := func(stream bool, messages string) events.Turn {
		t.Helper()
		e.chat(t, fmt.Sprintf(`{"model":"m","stream":%v,"messages":%s}`, stream, messages), nil)
		n++
		eventstest.Eventually(t, "the turn published", time.Minute, func() (bool, string) {
			got := e.turnsPublished(t, "alice")
			return got == n, fmt.Sprintf("%d turns", got)
		})
		msg, err := s.GetLastMsgForSubject(context.Background(), subj)
		if err != nil {
			t.Fatal(err)
		}
		var turn events.Turn
		if err := json.Unmarshal(msg.Data, &turn); err != nil {
			t.Fatal(err)
		}
		return turn
	}
	first := send(true, `[{"role":"system","content":"Today is Monday."},{"role":"user","content":"I'm choosing between a Civic and a Corolla."}]`)
	// The app sends the reply back as it showed it, trimmed; its system
	// message says another day.
	second := send(false, `[{"role":"system","content":"Today is Tuesday."},{"role":"user","content":"I'm choosing between a Civic and a Corolla."},`+
		`{"role":"assistant","content":" `+replyText+`\n"},{"role":"user","content":"I went with the second one."}]`)
	regenerated := send(true, `[{"role":"system","content":"Today is Tuesday."},{"role":"user","content":"I'm choosing between a Civic and a Corolla."},`+
		`{"role":"assistant","content":"`+replyText+`"},{"role":"user","content":"I went with the second one."}]`)
	other := send(false, `[{"role":"user","content":"Which bike should I buy?"}]`)
	// The same opening with another first reply is another chat.
	otherReply := send(false, `[{"role":"user","content":"I'm choosing between a Civic and a Corolla."},`+
		`{"role":"assistant","content":"Both are fine cars."},{"role":"user","content":"The Corolla then."}]`)

	if first.ConversationID == "" {
		t.Fatal("the chat's first turn has no conversation_id")
	}
	if second.ConversationID != first.ConversationID || regenerated.ConversationID != first.ConversationID {
		t.Errorf("one chat's turns have conversation_id %q, %q and (regenerated) %q; want one", first.ConversationID, second.ConversationID, regenerated.ConversationID)
	}
	if other.ConversationID == "" || other.ConversationID == first.ConversationID || otherReply.ConversationID == first.ConversationID || otherReply.ConversationID == other.ConversationID {
		t.Errorf("three chats have conversation_id %q, %q and %q; want three", first.ConversationID, other.ConversationID, otherReply.ConversationID)
	}
}
