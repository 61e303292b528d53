package extractor

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxBatchTurns is the largest number of new turns one [LLM.ExtractBatch]
// call accepts; callers split longer bursts. It bounds the prompt and the
// reply a model must produce in one go.
const MaxBatchTurns = 20

// BatchPromptVersion is the PromptVersion of an [LLM.ExtractBatch] call that
// sent more than one new turn in one prompt (see [BatchResult.PromptVersion]).
// It changes whenever the batch prompt, schema or output validation changes
// in a way that changes results.
const BatchPromptVersion = "llm-batch-v2"

// Bounds on the new turns of a batch prompt, all turns together. Short
// messages are never cut; long ones share what the short ones leave, and
// none gets more than a single-turn prompt would give it.
const (
	batchMaxUserBytes      = 32 << 10
	batchMaxAssistantBytes = 24 << 10
)

// BatchInput is a burst of new turns of one conversation, extracted in one
// call.
type BatchInput struct {
	// UserID owns the memory. Extractors do not send it to a model.
	UserID string
	// Turns are the new turns, oldest first, at least 1 (at most
	// MaxBatchTurns for LLM). All of them are extracted from.
	Turns []Turn
	// Prior holds earlier, already extracted turns of the conversation,
	// oldest first. They are read-only context and never extracted from.
	Prior []Turn
	// FactKeys orders Facts, as in [Input].
	FactKeys []string
	// Facts are the user's current facts, as in [Input].
	Facts map[string]string
}

// BatchResult attributes what was found to the turn it came from.
//
// On success Facts, Changes and Context have one element per turn of
// BatchInput.Turns, Facts holds no nil map, and a key appears in the Facts
// of at most one turn: a value set in several turns belongs to the latest of
// them, with that turn's value. Changes are kept at every turn that makes
// them (each is dated by its own turn when stored, so a later turn's set or
// delete still wins). Keys and values are as in [Result]. On error only
// Usage is set.
type BatchResult struct {
	// Facts holds the facts of each turn, by index into BatchInput.Turns.
	Facts []map[string]string
	// Changes holds the fact changes of each turn (Result.Changes), by
	// index into BatchInput.Turns; nil entries when a turn has none.
	Changes [][]FactChange
	// Context holds the question/answer pairs of each turn, by index into
	// BatchInput.Turns; an element may be nil.
	Context [][]QA
	// Usage counts model tokens of the whole batch, as in [Result].
	Usage Usage
	// PromptVersion is the prompt version that produced the result, to be
	// recorded instead of [Info].PromptVersion: BatchPromptVersion when LLM
	// sent several turns in one prompt, LLMPromptVersion when it used the
	// single-turn prompt (only one turn had anything to extract), and
	// RulesPromptVersion for Rules.
	PromptVersion string
}

// newBatchResult returns an empty successful result for n turns.
func newBatchResult(n int, version string) BatchResult {
	res := BatchResult{Facts: make([]map[string]string, n), Changes: make([][]FactChange, n), Context: make([][]QA, n), PromptVersion: version}
	for i := range res.Facts {
		res.Facts[i] = map[string]string{}
	}
	return res
}

// ExtractBatch extracts from every turn of in.Turns and attributes the memory
// to the turn it came from.
//
// Turns whose user message is empty after [StripMarkers] yield nothing and
// are not sent. When only one turn is left it is extracted with the
// single-turn prompt, exactly as [LLM.Extract] would; when none is left no
// request is made. Otherwise one model call (one attempt with at most one
// correction, the limits and usage accounting of Extract) sends all of them, numbered, with the prior
// turns and the user's current facts as read-only context, and asks for
//
//	{"facts": [{"turn": 2, "op": "set", "key": "location", "value": "Porto"}],
//	 "context": [{"turn": 1, "q": "...", "a": "..."}]}
//
// where "turn" is the 1-based number of the new turn among those sent. The
// reply is validated like Extract's (same coercions, drops and bounds, each
// turn's operations resolved on their own); an item whose "turn" is
// missing, not a number or out of range belongs to the last turn, as does a
// v1 "facts" object. A batch of more than MaxBatchTurns turns fails with
// [KindPermanent] without a request.
func (l *LLM) ExtractBatch(ctx context.Context, in BatchInput) (BatchResult, error) {
	if len(in.Turns) > MaxBatchTurns {
		return BatchResult{}, newError(KindPermanent, "batch of %d turns exceeds MaxBatchTurns (%d)",
			len(in.Turns), MaxBatchTurns)
	}
	sent := batchTurnsForPrompt(in.Turns)
	switch len(sent) {
	case 0:
		return newBatchResult(len(in.Turns), LLMPromptVersion), nil
	case 1:
		i := sent[0].index
		one, err := l.Extract(ctx, Input{UserID: in.UserID, Turn: in.Turns[i], Prior: in.Prior, FactKeys: in.FactKeys, Facts: in.Facts})
		if err != nil {
			return BatchResult{Usage: one.Usage}, err
		}
		res := newBatchResult(len(in.Turns), LLMPromptVersion)
		res.Facts[i], res.Changes[i], res.Context[i], res.Usage = one.Facts, one.Changes, one.Context, one.Usage
		return res, nil
	}

	var (
		parsed  BatchResult
		dropped []droppedKey
	)
	user, background := buildBatchUserPrompt(in, sent)
	usage, err := l.ask(ctx, batchSystemPrompt, user, background, l.batchFormat, batchInvalidNote, func(reply string) error {
		var err error
		parsed, err = parseBatchReply(reply, len(sent), keepDropped(&dropped))
		return err
	})
	if err != nil {
		return BatchResult{Usage: usage}, err
	}
	l.logDropped(ctx, dropped)
	res := newBatchResult(len(in.Turns), BatchPromptVersion)
	for k, t := range sent {
		res.Facts[t.index], res.Changes[t.index], res.Context[t.index] = parsed.Facts[k], parsed.Changes[k], parsed.Context[k]
	}
	res.Usage = usage
	return res, nil
}

// ExtractBatch extracts from each turn of in.Turns with [Rules.Extract], then
// keeps a key set in several turns only at the latest of them, as
// [BatchResult] requires (changes stay at their turns). It has no MaxBatchTurns limit. It fails only when
// ctx is done.
func (r *Rules) ExtractBatch(ctx context.Context, in BatchInput) (BatchResult, error) {
	res := newBatchResult(len(in.Turns), RulesPromptVersion)
	for i, t := range in.Turns {
		one, err := r.Extract(ctx, Input{UserID: in.UserID, Turn: t, Prior: in.Prior, FactKeys: in.FactKeys, Facts: in.Facts})
		if err != nil {
			return BatchResult{}, err
		}
		res.Facts[i], res.Changes[i], res.Context[i] = one.Facts, one.Changes, one.Context
	}
	keepLatest(res.Facts)
	return res, nil
}

// keepLatest deletes from each map the keys that a later map also has.
func keepLatest(facts []map[string]string) {
	later := make(map[string]bool)
	for i := len(facts) - 1; i >= 0; i-- {
		for k := range facts[i] {
			if later[k] {
				delete(facts[i], k)
			} else {
				later[k] = true
			}
		}
	}
}

// batchTurn is a new turn that is sent: its index in BatchInput.Turns and
// its texts after stripping markers and sanitising, not yet bounded.
type batchTurn struct {
	index     int
	user      string
	assistant string
	ts        time.Time
}

func batchTurnsForPrompt(turns []Turn) []batchTurn {
	var out []batchTurn
	for i, t := range turns {
		user := sanitize(StripMarkers(t.UserMessage))
		if user == "" {
			continue
		}
		out = append(out, batchTurn{index: i, user: user, assistant: sanitize(StripMarkers(t.AssistantResponse)), ts: t.Timestamp})
	}
	return out
}

// batchPromptTurn is how a new turn is shown in a batch prompt, one JSON
// object per line.
type batchPromptTurn struct {
	Turn              int    `json:"turn"`
	Timestamp         string `json:"timestamp,omitempty"`
	Weekday           string `json:"weekday,omitempty"`
	UserMessage       string `json:"user_message"`
	AssistantResponse string `json:"assistant_response"`
}

// buildBatchUserPrompt renders the user message of a batch request: current
// facts (those sharing words with any new turn first), prior turns, then the
// new turns, numbered from 1. background is the length of its leading
// read-only part, as buildUserPrompt's.
func buildBatchUserPrompt(in BatchInput, turns []batchTurn) (prompt string, background int) {
	userLens := make([]int, len(turns))
	assistantLens := make([]int, len(turns))
	for i, t := range turns {
		userLens[i], assistantLens[i] = len(t.user), len(t.assistant)
	}
	userCap := shareBudget(userLens, batchMaxUserBytes, promptMaxUserBytes)
	assistantCap := shareBudget(assistantLens, batchMaxAssistantBytes, promptMaxAssistantBytes)

	var text strings.Builder
	for _, t := range turns {
		text.WriteString(t.user)
		text.WriteByte('\n')
	}
	var b strings.Builder
	writeBackground(&b, in.Facts, in.FactKeys, text.String(), in.Prior)
	background = b.Len()
	fmt.Fprintf(&b, "The %d NEW turns to extract from, oldest first, numbered 1 to %d. "+
		"Anchor relative dates in a turn to that turn's own timestamp; when a turn has no timestamp, keep its relative dates as they are.\n<new_turns>\n",
		len(turns), len(turns))
	for i, t := range turns {
		pt := batchPromptTurn{
			Turn:              i + 1,
			Timestamp:         formatTimestamp(t.ts),
			UserMessage:       boundText(t.user, userCap),
			AssistantResponse: boundText(t.assistant, assistantCap),
		}
		if !t.ts.IsZero() {
			pt.Weekday = t.ts.Weekday().String()
		}
		b.Write(promptJSON(pt))
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "</new_turns>\n\nReply with the JSON object only. Every item's \"turn\" is the number (1 to %d) of the new turn it comes from.", len(turns))
	return b.String(), background
}

// shareBudget returns the largest cap, at most maxEach, such that the texts
// of the given lengths, each cut to the cap, take at most total bytes: texts
// shorter than their share are kept whole and the long ones share what they
// leave equally.
func shareBudget(lengths []int, total, maxEach int) int {
	sorted := make([]int, len(lengths))
	for i, n := range lengths {
		sorted[i] = min(n, maxEach)
	}
	slices.Sort(sorted)
	left := total
	for i, n := range sorted {
		share := left / (len(sorted) - i)
		if n > share {
			return share
		}
		left -= n
	}
	return maxEach
}

// batchInvalidNote is appended to the user message of a batch request when
// the previous reply was rejected.
func batchInvalidNote(reason error) string {
	return fmt.Sprintf("\n\nYour previous reply was rejected: %v. Reply with exactly one JSON object of the form "+
		batchNoteExample+`, `+
		`where "turn" is a new turn's number, "op" is set, add, remove or delete, and every fact value is a string.`, reason)
}

// parseBatchOutput validates a batch reply for n new turns (n >= 1) and
// returns the Facts, Changes and Context of each, by 0-based turn number
// (Usage and PromptVersion unset). Like parseOutput it finds the object in
// prose or fences, and its error is a short reason that never quotes the
// reply.
func parseBatchOutput(reply string, n int) (BatchResult, error) {
	return parseBatchReply(reply, n, nil)
}

// parseBatchReply is parseBatchOutput, telling dropped (when not nil) each
// fact key of the accepted object that modelKey drops.
func parseBatchReply(reply string, n int, dropped func(droppedKey)) (BatchResult, error) {
	var (
		res  BatchResult
		keys []droppedKey
	)
	err := scanReply(reply, func(raw json.RawMessage) error {
		keys = keys[:0]
		if isNoteExample(raw) {
			return errNoteExample
		}
		factsRaw, contextRaw, err := replyParts(raw)
		if err != nil {
			return err
		}
		items, err := factItems(factsRaw, n, &keys)
		if err != nil {
			return err
		}
		res = newBatchResult(n, "")
		if contextRaw != nil {
			if err := parseBatchContext(contextRaw, res.Context); err != nil {
				return err
			}
		}
		for i, it := range items {
			res.Facts[i], res.Changes[i] = resolveOps(it)
		}
		keepLatest(res.Facts)
		return nil
	})
	if err != nil {
		return BatchResult{}, err
	}
	tellDropped(keys, dropped)
	return res, nil
}

// parseBatchContext adds the items of the "context" list to their turns, at
// most maxContextPairs per turn.
func parseBatchContext(raw json.RawMessage, qas [][]QA) error {
	items, err := batchItems(raw, "context")
	if err != nil {
		return err
	}
	for i, fields := range items {
		q, okQ := qaField(fields, "q", "question")
		a, okA := qaField(fields, "a", "answer")
		if !okQ || !okA {
			return fmt.Errorf(`"context" item %d has a "q" or "a" that is not a string`, i)
		}
		q, a = cleanModelText(q, maxQuestionRunes), cleanModelText(a, maxAnswerRunes)
		t := turnIndex(fields["turn"], len(qas))
		if blankPair(q, a) || len(qas[t]) == maxContextPairs {
			continue
		}
		qas[t] = append(qas[t], QA{Q: q, A: a})
	}
	return nil
}

// batchItems decodes a list of objects, the member name of the reply.
func batchItems(raw json.RawMessage, name string) ([]map[string]json.RawMessage, error) {
	if firstByte(raw) != '[' {
		return nil, fmt.Errorf("%q is %s, not a list", name, jsonKind(raw))
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("%q is not valid JSON", name)
	}
	items := make([]map[string]json.RawMessage, 0, len(list))
	for i, item := range list {
		if firstByte(item) != '{' {
			return nil, fmt.Errorf("%q item %d is %s, not an object", name, i, jsonKind(item))
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(item, &fields); err != nil {
			return nil, fmt.Errorf("%q item %d is not valid JSON", name, i)
		}
		items = append(items, fields)
	}
	return items, nil
}

// turnIndex returns the 0-based index of the 1-based turn number v (a JSON
// integer, or a string holding one) among n turns. A missing, malformed or
// out-of-range number means the last turn.
func turnIndex(v json.RawMessage, n int) int {
	if s, ok := scalarString(v); ok {
		if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil && f == math.Trunc(f) && f >= 1 && f <= float64(n) {
			return int(f) - 1
		}
	}
	return n - 1
}
