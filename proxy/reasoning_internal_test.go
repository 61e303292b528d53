package proxy

import "testing"

// TestWithoutReasoning: the reasoning blocks a reply opens with are not
// its answer; tags within the answer are its text.
func TestWithoutReasoning(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"Plain answer.", "Plain answer."},
		{"  Indented answer.", "  Indented answer."},
		{"<think>\nhmm\n</think>\n\nAnswer.", "Answer."},
		{"\n<THINK>hmm</Think>Answer.", "Answer."},
		{"hmm, the user wants a poem\n</think>\n\nAnswer.", "Answer."},
		{"<reasoning>a</reasoning><thinking>b</thinking>\nAnswer.", "Answer."},
		{"<think>a <reasoning>b</reasoning> c</think>Answer.", "Answer."},
		{"<think>cut by the token limit while thinking", ""},
		{"Answer: wrap it in <think> and </think> tags.", "Answer: wrap it in <think> and </think> tags."},
		{"<think>a</think>Answer about <think> tags.", "Answer about <think> tags."},
		{"<thinker>not a block</thinker>", "<thinker>not a block</thinker>"},
	} {
		if got := withoutReasoning(c.in); got != c.want {
			t.Errorf("withoutReasoning(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
