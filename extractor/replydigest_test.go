package extractor

import (
	"context"
	"strings"
	"testing"
	"time"

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
		"another token limit": digestWith(func(c *LLMConfig) { c.MaxTokens = 4096 }, "I play tennis", garbage, garbage),
	} {
		if d == first || d == "" {
			t.Errorf("%s: digest %q, want one of its own", name, d)
		}
	}
	long := extractortest.Content("I cannot answer in JSON. " + strings.Repeat("The turn is about a sport the user plays, and I would rather describe it in prose. ", 3))
	if d, t0 := digestWith(func(c *LLMConfig) { c.Temperature = 0.7 }, "I play tennis", long, long), digest("I play tennis", long, long); d == "" || d == t0 {
		t.Errorf("another temperature: digest %q, want one of its own (not %q)", d, t0)
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

// TestReplyDigestSampled: with sampling (a temperature above 0, or a
// reasoning model, asked at the server's default), a short reply (a
// canned refusal, "I can't help with that.") repeats by chance, and is no
// sign the model answers the request one way only: its error has no
// digest, and the turn gets its every attempt. A long one repeated byte
// for byte is not chance, and greedy decoding (temperature 0) repeats
// whatever it answers: those have one.
func TestReplyDigestSampled(t *testing.T) {
	t.Parallel()
	refusal := "I'm sorry, but I can't help with that."
	long := "I'm sorry, but I can't help with that. " + strings.Repeat("Extracting personal details from a conversation is something I won't do. ", 3)
	for _, tt := range []struct {
		name        string
		model       string
		temperature float32
		first, then string
		want        bool
	}{
		{"greedy, short", "test-model", 0, refusal, refusal, true},
		{"greedy, long", "test-model", 0, long, long, true},
		{"sampled, short", "test-model", 0.7, refusal, refusal, false},
		{"sampled, long", "test-model", 0.7, long, long, true},
		{"sampled, one short", "test-model", 0.7, long, refusal, false},
		{"reasoning model at its default, short", "o3-mini", 0, refusal, refusal, false},
		{"reasoning model at its default, long", "o3-mini", 0, long, long, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := extractortest.NewServer(t, extractortest.Content(tt.first), extractortest.Content(tt.then))
			_, err := newTestLLM(t, srv, func(c *LLMConfig) { c.Model, c.Temperature = tt.model, tt.temperature }).Extract(context.Background(), testInput("I play tennis"))
			if KindOf(err) != KindInvalidOutput {
				t.Fatalf("Extract: %v, want invalid output", err)
			}
			if got := ReplyDigestOf(err) != ""; got != tt.want {
				t.Errorf("digest %q, want one %v", ReplyDigestOf(err), tt.want)
			}
		})
	}
}

// TestReplyDigestLeavesTheBackgroundOut: the same invalid replies to the
// same turn asked with other current facts or other earlier turns of its
// conversation (a fact another turn saved between two attempts, a turn
// before it processed meanwhile) are a repeat: the digest covers the
// turn, the instructions and the replies, not the background the prompt
// shows as read-only. Before, a fact saved between attempts made a
// model's identical failure look new, and the turn spent its attempts;
// a burst's turns sent one a request by jobs of their own, side by side,
// each saw the others' facts appear between its attempts.
func TestReplyDigestLeavesTheBackgroundOut(t *testing.T) {
	t.Parallel()
	garbage := extractortest.Content("I cannot answer in JSON.")
	digest := func(in Input) string {
		t.Helper()
		srv := extractortest.NewServer(t, garbage, garbage)
		_, err := newTestLLM(t, srv, nil).Extract(context.Background(), in)
		if KindOf(err) != KindInvalidOutput {
			t.Fatalf("Extract: %v, want invalid output", err)
		}
		return ReplyDigestOf(err)
	}
	first := digest(testInput("I play tennis"))
	withFact := testInput("I play tennis")
	withFact.Facts, withFact.FactKeys = map[string]string{"name": "Alice"}, []string{"name"}
	withPrior := testInput("I play tennis")
	withPrior.Prior = []Turn{{EventID: "e0", UserMessage: "My name is Alice.", AssistantResponse: "Hi Alice!", Timestamp: testTurnTime.Add(-time.Minute)}}
	for name, in := range map[string]Input{"a fact saved": withFact, "an earlier turn": withPrior} {
		if d := digest(in); d != first {
			t.Errorf("%s: digest %q, want the same replies to the same turn's %q", name, d, first)
		}
	}
	if d := digest(testInput("I play golf")); d == first {
		t.Errorf("another turn: digest %q, want one of its own", d)
	}
}
