package proxy_test

import (
	"fmt"
	"testing"
)

// reasoningReplies are the upstream's replies in its reasoning modes: the
// reasoning a model writes into its content before the answer when served
// without a reasoning parser (vLLM, llama.cpp's --reasoning-format none,
// older Ollama), as a whole block, or, as DeepSeek-R1's chat template opens
// the block in the prompt, with its closing tag alone.
var reasoningReplies = map[string]string{
	"think":    "<think>\nThe user may secretly live in Reykjavik; perhaps they own a llama called Pedro.\n</think>\n\n" + replyText,
	"r1":       "Okay, the user is probably a dentist from Oslo who hates jazz.\n</think>\n\n" + replyText,
	"thinking": "<Thinking>Maybe they mean the red boat.</Thinking> <think>Two blocks.</think>" + replyText,
	// Not reasoning: the answer of a model explaining the tag, which it
	// opens with, never closed.
	"prose": proseReply,
}

const proseReply = "<think> tags are how reasoning models such as DeepSeek-R1 mark their thinking; chat apps hide what is inside them."

// cutReplies are replies the upstream cut by its token limit (finish
// reason "length"): a model that opened its reasoning block with a space
// after the tag, cut while thinking.
var cutReplies = map[string]string{
	"cutspace": "<think> Okay, the user may live in Oslo, so let me think about how",
}

// TestReasoningIsNotRemembered: a reasoning model's thinking, which chat
// apps hide and the user never reads, is not part of the turn: the turn
// remembers the answer, streamed or not. Remembered, it was stored and
// injected into later prompts as what the assistant had said (a walk: "the
// user may secretly live in Reykjavik" came back as context).
func TestReasoningIsNotRemembered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	n := uint64(0)
	for _, mode := range []string{"think", "r1", "thinking"} {
		for _, stream := range []bool{false, true} {
			e.up.setMode(mode)
			e.chat(t, fmt.Sprintf(`{"model":"m","stream":%v,"messages":[{"role":"user","content":"I repaint my boat every May"}]}`, stream), nil)
			n++
			turn := e.nthTurn(t, "alice", n)
			if turn.AssistantResponse != replyText {
				t.Errorf("%s, stream %v: the turn's reply is %q, want the answer alone, %q", mode, stream, turn.AssistantResponse, replyText)
			}
		}
	}
}

// TestReasoningTagInProseIsRemembered: a reply that opens with a literal
// <think> in its prose ("<think> tags are how ...") is the answer, not a
// reasoning block left open: its turn keeps it (before, the turn was
// stored without a reply, a walk); a reply the upstream cut by its token
// limit inside a block opened so is still remembered without it.
func TestReasoningTagInProseIsRemembered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	n := uint64(0)
	for _, c := range []struct{ mode, want string }{{"prose", proseReply}, {"cutspace", ""}} {
		for _, stream := range []bool{false, true} {
			e.up.setMode(c.mode)
			e.chat(t, fmt.Sprintf(`{"model":"m","stream":%v,"messages":[{"role":"user","content":"what are think tags?"}]}`, stream), nil)
			n++
			turn := e.nthTurn(t, "alice", n)
			if turn.AssistantResponse != c.want {
				t.Errorf("%s, stream %v: the turn's reply is %q, want %q", c.mode, stream, turn.AssistantResponse, c.want)
			}
		}
	}
}
