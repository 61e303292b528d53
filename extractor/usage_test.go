package extractor

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/extractor/extractortest"
)

// TestLLMNegativeTokenCounts: a server reporting negative token counts (a
// bug of the server) gets them counted as 0, in the extraction's usage and
// in the totals, and a warning logged once, not per request.
func TestLLMNegativeTokenCounts(t *testing.T) {
	t.Parallel()
	body, err := json.Marshal(openai.ChatCompletionResponse{
		Object:  "chat.completion",
		Choices: []openai.ChatCompletionChoice{{Message: openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: validReply}, FinishReason: openai.FinishReasonStop}},
		Usage:   openai.Usage{PromptTokens: -5, CompletionTokens: 7, TotalTokens: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := extractortest.NewServer(t, extractortest.Reply{Body: string(body)})
	var logs bytes.Buffer // Extract logs on the calling goroutine
	l := newTestLLM(t, srv, func(c *LLMConfig) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	for range 2 {
		res, err := l.Extract(context.Background(), testInput("I'm Ana from Lisbon"))
		if err != nil {
			t.Fatalf("Extract: %v", err)
		}
		if want := (Usage{PromptTokens: 0, CompletionTokens: 7}); res.Usage != want {
			t.Errorf("usage = %+v, want %+v", res.Usage, want)
		}
	}
	if got := l.Usage()["test-model"]; got.PromptTokens != 0 || got.CompletionTokens != 14 || got.OK != 2 {
		t.Errorf("totals = %+v, want 0 prompt and 14 completion tokens over 2 requests", got)
	}
	if n := strings.Count(logs.String(), "negative token counts"); n != 1 {
		t.Errorf("warnings = %d, want 1; logs:\n%s", n, logs.String())
	}
}
