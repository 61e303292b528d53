package extractor

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/extractor/extractortest"
)

// TestBatchFormatStepsApart: a server that refuses the batch schema only
// (its "minimum", which vLLM's xgrammar backend refused) steps down the
// batch requests only: the single-turn ones keep their schema, which it
// takes. Before, one counter stepped both down for the life of the
// process.
func TestBatchFormatStepsApart(t *testing.T) {
	t.Parallel()
	srv := extractortest.NewServer(t)
	var mu sync.Mutex
	var asked []string
	srv.SetHandler(func(req openai.ChatCompletionRequest) extractortest.Reply {
		mu.Lock()
		defer mu.Unlock()
		f := formatOf(req)
		batch := strings.Contains(req.Messages[0].Content, `"turn"`)
		if req.ResponseFormat != nil && req.ResponseFormat.JSONSchema != nil {
			batch = req.ResponseFormat.JSONSchema.Name == "memory_extraction_batch"
		}
		if batch {
			f = "batch " + f
		}
		asked = append(asked, f)
		if f == "batch json_schema" {
			return extractortest.Reply{Status: http.StatusBadRequest,
				Body: `{"object":"error","message":"The provided JSON schema contains features not supported by xgrammar.","type":"BadRequestError","param":null,"code":400}`}
		}
		if batch {
			return extractortest.Content(`{"facts":[{"turn":2,"op":"set","key":"sport","value":"tennis"}],"context":[]}`)
		}
		return extractortest.Content(`{"facts":[{"op":"set","key":"sport","value":"tennis"}],"context":[]}`)
	})
	l := newTestLLM(t, srv, func(c *LLMConfig) { c.ResponseFormat = ResponseFormatJSONSchema })
	if _, err := l.ExtractBatch(context.Background(), BatchInput{Turns: batchTurnsAt("hi", "I play tennis")}); err != nil {
		t.Fatalf("batch: %v", err)
	}
	if _, err := l.Extract(context.Background(), testInput("I play tennis")); err != nil {
		t.Fatalf("extraction: %v", err)
	}
	if _, err := l.ExtractBatch(context.Background(), BatchInput{Turns: batchTurnsAt("hi", "I play tennis")}); err != nil {
		t.Fatalf("second batch: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"batch json_schema", "batch json_object", "json_schema", "batch json_object"}; !slices.Equal(asked, want) {
		t.Errorf("formats asked for %v, want %v", asked, want)
	}
}
