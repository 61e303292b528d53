package extractor

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/extractor/extractortest"
)

// rawMessage is a 200 chat completion whose one choice's message is msg,
// as some servers write it (content as an array of parts, tool calls).
func rawMessage(t *testing.T, msg map[string]any, finish string) extractortest.Reply {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"id": "chatcmpl-raw", "object": "chat.completion", "created": 1700000000, "model": "m",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
	})
	if err != nil {
		t.Fatal(err)
	}
	return extractortest.Reply{Body: string(body)}
}

// TestLLMContentAsParts: servers and gateways that answer the content as an
// array of parts (Mistral's reasoning models: a "thinking" part, then the
// "text"; some proxies always) carry the answer in the text parts. Before,
// the reply read as empty, and the turn failed after every attempt with
// "reply is empty".
func TestLLMContentAsParts(t *testing.T) {
	t.Parallel()
	answer := `{"facts":[{"op":"set","key":"location","value":"Lisbon"}],"context":[]}`
	srv := extractortest.NewServer(t, rawMessage(t, map[string]any{
		"role": "assistant",
		"content": []any{
			map[string]any{"type": "thinking", "thinking": []any{map[string]any{"type": "text", "text": `draft {"facts":[{"key":"location","value":"Porto"}]}`}}},
			map[string]any{"type": "text", "text": answer[:30]},
			map[string]any{"type": "text", "text": answer[30:]},
		},
	}, "stop"))
	res, err := newTestLLM(t, srv, nil).Extract(context.Background(), testInput("I live in Lisbon"))
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	if got := res.Facts["location"]; got != "Lisbon" {
		t.Fatalf("location = %q, want Lisbon (facts %v)", got, res.Facts)
	}
	if n := srv.Requests(); n != 1 {
		t.Fatalf("%d requests, want 1 (no correction)", n)
	}
}

// TestLLMToolCallsNamed: a reply holding tool calls and no content (memoryd
// offers no tools) says so, not that the reply is empty.
func TestLLMToolCallsNamed(t *testing.T) {
	t.Parallel()
	srv := extractortest.NewServer(t, rawMessage(t, map[string]any{
		"role": "assistant", "content": nil,
		"tool_calls": []any{map[string]any{"id": "c1", "type": "function",
			"function": map[string]any{"name": "extract", "arguments": `{"facts":[]}`}}},
	}, "tool_calls"))
	_, err := newTestLLM(t, srv, nil).Extract(context.Background(), testInput("I live in Lisbon"))
	if err == nil || !strings.Contains(err.Error(), "tool_calls") {
		t.Fatalf("err = %v, want one naming tool_calls", err)
	}
}

// TestLLMBodyOfAnotherKindSaysWhatItIs: a 200 whose body is an HTML page
// (a base URL of the server's web UI) or an event stream (a gateway that
// streams though the request asked for none) says so. Before, the error
// was only the JSON decoder's "invalid character '<'", and every turn
// failed the same way with nothing pointing at the base URL.
func TestLLMBodyOfAnotherKindSaysWhatItIs(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		contentType, body, want string
	}{
		{"text/html; charset=utf-8", "<!doctype html><html><body>Open WebUI</body></html>", "HTML page"},
		{"text/event-stream", "data: {\"choices\":[{\"delta\":{\"content\":\"{}\"}}]}\n\ndata: [DONE]\n\n", "streamed its reply"},
	} {
		srv := extractortest.NewServer(t, extractortest.Reply{Body: tt.body, Header: http.Header{"Content-Type": {tt.contentType}}})
		_, err := newTestLLM(t, srv, nil).Extract(context.Background(), testInput("I live in Lisbon"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s body: %v, want an error saying %q", tt.contentType, err, tt.want)
		}
	}
}
