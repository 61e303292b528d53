package extractor

import (
	"encoding/json"
	"strings"
)

// The delimiters around the turn to extract from in the user message of a
// single-turn extraction prompt. The turn between them is JSON written by
// promptJSON, which cannot contain "</" and so cannot close them early.
const (
	turnOpen  = "<turn>\n"
	turnClose = "\n</turn>"
)

// PromptTurn returns the texts of the turn a single-turn extraction prompt
// (the last user message LLM sends) asks about, as the prompt shows them
// (markers stripped, long texts cut). ok is false when prompt holds no turn.
// It lets a stand-in model, such as membench's, answer from the turn
// without depending on the prompt's layout.
func PromptTurn(prompt string) (userMessage, assistantResponse string, ok bool) {
	_, rest, ok := strings.Cut(prompt, turnOpen)
	if !ok {
		return "", "", false
	}
	body, _, ok := strings.Cut(rest, turnClose)
	if !ok {
		return "", "", false
	}
	var t promptTurn
	if err := json.Unmarshal([]byte(body), &t); err != nil {
		return "", "", false
	}
	return t.UserMessage, t.AssistantResponse, true
}
