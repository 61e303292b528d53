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
		// An answer (of a model that does not reason) whose first tag is a
		// closing one it talks about: mid-line, quoted, or in a code block,
		// not the end of reasoning a line of its own ends.
		{"vLLM splits R1's output at `</think>`, then streams the answer.", "vLLM splits R1's output at `</think>`, then streams the answer."},
		{"The closing tag is </think>; the opening one <think>.", "The closing tag is </think>; the opening one <think>."},
		{"Add a stop rule:\n```\n</think>\n```\nand retry.", "Add a stop rule:\n```\n</think>\n```\nand retry."},
		{"Add `</think>`\nto the stop list.", "Add `</think>`\nto the stop list."},
		{"thinking, the answer is 4.</think>\n\nAnswer.", "Answer."},
		{"thinking\n```go\nx := 1\n```\n</think>Answer.", "Answer."},
		// A block opened and never closed is reasoning when the tag opens
		// it as models write it (a line break after it, or the thinking
		// at once); a space after it is prose that names the tag.
		{"<think>\nOkay, the user wants a poem. Let me", ""},
		{"<think>", ""},
		{"<think> tags are how reasoning models mark their thinking.", "<think> tags are how reasoning models mark their thinking."},
		{"<Reasoning> is the tag some models use.", "<Reasoning> is the tag some models use."},
		{"<think>a</think>\n<think> tags, as above.", "<think> tags, as above."},
		// Blanks the model wrote before its line break still open the
		// block: it is the thinking, not prose naming the tag.
		{"<think> \nThe user may secretly live in Reykjavik.", ""},
		{"<think>\t\r\nThe user may secretly live in Reykjavik.", ""},
		{"<think>  ", ""},
		// Punctuation no reasoning opens with, after the tag: prose.
		{"<think>, <thinking> and <reasoning> are the tags models use.", "<think>, <thinking> and <reasoning> are the tags models use."},
		{"<think>: the tag R1 opens its reasoning with.", "<think>: the tag R1 opens its reasoning with."},
		{"<reasoning>; its closing tag is the same with a slash.", "<reasoning>; its closing tag is the same with a slash."},
		{"<think>**Analyzing the request**", ""},
	} {
		if got := withoutReasoning(c.in); got != c.want {
			t.Errorf("withoutReasoning(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestWithoutReasoningCut: a reply its token limit cut (finish reason
// "length") inside a block it opened has no answer, whatever follows the
// tag; one that ended otherwise is judged by the tag's form alone.
func TestWithoutReasoningCut(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		cut  bool
		want string
	}{
		{"<think> Okay, the user may live in Oslo, so", true, ""},
		{"<think> Okay, the user may live in Oslo, so", false, "<think> Okay, the user may live in Oslo, so"},
		{"<think>\nhmm\n</think>\n\nAn answer cut by the lim", true, "An answer cut by the lim"},
		{"An answer cut by the lim", true, "An answer cut by the lim"},
	} {
		if got := answerOf(c.in, c.cut); got != c.want {
			t.Errorf("answerOf(%q, cut %v) = %q, want %q", c.in, c.cut, got, c.want)
		}
	}
}
