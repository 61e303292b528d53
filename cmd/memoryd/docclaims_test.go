package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// Tests that what the docs claim about a behaviour is what the code does:
// each checks the behaviour, then the sentences that describe it.

// TestOversizeEventIsRefusedAtPublish: an event over the size limit is
// refused by the stream memoryd creates when it is published, with the error
// code the docs name, and nothing is stored (so nothing can be
// dead-lettered); README.md and docs/protocol.md say exactly that wherever
// they give the limit.
func TestOversizeEventIsRefusedAtPublish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := events.EnsureStream(ctx, js, events.StreamConfig{Prefix: prefix, Stream: stream})
	if err != nil {
		t.Fatal(err)
	}
	// The limit counts the headers too: a payload of exactly the limit is
	// already over it with its Nats-Msg-Id.
	for _, n := range []int{events.MaxEventBytes, events.MaxEventBytes + 1} {
		msg := &nats.Msg{Subject: events.TurnSubject(prefix, "alice"), Data: []byte(strings.Repeat("a", n)), Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprint("big-", n))
		_, err := js.PublishMsg(ctx, msg)
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamMessageExceedsMaximum {
			t.Errorf("publish of %d bytes: %v, want JetStream error %d", n, err, jetstream.JSErrCodeStreamMessageExceedsMaximum)
		}
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("the stream holds %d messages after refused publishes", info.State.Msgs)
	}

	limit := fmt.Sprintf("%d KiB", events.MaxEventBytes>>10)
	code := fmt.Sprint(int(jetstream.JSErrCodeStreamMessageExceedsMaximum))
	for _, file := range []string{"README.md", "docs/protocol.md"} {
		data, err := os.ReadFile("../../" + file)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, para := range strings.Split(string(data), "\n\n") {
			para = strings.Join(strings.Fields(para), " ")
			if !strings.Contains(para, limit) {
				continue
			}
			found = true
			if !strings.Contains(para, "at publish") || !strings.Contains(para, code) {
				t.Errorf("%s gives the %s limit without saying the stream refuses a larger event at publish with error %s: %q", file, limit, code, para)
			}
		}
		if !found {
			t.Errorf("%s does not give the %s event limit", file, limit)
		}
	}
}

// TestReplayResetKeepsWhatOperationsSays: `replay --reset` deletes the
// extracted facts and context of the users in scope and keeps what the
// memory tools wrote, the fact history, the turns and the token usage; the
// replay row of docs/operations.md says exactly that.
func TestReplayResetKeepsWhatOperationsSays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.New(t)
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	rules, direct := store.Provenance{Extractor: "rules"}, store.Provenance{Extractor: "direct"}
	if _, err := st.InsertTurns(ctx, []store.Turn{{EventID: "e1", UserID: "alice", UserMessage: "I live in Lisbon", TurnAt: t0}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpsertFacts(ctx, []store.FactWrite{
		{UserID: "alice", Key: "location", Value: "Paris", SourceAt: t0, EventID: "e0", Provenance: rules},
		{UserID: "alice", Key: "name", Value: "Alice", SourceAt: t0, Provenance: direct},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: "location", Value: "Lisbon", SourceAt: t0.Add(time.Minute), EventID: "e1", Provenance: rules}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.InsertContext(ctx, []store.ContextWrite{{UserID: "alice", Question: "Where do I live?", Answer: "Lisbon", CreatedAt: t0, EventID: "e1", Provenance: rules}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.StoreContext(ctx, store.ContextWrite{UserID: "alice", Question: "Dog's name?", Answer: "Rex", Provenance: direct}); err != nil {
		t.Fatal(err)
	}
	if err := st.AddUsage(ctx, "alice", "m1", store.TokenUsage{PromptTokens: 10, CompletionTokens: 2, Extractions: 1}); err != nil {
		t.Fatal(err)
	}
	history, err := st.FactHistory(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}

	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.EnsureStream(ctx, js, events.StreamConfig{Prefix: prefix, Stream: stream}); err != nil {
		t.Fatal(err)
	}
	// The turn was recorded here, not published: the stream does not hold
	// it, so the reset is refused without AllowLoss (its fact and context
	// item could not be rebuilt).
	p, err := worker.Replay(ctx, worker.ReplayConfig{JetStream: js, Store: st, Prefix: prefix, Stream: stream, Reset: true, AllowLoss: true,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if p.Unreplayable.Items != 2 || p.Unreplayable.Turns != 1 {
		t.Errorf("reset of a turn the stream does not hold reported %+v as lost, want its 2 items", p.Unreplayable)
	}
	if p.Removed.Facts != 1 || p.Removed.Context != 1 || p.Removed.FactHistory != 0 || p.Removed.Turns != 0 {
		t.Errorf("reset removed %+v, want the one extracted fact and context item only", p.Removed)
	}
	facts, err := st.Facts(ctx, "alice", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(facts) != 1 || facts[0].Key != "name" {
		t.Errorf("facts after reset: %+v, want only the one facts.set wrote", facts)
	}
	items, err := st.RecentContext(ctx, "alice", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || items[0].Answer != "Rex" {
		t.Errorf("context after reset: %+v, want only the item store wrote", items)
	}
	after, err := st.FactHistory(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	// Kept: every change before the reset is still there; the reset adds
	// its deletions (new value null).
	if len(history) < 2 || len(after) < len(history) {
		t.Fatalf("fact history: %d changes before reset, %d after; want them kept", len(history), len(after))
	}
	for i, c := range after {
		if i < len(history) && (c.Key != history[i].Key || !c.ChangedAt.Equal(history[i].ChangedAt)) {
			t.Errorf("fact history change %d: %+v before reset, %+v after", i, history[i], c)
		}
		if i >= len(history) && c.NewValue != nil {
			t.Errorf("fact history change %d, added by the reset: %+v, want a deletion", i, c)
		}
	}
	if _, err := st.GetTurn(ctx, "alice", "e1"); err != nil {
		t.Errorf("turn after reset: %v", err)
	}
	stats, err := st.Stats(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if stats.LLMUsage["m1"].PromptTokens != 10 {
		t.Errorf("token usage after reset: %+v", stats.LLMUsage)
	}

	// The doc: "`--reset` first deletes <deleted>; it keeps <kept>."
	data, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`--reset` first deletes([^;.]*); it keeps([^|]*?)\\. ").FindSubmatch(data)
	if m == nil {
		t.Fatal("docs/operations.md: no \"`--reset` first deletes ...; it keeps ....\" in the replay section")
	}
	deleted, kept := string(m[1]), string(m[2])
	for _, w := range []string{"extracted facts", "context"} {
		if !strings.Contains(deleted, w) {
			t.Errorf("operations.md: --reset deletes %q: missing %q", deleted, w)
		}
	}
	for _, w := range []string{"history", "turns", "token usage", "facts.set", "store"} {
		if strings.Contains(deleted, w) {
			t.Errorf("operations.md: --reset deletes %q, which names %q (kept)", deleted, w)
		}
		if !strings.Contains(kept, w) {
			t.Errorf("operations.md: --reset keeps %q: missing %q", kept, w)
		}
	}
}
