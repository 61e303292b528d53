package extractor

import (
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// TestAssumeDownCountsTheNextServerErrorAsTheOutage: after assumeDown the
// first server error of any request is the server being down, from that
// failure; an answer ends it, and the next errors are counted afresh
// (three different requests); past serverErrorsWindow it no longer holds;
// a 403 is never taken for it (a review).
func TestAssumeDownCountsTheNextServerErrorAsTheOutage(t *testing.T) {
	msg := func(s string) []openai.ChatCompletionMessage {
		return []openai.ChatCompletionMessage{{Role: "user", Content: s}}
	}
	t0 := time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)
	var r serverErrorRow
	if r.failed(msg("a"), t0, t0, false, false, false) {
		t.Fatal("one server error of a fresh row counted as an outage")
	}
	r.answer(t0, true)
	r.assumeDown(t0)
	if !r.failed(msg("a"), t0, t0.Add(time.Second), false, false, false) {
		t.Fatal("after assumeDown, a server error was not counted as the outage")
	}
	if down := r.answer(t0.Add(2*time.Second), true); down != time.Second {
		t.Errorf("the answer ended an outage of %v, want 1s (from the failure, not from assumeDown)", down)
	}
	// An answer before any failure: no outage to log.
	r.assumeDown(t0)
	if down := r.answer(t0.Add(time.Minute), true); down != 0 {
		t.Errorf("an answer after assumeDown alone ended an outage of %v, want none", down)
	}
	// A refusal (403) of one request is that request's, assumed or not.
	r.assumeDown(t0)
	if r.failed(msg("c"), t0, t0.Add(time.Second), false, false, true) {
		t.Error("after assumeDown, one 403 counted as an outage")
	}
	r.answer(t0.Add(2*time.Second), true)
	if r.failed(msg("a"), t0, t0.Add(3*time.Second), false, false, false) {
		t.Fatal("after an answer, one server error counted as an outage")
	}
	r.assumeDown(t0.Add(4 * time.Second))
	if r.failed(msg("b"), t0, t0.Add(4*time.Second+serverErrorsWindow+time.Second), false, false, false) {
		t.Fatal("a server error past the row's window after assumeDown counted as an outage")
	}
}
