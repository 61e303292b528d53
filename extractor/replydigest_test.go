package extractor

import (
	"context"
	"testing"

	"github.com/memoryd/memoryd/extractor/extractortest"
)

// TestReplyDigest: an invalid-output error carries a digest of the request
// and its rejected replies, the same for the same replies to the same
// request (a model repeating its mistake, which the worker stops retrying),
// another for other replies or another request, and none for replies
// without content, which say nothing of what the model would answer.
func TestReplyDigest(t *testing.T) {
	t.Parallel()
	digestWith := func(mutate func(*LLMConfig), turn string, replies ...extractortest.Reply) string {
		t.Helper()
		srv := extractortest.NewServer(t, replies...)
		_, err := newTestLLM(t, srv, mutate).Extract(context.Background(), testInput(turn))
		if KindOf(err) != KindInvalidOutput {
			t.Fatalf("Extract: %v, want invalid output", err)
		}
		return ReplyDigestOf(err)
	}
	digest := func(turn string, replies ...extractortest.Reply) string {
		t.Helper()
		return digestWith(nil, turn, replies...)
	}
	garbage, other := extractortest.Content("I cannot answer in JSON."), extractortest.Content("Sorry, no JSON today.")
	first := digest("I play tennis", garbage, garbage)
	if first == "" {
		t.Fatal("no digest for replies with content")
	}
	if again := digest("I play tennis", garbage, garbage); again != first {
		t.Errorf("digest %s for the same replies to the same request, want %s", again, first)
	}
	for name, d := range map[string]string{
		"another correction":  digest("I play tennis", garbage, other),
		"another first reply": digest("I play tennis", other, garbage),
		"another request":     digest("I play golf", garbage, garbage),
		// The same replies of another model, or asked otherwise, are not
		// the first's repeated: a job retried after --llm-model,
		// the temperature or --llm-max-tokens changed gets its attempts.
		"another model":       digestWith(func(c *LLMConfig) { c.Model = "other-model" }, "I play tennis", garbage, garbage),
		"another temperature": digestWith(func(c *LLMConfig) { c.Temperature = 0.7 }, "I play tennis", garbage, garbage),
		"another token limit": digestWith(func(c *LLMConfig) { c.MaxTokens = 4096 }, "I play tennis", garbage, garbage),
	} {
		if d == first || d == "" {
			t.Errorf("%s: digest %q, want one of its own", name, d)
		}
	}
	if d := digest("I play tennis", garbage, extractortest.Content("  ")); d != "" {
		t.Errorf("digest %q with a blank reply, want none", d)
	}
	// Reasoning in the content is digested: its bytes show a repeat.
	thinking := extractortest.Cut("<think>The user plays tennis, so")
	if d := digest("I play tennis", thinking, thinking); d == "" || d == first {
		t.Errorf("digest %q of reasoning cut in the content, want one of its own", d)
	}
}
