package extractor

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/extractor/extractortest"
)

// A 400 that is not about the response format steps nothing down, though
// its body names it: OpenAI's context_length_exceeded counts the schema's
// tokens ("including 92 in the response_format schemas"), and a server
// quoting the user's text quotes what the user wrote. A step is for every
// later request of the process, so one overlong turn, or one user writing
// about response_format, cost every user json_schema for good.
func TestLLMStepsNothingDownForAnotherFourHundred(t *testing.T) {
	t.Parallel()
	const said = "how do I set response_format json_schema in the OpenAI API?"
	for _, tt := range []struct {
		name, turn string
		refusal    func(req openai.ChatCompletionRequest) string
	}{
		{"context length", "I play tennis", func(openai.ChatCompletionRequest) string {
			return "This model's maximum context length is 128000 tokens. However, your messages resulted in 201901 tokens (including 92 in the response_format schemas.). Please reduce the length of the messages or schemas."
		}},
		{"user's text quoted", said, func(req openai.ChatCompletionRequest) string {
			return "content rejected by policy: " + said
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := extractortest.NewServer(t)
			var mu sync.Mutex
			var asked []string
			first := true
			srv.SetHandler(func(req openai.ChatCompletionRequest) extractortest.Reply {
				mu.Lock()
				defer mu.Unlock()
				f := "none"
				if req.ResponseFormat != nil {
					f = string(req.ResponseFormat.Type)
				}
				asked = append(asked, f)
				if first {
					first = false
					return extractortest.Error(http.StatusBadRequest, tt.refusal(req))
				}
				return extractortest.Content(`{"facts":[{"op":"set","key":"sport","value":"tennis"}],"context":[]}`)
			})
			l := newTestLLM(t, srv, func(c *LLMConfig) { c.ResponseFormat = ResponseFormatJSONSchema })
			if _, err := l.Extract(context.Background(), testInput(tt.turn)); KindOf(err) != KindPermanent {
				t.Fatalf("first extraction: %v, want a permanent error", err)
			}
			if _, err := l.Extract(context.Background(), testInput("I play tennis")); err != nil {
				t.Fatalf("second extraction: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if got := strings.Join(asked, " "); got != "json_schema json_schema" {
				t.Errorf("formats asked for: %s, want json_schema json_schema", got)
			}
		})
	}
}
