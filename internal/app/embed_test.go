package app

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// TestEmbedWiring: with Embed.BaseURL set, the service embeds what a turn
// stores and what memory.store writes through the enrich service, and a
// backfill (in another App, running its own workers) embeds items that
// existed before. Without it, a backfill is refused.
func TestEmbedWiring(t *testing.T) {
	t.Parallel()
	srv := embeddingtest.New(t)
	a := startTestApp(t, func(c *Config) {
		c.Embed.BaseURL, c.Embed.Model = srv.URL, "m1"
		c.Worker.EmbedSweepInterval = -1
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	publishAndWait(t, a, "alice", events.Turn{ID: "a1", UserID: "alice", UserMessage: "My dog is named Rex.", AssistantResponse: "Good dog.", Timestamp: time.Now()})
	client := events.NewClient(a.nc, a.cfg.Prefix)
	if _, err := client.Store(ctx, events.StoreRequest{UserID: "alice", Question: "favourite colour", Answer: "green"}); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitEmbedded(ctx, "alice", nil); err != nil {
		t.Fatal(err)
	}
	s, err := a.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.CountEmbeddings(ctx, "alice", "m1"); err != nil || n.Items != 2 || n.Embedded != 2 {
		t.Fatalf("alice's vectors %+v (%v), want 2 of 2", n, err)
	}
	cfg := a.cfg

	// A model change: the service stops, and the backfill of an App
	// configured with another model embeds the items again, in its own
	// workers.
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	cfg.Embed.Model = "m2"
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	n, err := b.EmbedBackfill(ctx, EmbedOptions{User: "alice", Work: true})
	if err != nil || n != 2 {
		t.Fatalf("backfill enqueued %d (%v), want 2", n, err)
	}
	var seen []store.EmbeddingCount
	if err := b.WaitEmbedded(ctx, "alice", func(c store.EmbeddingCount) { seen = append(seen, c) }); err != nil {
		t.Fatal(err)
	}
	if len(seen) == 0 || seen[len(seen)-1] != (store.EmbeddingCount{Items: 2, Embedded: 2}) {
		t.Errorf("progress %v, want it to end at 2 of 2", seen)
	}

	off, err := New(testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := off.EmbedBackfill(ctx, EmbedOptions{}); !errors.Is(err, ErrEmbeddingOff) {
		t.Errorf("backfill with embedding off: %v, want ErrEmbeddingOff", err)
	}
}
