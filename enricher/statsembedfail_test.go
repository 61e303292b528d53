package enricher_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestStatsAnswerWithoutTheEmbeddingsCount: a memory.stats whose count of
// items without a vector fails (here embedding_refusals, which the count
// reads, renamed away) still answers, with the optional embeddings field
// left out, and logs a warning. Before, the whole reply failed: the
// operator lost the turn and fact counts for a count the reply marks
// optional.
func TestStatsAnswerWithoutTheEmbeddingsCount(t *testing.T) {
	_, emb := fakeEmbeddings(t)
	url := storetest.Migrated(t)
	st := storetest.Open(t, url)
	seedDogs(t, st, "alice")
	admin, err := pgx.Connect(ctxT(t), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), `ALTER TABLE embedding_refusals_gone RENAME TO embedding_refusals`)
		admin.Close(context.Background())
	})
	if _, err := admin.Exec(ctxT(t), `ALTER TABLE embedding_refusals RENAME TO embedding_refusals_gone`); err != nil {
		t.Fatal(err)
	}
	var logs eventstest.SyncBuffer
	h := startHybrid(t, st, emb, func(c *enricher.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	s, err := h.client.Stats(ctxT(t), "alice")
	if err != nil {
		t.Fatalf("stats: %v, want a reply without the embeddings count", err)
	}
	if s.Embeddings != nil || s.ContextItems == 0 {
		t.Errorf("stats %+v (embeddings %+v), want alice's items counted and no embeddings", s, s.Embeddings)
	}
	if l := logs.String(); !strings.Contains(l, `"level":"WARN"`) || !strings.Contains(l, "embedding_refusals") {
		t.Errorf("log:\n%s\nwant a warning with the count's error", l)
	}
}
