package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/proxy"
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
	n := uint64(0)
	send := func(stream bool, messages string) events.Turn {
		t.Helper()
		e.chat(t, fmt.Sprintf(`{"model":"m","stream":%v,"messages":%s}`, stream, messages), nil)
		n++
		return e.nthTurn(t, "alice", n)
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

// TestClientConversationID: a chat app that names its chat (the
// X-Memory-Conversation header, or Open WebUI's X-OpenWebUI-Chat-Id) has
// its turns published under that id, so that two chats opening alike
// ("hi", and the same greeting back) stay two; before, both had one id, a
// hash of their opening, and each was extracted with the other's turns
// as context (a walk). The header is memoryd's: not forwarded; a value
// that is no conversation id is a 400 naming it, nothing forwarded, and
// Open WebUI's header, not sent for memoryd, is ignored when it is not one.
func TestClientConversationID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	n := uint64(0)
	send := func(messages string, h ...string) events.Turn {
		t.Helper()
		header := http.Header{}
		for i := 0; i+1 < len(h); i += 2 {
			header.Add(h[i], h[i+1])
		}
		e.chat(t, `{"model":"m","messages":`+messages+`}`, header)
		n++
		return e.nthTurn(t, "alice", n)
	}
	second := func(next string) string {
		return `[{"role":"user","content":"hi"},{"role":"assistant","content":"` + replyText + `"},{"role":"user","content":"` + next + `"}]`
	}
	a := send(second("I'm planning a trip to Kyoto."), proxy.ConversationHeader, "chat-a")
	b := send(second("My sister's name is Ines."), proxy.ConversationHeader, " 3f2c9a1e-7b7d-4c55-9a0e-1d2b3c4d5e6f ")
	owui := send(second("I sold my bike."), "X-OpenWebUI-Chat-Id", "local:9a0e1d2b")
	both := send(second("I sold my car too."), "X-OpenWebUI-Chat-Id", "owui-1", proxy.ConversationHeader, "mine-1")
	hashed := send(second("I repaint my boat every May."))
	badOWUI := send(second("I repaint my shed every June."), "X-OpenWebUI-Chat-Id", "not an id!")
	for _, c := range []struct {
		name      string
		got, want string
	}{{"header", a.ConversationID, "chat-a"}, {"header with spaces", b.ConversationID, "3f2c9a1e-7b7d-4c55-9a0e-1d2b3c4d5e6f"},
		{"Open WebUI's", owui.ConversationID, "local:9a0e1d2b"}, {"both headers", both.ConversationID, "mine-1"}} {
		if c.got != c.want {
			t.Errorf("%s: the turn's conversation_id is %q, want the client's %q", c.name, c.got, c.want)
		}
	}
	if !strings.HasPrefix(hashed.ConversationID, "chat-") || badOWUI.ConversationID != hashed.ConversationID {
		t.Errorf("without a usable header the turns' conversation_ids are %q and %q, want the opening's hash for both", hashed.ConversationID, badOWUI.ConversationID)
	}
	e.up.mu.Lock()
	forwarded := e.up.headers[len(e.up.headers)-3].Get(proxy.ConversationHeader) // both's
	asked := len(e.up.requests)
	e.up.mu.Unlock()
	if forwarded != "" {
		t.Errorf("the upstream got %s: %q, memoryd's own header", proxy.ConversationHeader, forwarded)
	}

	for _, h := range [][]string{
		{proxy.ConversationHeader, "has a space"},
		{proxy.ConversationHeader, strings.Repeat("x", 129)},
		{proxy.ConversationHeader, "a", proxy.ConversationHeader, "b"},
	} {
		req, err := http.NewRequest(http.MethodPost, e.url+"/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+e.keys["alice"])
		for i := 0; i+1 < len(h); i += 2 {
			req.Header.Add(h[i], h[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), proxy.ConversationHeader) {
			t.Errorf("%q: %s %s, want a 400 naming the header", h, resp.Status, body)
		}
	}
	e.up.mu.Lock()
	defer e.up.mu.Unlock()
	if len(e.up.requests) != asked {
		t.Errorf("the refused requests reached the upstream: %d requests, want %d", len(e.up.requests), asked)
	}
}
