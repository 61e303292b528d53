package proxy_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/proxy"
)

// TestClientLeavingAfterDoneIsRemembered: the OpenAI SDKs stop reading a
// stream at its [DONE] and close the response (Python's and Node's break
// there; go-openai's Recv returns io.EOF and the caller closes), before the
// upstream's body has ended when its end comes a moment later (a later
// packet over the network, HTTP/2's END_STREAM). The reply reached the
// client whole: it is remembered, and counted ok. Before, the client's
// leaving cancelled the upstream read and the turn was dropped as "not
// relayed whole".
func TestClientLeavingAfterDoneIsRemembered(t *testing.T) {
	t.Parallel()
	obs := &outcomes{}
	e := newEnv(t, func(c *proxy.Config) { c.Observer = obs })
	e.up.setMode("linger")
	s, err := e.client("alice").CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{
		Model: "fake-model", Stream: true,
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "I live in Oslo"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break // [DONE]
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(chunk.Choices) > 0 {
			text.WriteString(chunk.Choices[0].Delta.Content)
		}
	}
	s.Close() // as the SDKs do at [DONE], with the upstream's body still open
	if text.String() != replyText {
		t.Fatalf("the client read %q, want %q", text.String(), replyText)
	}
	e.stop() // waits for the request and its publish
	if n := e.turnsPublished(t, "alice"); n != 1 {
		t.Fatalf("%d turns published for a reply the client read whole up to [DONE], want 1", n)
	}
	if n := obs.count("chat", proxy.OutcomeOK); n != 1 {
		t.Errorf("%d requests counted ok, want 1 (cut: %d)", n, obs.count("chat", proxy.OutcomeCut))
	}
}

// TestErrorEventIsNotRemembered: an SSE event named "error" fails the
// client's SDK (the OpenAI Node SDK throws on it whatever its data holds),
// even after the finish reason: the user saw an error, and the turn is not
// remembered. Before, only a data event with an "error" member counted.
func TestErrorEventIsNotRemembered(t *testing.T) {
	t.Parallel()
	obs := &outcomes{}
	e := newEnv(t, func(c *proxy.Config) { c.Observer = obs })
	e.up.setMode("errorevent")
	req, _ := http.NewRequest(http.MethodPost, e.url+"/chat/completions", strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"I live in Oslo"}]}`))
	req.Header.Set("Authorization", "Bearer "+e.keys["alice"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(b), "event: error") {
		t.Fatalf("the client got %q, %v: want the error event relayed", b, err)
	}
	e.stop()
	if n := e.turnsPublished(t, "alice"); n != 0 {
		t.Fatalf("%d turns published for a stream with an error event, want 0", n)
	}
	// Counted as what the user saw (before: ok).
	if n := obs.count("chat", proxy.OutcomeUpstreamStreamError); n != 1 {
		t.Errorf("%d requests counted %s, want 1 (ok: %d)", n, proxy.OutcomeUpstreamStreamError, obs.count("chat", proxy.OutcomeOK))
	}
}
