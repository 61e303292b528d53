package extractortest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

func newClient(s *Server) *openai.Client {
	cfg := openai.DefaultConfig("test-key")
	cfg.BaseURL = s.URL()
	return openai.NewClientWithConfig(cfg)
}

func complete(t *testing.T, c *openai.Client, text string) (openai.ChatCompletionResponse, error) {
	t.Helper()
	return c.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model:    "m",
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: text}},
	})
}

func TestServerQueue(t *testing.T) {
	t.Parallel()

	s := NewServer(t,
		Error(http.StatusTooManyRequests, "slow down"),
		Content("first"),
		Content("last"),
	)
	c := newClient(s)

	_, err := complete(t, c, "one")
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusTooManyRequests || apiErr.Message != "slow down" {
		t.Fatalf("first reply error = %v, want a 429 API error", err)
	}
	for i, want := range []string{"first", "last", "last", "last"} {
		resp, err := complete(t, c, "again")
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if got := resp.Choices[0].Message.Content; got != want {
			t.Errorf("reply %d content = %q, want %q", i, got, want)
		}
		if resp.Usage.PromptTokens != 10 || resp.Usage.CompletionTokens != 5 {
			t.Errorf("reply %d usage = %+v, want 10 prompt and 5 completion tokens", i, resp.Usage)
		}
	}
	if got := s.Requests(); got != 5 {
		t.Errorf("Requests() = %d, want 5", got)
	}
	if !strings.Contains(string(s.LastRequest()), `"again"`) {
		t.Errorf("LastRequest() = %s, want the last body", s.LastRequest())
	}
}

func TestServerDefaultsAndHeaders(t *testing.T) {
	t.Parallel()

	s := NewServer(t, Reply{Status: http.StatusServiceUnavailable, Body: "down", Header: http.Header{"Retry-After": {"7"}}})
	if s.LastRequest() != nil {
		t.Errorf("LastRequest() before any request = %q, want nil", s.LastRequest())
	}
	resp, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "7" || string(body) != "down" {
		t.Errorf("got %d %q Retry-After %q, want 503 \"down\" Retry-After 7", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}

	// Other paths are not chat completions and are not counted.
	resp2, err := http.Get(s.URL() + "/models")
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusNotFound || s.Requests() != 1 {
		t.Errorf("GET /models: status %d, requests %d; want 404 and 1", resp2.StatusCode, s.Requests())
	}

	// No replies at all: an empty extraction.
	empty := NewServer(t)
	got, err := complete(t, newClient(empty), "hi")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(got.Choices[0].Message.Content), &v); err != nil || len(v) != 2 {
		t.Errorf("default reply %q, want an empty extraction", got.Choices[0].Message.Content)
	}
}

func TestServerSetHandler(t *testing.T) {
	t.Parallel()

	s := NewServer(t, Content("queued"))
	s.SetHandler(func(req openai.ChatCompletionRequest) Reply {
		return Content("echo: " + req.Messages[0].Content)
	})
	resp, err := complete(t, newClient(s), "hello")
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "echo: hello" {
		t.Errorf("content = %q, want %q", got, "echo: hello")
	}
	if s.Requests() != 1 {
		t.Errorf("Requests() = %d, want 1", s.Requests())
	}
}
