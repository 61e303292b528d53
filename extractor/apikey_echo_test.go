package extractor

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/extractor/extractortest"
	openai "github.com/sashabaranov/go-openai"
)

// A model server that quotes the configured API key back in its error
// (some gateways and self-hosted servers answer "invalid key: <key>") must
// not get it into the error memoryd logs and stores (--llm-api-key is
// "never logged"), whatever the key's shape: a self-hosted server's key
// need not look like a vendor's, which redact.Text recognises by shape.
// The embeddings client has always removed its configured key
// (embedding.Client.redact); the LLM client did not.
func TestLLMErrorHidesTheConfiguredAPIKey(t *testing.T) {
	t.Parallel()
	const key = "plainkeyhunter2zz"
	cases := []struct {
		name   string
		status int
		msg    string
	}{
		{"400 whole", http.StatusBadRequest, "bad request with key " + key + " refused"},
		{"401 whole", http.StatusUnauthorized, "Incorrect API key provided: " + key},
		// The key cut by the 120-byte bound of a quoted message.
		{"400 cut", http.StatusBadRequest, strings.Repeat("x", maxDetailBytes-12) + " " + key + " more"},
	}
	for _, tc := range cases {
		srv := extractortest.NewServer(t)
		srv.SetHandler(func(openai.ChatCompletionRequest) extractortest.Reply {
			return extractortest.Error(tc.status, tc.msg)
		})
		l := newTestLLM(t, srv, func(c *LLMConfig) {
			c.APIKey = key
		})
		_, err := l.Extract(context.Background(), testInput("I live in Lisbon"))
		if err == nil {
			t.Fatalf("%s: no error", tc.name)
		}
		msg := err.Error()
		if strings.Contains(msg, key) || strings.Contains(msg, key[:8]) {
			t.Errorf("%s: error %q quotes the configured API key", tc.name, msg)
		}
		if !strings.Contains(msg, "status") {
			t.Errorf("%s: error %q should still say what the server answered", tc.name, msg)
		}
	}
}

// TestLLMModelsErrorHidesTheConfiguredAPIKey: the start-up model list's
// error, which start-up logs, is redacted and bounded as an extraction's:
// go-openai quoted the server's message whole, key and all.
func TestLLMModelsErrorHidesTheConfiguredAPIKey(t *testing.T) {
	t.Parallel()
	const key = "plainkeyhunter2zz"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":"bad request with key %s and token sk-abcdefghijklmnopqrstuvwx %s"}}`, key, strings.Repeat("y", 4000))
	}))
	t.Cleanup(srv.Close)
	l, err := NewLLM(LLMConfig{BaseURL: srv.URL + "/v1", Model: "m", APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Models(context.Background())
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if strings.Contains(msg, key) || strings.Contains(msg, "sk-abcdefghijklmnopqrstuvwx") || len(msg) > 400 {
		t.Errorf("error (%d bytes) %q quotes the key or the whole message", len(msg), msg)
	}
	if HTTPStatus(err) != http.StatusBadRequest {
		t.Errorf("HTTPStatus = %d, want 400 (error %q)", HTTPStatus(err), msg)
	}
}

// TestHideKeyShortPlaceholder: a self-hosted server's placeholder key
// ("x", "no", "sk": any string a local server accepts) is hidden where
// the server quotes it, not inside every word holding its letters: with
// key "x", "max_tokens exceeded" read "ma[redacted:api_key]_tokens
// e[redacted:api_key]ceeded".
func TestHideKeyShortPlaceholder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ key, in, want string }{
		{"x", "max_tokens exceeded", "max_tokens exceeded"},
		{"x", "invalid api key: x", "invalid api key: [redacted:api_key]"},
		{"no", "model not found: known models are none", "model not found: known models are none"},
		{"plainkeyhunter2zz", "key plainkeyhunter2zz refused", "key [redacted:api_key] refused"},
	} {
		if got := hideKey(tc.in, tc.key); got != tc.want {
			t.Errorf("hideKey(%q, %q) = %q, want %q", tc.in, tc.key, got, tc.want)
		}
	}
}
