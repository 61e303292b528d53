package app

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor/extractortest"
)

// TestReplayRefusesAnotherExtractorThanTheServes: a replay run by hand
// without the serves' model flags (the offline rules, where the serves ask
// a model) is refused before it runs any extraction job, its own or a
// live turn's; with the same flags, or without workers of its own
// (--no-work), it runs. Before, its workers extracted with the rules
// whatever jobs they took (an embedding walk found a backfill, which ran
// the same workers, extracting 28 of 55 live turns that way).
func TestReplayRefusesAnotherExtractorThanTheServes(t *testing.T) {
	t.Parallel()
	llm := extractortest.NewServer(t, extractortest.Content(`{"facts":{"location":"Oslo"},"context":[{"q":"Where do I live?","a":"Oslo"}]}`))
	withLLM := func(c *Config) { c.LLM.BaseURL, c.LLM.Model = llm.URL(), "fake-model" }
	serve := startTestApp(t, withLLM)
	publishAndWait(t, serve, "alice", events.Turn{ID: "a1", UserID: "alice", UserMessage: "I live in Oslo", Timestamp: time.Now().UTC()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var logs *eventstest.SyncBuffer // the last replay's logs, from its goroutines too
	replay := func(mod func(*Config), work bool) error {
		logs = &eventstest.SyncBuffer{}
		cfg := serve.cfg
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
		cfg.LLM.BaseURL, cfg.LLM.Model = "", ""
		if mod != nil {
			mod(&cfg)
		}
		r, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Stop(context.Background())
		_, err = r.Replay(ctx, ReplayOptions{Work: work})
		return err
	}
	if err := replay(nil, true); !errors.Is(err, ErrOtherExtractor) {
		t.Errorf("replay with the rules beside serves asking a model: %v, want ErrOtherExtractor", err)
	}
	// Beside serves, its own workers run unpaced by their enrich: it
	// says so, and what to do (an audit: 10.8 % of enrich replies
	// degraded, none with --no-work).
	const unpaced = "unpaced by any serve's enrich latency"
	if err := replay(withLLM, true); err != nil {
		t.Errorf("replay with the serves' model: %v", err)
	}
	if !strings.Contains(logs.String(), unpaced) || !strings.Contains(logs.String(), "--no-work") {
		t.Errorf("a replay working beside a serve did not warn that its workers are unpaced:\n%s", logs.String())
	}
	if err := replay(nil, false); err != nil {
		t.Errorf("replay with the rules and no workers of its own: %v", err)
	}
	if strings.Contains(logs.String(), unpaced) {
		t.Errorf("a replay with --no-work warned of its workers:\n%s", logs.String())
	}
}
