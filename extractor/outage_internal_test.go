package extractor

import (
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// TestAssumeDownCountsTheNextServerErrorAsTheOutage: after assumeDown the
// first server error of any request is the server being down; an answer
// ends it, and the next errors are counted afresh (three different
// requests); a row left for over serverErrorsWindow starts again too.
func TestAssumeDownCountsTheNextServerErrorAsTheOutage(t *testing.T) {
	msg := func(s string) []openai.ChatCompletionMessage {
		return []openai.ChatCompletionMessage{{Role: "user", Content: s}}
	}
	t0 := time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)
	var r serverErrorRow
	if r.failed(msg("a"), t0, t0, false, false) {
		t.Fatal("one server error of a fresh row counted as an outage")
	}
	r.answer(t0, true)
	r.assumeDown(t0)
	if !r.failed(msg("a"), t0, t0.Add(time.Second), false, false) {
		t.Fatal("after assumeDown, a server error was not counted as the outage")
	}
	if down := r.answer(t0.Add(2*time.Second), true); down != 2*time.Second {
		t.Errorf("the answer ended an outage of %v, want 2s (from assumeDown)", down)
	}
	if r.failed(msg("a"), t0, t0.Add(3*time.Second), false, false) {
		t.Fatal("after an answer, one server error counted as an outage")
	}
	r.assumeDown(t0.Add(4 * time.Second))
	if r.failed(msg("b"), t0, t0.Add(4*time.Second+serverErrorsWindow+time.Second), false, false) {
		t.Fatal("a server error past the row's window after assumeDown counted as an outage")
	}
}
