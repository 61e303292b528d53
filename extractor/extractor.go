// Package extractor turns conversation turns (a user message and the
// assistant's reply) into memory: durable facts about the user (snake_case key
// to value) and context worth remembering (question/answer pairs).
//
// Two extractors are provided, both safe for concurrent use:
//
//   - [Rules] is offline and deterministic. It stores the turn verbatim as one
//     context pair and recognises a small set of self-statements made by the
//     user ("my name is ...", "I live in ..."). It never calls out and never
//     fails other than on a cancelled context.
//   - [LLM] asks any OpenAI-compatible chat-completions server (OpenAI,
//     Ollama, vLLM, llama.cpp) for a JSON object and validates the reply
//     itself, whatever the server claims to enforce.
//
// # Batches
//
// ExtractBatch ([LLM.ExtractBatch], [Rules.ExtractBatch]) extracts a burst of
// new turns of one conversation at once, so that a debounced burst costs one
// model call instead of one per turn. Every new turn is extracted from; the
// prior turns given with them are read-only context. [BatchResult] attributes
// each fact and context pair to the turn it came from, and a fact stated in
// several turns to the latest of them. LLM sends at most [MaxBatchTurns] new
// turns in one prompt ([BatchPromptVersion]); their texts share a size
// budget in which short messages are never cut. A batch with only one turn to
// extract from uses the single-turn prompt, as Extract does. Rules extracts
// each turn as Extract does, then keeps a repeated key at the latest turn.
//
// # One attempt, typed errors (LLM)
//
// The extractor never retries. One Extract or ExtractBatch call is one
// attempt: one HTTP request, and at most one more when the reply is not one
// JSON object of the expected shape. That second request is a correction,
// not a retry: it asks again with a note saying what was wrong, and when its
// reply is invalid too the call fails with [KindInvalidOutput]. Each request
// is bounded by LLMConfig.Timeout, so the requests of one call take at most
// [LLM.CallTimeout]. Neither go-openai nor net/http sends a POST twice.
//
// Whether and when to try again is the caller's decision, made from the
// [Error] every failure is: [KindTransient] (connection errors, per-request
// timeouts, 408, 5xx, an unreadable body, the caller's context ended),
// [KindRetryAfter] (429, or 503 with Retry-After; [Error.RetryAfter] holds
// the server's delay), [KindInvalidOutput], and [KindPermanent] (any other
// 4xx, a refusal, a request the client library rejects before sending). In
// memoryd that decision is made in one place, the worker's outcome function
// (worker/retry.go), which hands it to River: a snooze, River's backoff, or
// a cancel.
//
// # Rate limits and usage (LLM)
//
// These bounds hold across all Extract and ExtractBatch calls of one [LLM], and apply to every
// HTTP request:
//
//   - At most MaxConcurrency requests are in flight. A request takes its slot
//     before the waits below, and gives it back when it completes.
//   - With RequestsPerSecond set, requests are sent at most at that rate, in
//     bursts of at most Burst, by a token bucket. The token is the last thing
//     a request waits for.
//   - A 429 (or a 503 with Retry-After) pauses the whole LLM, not just the
//     call that got it: no request is sent until its delay has passed.
//     Concurrent ones extend the pause to the latest deadline. A call that
//     finds the LLM paused waits for the end of the pause when its request
//     still fits in its context's deadline afterwards, and otherwise fails at
//     once with [KindRetryAfter] and the pause left, without sending.
//
// Every wait ends when the request's ctx does. [LLM.Usage] reports, per model,
// the requests sent, their outcomes and the tokens used since the LLM was
// created; [Result.Usage] and [BatchResult.Usage] have the tokens of one
// extraction. [Rules] uses none.
//
// Prompts and replies are size-bounded: long messages are truncated before
// they are sent, response bodies are read up to a limit, and the number and
// size of extracted facts and context pairs are capped.
//
// # Memory markers
//
// memoryd injects recalled memory into conversations as "[facts: ...]" and
// "[context: ...]" blocks. Both extractors remove them with [StripMarkers]
// before looking at a turn, so that recalled memory is never extracted again
// as if the user had said it.
//
// # Errors
//
// Every error returned by Extract and ExtractBatch is an [*Error]; its Kind
// matches exactly one of [ErrTransient], [ErrRetryAfter], [ErrInvalidOutput]
// and [ErrPermanent] with errors.Is. Error messages carry status codes and a
// short reason, never a whole reply or response body.
package extractor

import (
	"strings"
	"time"
	"unicode/utf8"
)

// Turn is one conversation turn.
type Turn struct {
	// EventID identifies the turn's event; it is not sent to a model.
	EventID string
	// UserMessage is what the user said.
	UserMessage string
	// AssistantResponse is the assistant's reply; may be empty.
	AssistantResponse string
	// Timestamp is the turn's own time; relative dates are anchored to it.
	Timestamp time.Time
}

// Input is what one extraction looks at.
type Input struct {
	// UserID owns the memory. Extractors do not send it to a model.
	UserID string
	// Turn is the turn to extract from.
	Turn Turn
	// Prior holds optional earlier turns of the conversation, oldest first.
	// They are read-only context for resolving references and are never
	// extracted from.
	Prior []Turn
	// FactKeys orders Facts: the user's fact keys, most recently stated
	// first. A prompt shows the facts sharing words with the turn first,
	// then in this order, then the rest by key, within its budget. Keys
	// Facts does not hold are ignored. Optional.
	FactKeys []string
	// Facts are the user's current facts (key to value; a list key's items
	// joined by ", "), so that a model can tell a new statement from a
	// repeat, reuse the key, and see what a change overrides. They are
	// read-only context.
	Facts map[string]string
}

// FactOp is a change a turn makes to a fact, beside the values it sets
// (Result.Facts).
type FactOp string

const (
	// OpAdd adds Value to a list key (allergies, languages, pets, ...).
	OpAdd FactOp = "add"
	// OpRemove removes Value from a list key.
	OpRemove FactOp = "remove"
	// OpDelete says the key is no longer true ("I sold my car"); Value is
	// what the user said is no longer true, kept for history.
	OpDelete FactOp = "delete"
)

// FactChange is one change a turn makes to a fact. The key is canonical
// (events.CanonicalFactKey); OpAdd and OpRemove are only used on list keys.
type FactChange struct {
	Op    FactOp
	Key   string
	Value string
}

// QA is one question/answer pair worth remembering.
type QA struct {
	// Q is the question, or what was discussed; never empty.
	Q string `json:"q"`
	// A is the answer; may be empty.
	A string `json:"a"`
}

// Usage counts model tokens, summed over all requests of one extraction.
type Usage struct {
	// PromptTokens is the number of input tokens.
	PromptTokens int
	// CompletionTokens is the number of output tokens.
	CompletionTokens int
}

// Result is what one extraction found.
//
// On success Facts is never nil. Keys are snake_case ASCII and values are
// non-empty, valid UTF-8 without NUL bytes (so they can be stored in Postgres
// text columns as they are).
type Result struct {
	// Facts maps snake_case keys to the values the turn states. On a list
	// key the value is the whole list, items separated by ", ".
	Facts map[string]string
	// Changes are the turn's other changes to facts: items added to or
	// removed from lists, keys no longer true. A key is in at most one of
	// Facts and Changes, except that several OpAdd/OpRemove may name it.
	Changes []FactChange
	// Context holds question/answer pairs worth remembering.
	Context []QA
	// Usage counts model tokens. On error it still counts the requests that
	// completed, so that spend can be recorded for failed jobs too.
	Usage Usage
}

// Info says which extractor produced a memory; it is recorded next to every
// memory item.
type Info struct {
	// Name is "rules" or "llm".
	Name string
	// Model is the model name, empty for rules.
	Model string
	// PromptVersion changes whenever the extraction logic or prompt changes
	// in a way that changes results.
	PromptVersion string
}

// isUnknownValue reports whether the lowercased value v says that nothing is
// known; such values are never stored.
func isUnknownValue(v string) bool {
	switch v {
	case "", "unknown", "n/a", "na", "none", "null", "nil", "undefined", "not provided", "not specified",
		"not mentioned", "not stated", "unspecified", "not sure", "unsure", "not to say", "-", "?", "secret", "a secret":
		return true
	}
	return false
}

// sanitize makes s safe to store: invalid UTF-8 becomes U+FFFD and NUL bytes,
// which Postgres text rejects, are dropped.
func sanitize(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	return s
}

// truncateUTF8 returns at most maxBytes bytes of s without splitting a rune
// (when s is valid UTF-8) and reports whether anything was cut.
func truncateUTF8(s string, maxBytes int) (string, bool) {
	if len(s) <= maxBytes {
		return s, false
	}
	cut := maxBytes
	// Back off at most utf8.UTFMax-1 bytes to a rune start.
	for i := 0; i < utf8.UTFMax-1 && cut > 0 && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	return s[:cut], true
}

// truncateRunes returns at most maxRunes runes of s.
func truncateRunes(s string, maxRunes int) string {
	n := 0
	for i := range s {
		if n == maxRunes {
			return s[:i]
		}
		n++
	}
	return s
}
