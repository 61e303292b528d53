package worker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// seedContext stores n items per user, item i at t0+i minutes.
func seedContext(t *testing.T, s *store.Store, users []string, n int) {
	t.Helper()
	ctx := context.Background()
	for _, u := range users {
		var items []store.ContextWrite
		for i := range n {
			items = append(items, store.ContextWrite{UserID: u, Question: fmt.Sprintf("question %d %s", i, strings.Repeat("q", 200)),
				Answer: fmt.Sprintf("answer %d %s", i, strings.Repeat("a", 400)), CreatedAt: t0.Add(time.Duration(i) * time.Minute), EventID: fmt.Sprint(i)})
		}
		if _, err := s.InsertContext(ctx, items); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: u, Key: "name", Value: u, SourceAt: t0}}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPruneToSizeDeletesOldestAndConverges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	users := []string{"alice", "bob", "carol"}
	seedContext(t, s, users, 1000)
	before, err := s.MeasureSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	limit := before.LiveBytes - before.ContextBytes*4/10 // needs ~40% of the items gone
	rep, err := worker.Prune(ctx, s, limit, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.RemovedForSize < 1000 || rep.RemovedForSize > 1500 {
		t.Fatalf("removed %d items; want about 40%% of 3000", rep.RemovedForSize)
	}
	if rep.After.LiveBytes > limit {
		t.Fatalf("live size after prune %d > limit %d", rep.After.LiveBytes, limit)
	}
	// Oldest first, over all users: every remaining item is at least as new
	// as any deleted one, i.e. the remaining minimum minute is the cut.
	var minLeft time.Time
	var left int64
	if err := s.Pool().QueryRow(ctx, `SELECT min(created_at), count(*) FROM context`).Scan(&minLeft, &left); err != nil {
		t.Fatal(err)
	}
	if left != 3000-rep.RemovedForSize {
		t.Fatalf("%d items left, want %d", left, 3000-rep.RemovedForSize)
	}
	cut := int(minLeft.Sub(t0) / time.Minute)
	if wantCut := int(rep.RemovedForSize) / 3; cut < wantCut-1 || cut > wantCut+1 {
		t.Fatalf("oldest remaining item is minute %d, want about %d (oldest deleted first across users)", cut, wantCut)
	}
	for _, u := range users {
		if _, err := s.Fact(ctx, u, "name"); err != nil {
			t.Fatalf("fact of %s pruned: %v", u, err)
		}
	}
	// The files did not shrink, but the next run must not delete again.
	again, err := worker.Prune(ctx, s, limit, 0)
	if err != nil {
		t.Fatal(err)
	}
	if again.RemovedForSize != 0 {
		t.Fatalf("second prune removed %d more items (real size %d, live %d, limit %d)", again.RemovedForSize, again.Before.RealBytes, again.Before.LiveBytes, limit)
	}
}

func TestPrunePerUserCapKeepsNewest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	seedContext(t, s, []string{"alice", "bob"}, 150)
	seedContext(t, s, []string{"carol"}, 20)
	rep, err := worker.Prune(ctx, s, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if rep.RemovedForCap != 100 {
		t.Fatalf("removed %d, want 100 (50 each from alice and bob)", rep.RemovedForCap)
	}
	for u, want := range map[string]int64{"alice": 100, "bob": 100, "carol": 20} {
		n, err := s.CountContext(ctx, u)
		if err != nil || n != want {
			t.Fatalf("%s has %d items (%v), want %d", u, n, err, want)
		}
		items, err := s.RecentContext(ctx, u, 1)
		if err != nil || !strings.HasPrefix(items[0].Question, "question "+fmt.Sprint(want-1+map[string]int64{"alice": 50, "bob": 50, "carol": 0}[u])) {
			t.Fatalf("%s newest item = %q, %v", u, items[0].Question, err)
		}
	}
}

// TestPruneSkipsRowBeingDeduplicated: a pair being re-inserted locks the row
// it deduplicates against, so a concurrent prune cannot delete it and lose
// the new memory.
func TestPruneSkipsRowBeingDeduplicated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	seedContext(t, s, []string{"alice"}, 3)
	oldest := store.ContextWrite{UserID: "alice", Question: fmt.Sprintf("question 0 %s", strings.Repeat("q", 200)),
		Answer: fmt.Sprintf("answer 0 %s", strings.Repeat("a", 400)), CreatedAt: t0.Add(time.Hour), EventID: "again"}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// Re-insert the oldest pair inside an open transaction.
	ids, err := s.WithTx(tx).InsertContext(ctx, []store.ContextWrite{oldest})
	if err != nil || ids[0] != 0 {
		t.Fatalf("re-insert: ids %v, %v; want a duplicate", ids, err)
	}
	n, err := s.DeleteOldestContext(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("prune deleted %d rows, want 1 (the next oldest)", n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	items, err := s.RecentContext(ctx, "alice", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 2 || !items[0].CreatedAt.Equal(t0.Add(time.Hour)) || !strings.HasPrefix(items[0].Question, "question 0") {
		t.Fatalf("items = %+v; want the re-said pair kept and refreshed, the next oldest pruned", items)
	}
}

func TestPeriodicPruneRunsInWorker(t *testing.T) {
	e := setup(t)
	seedContext(t, e.store, []string{"alice"}, 30)
	e.start(extractor.NewRules(), func(c *worker.Config) { c.MaxContextPerUser = 5; c.PruneInterval = time.Second })
	e.waitFor("periodic prune", func() (bool, string) {
		n, err := e.store.CountContext(e.ctx, "alice")
		return err == nil && n == 5, fmt.Sprint(n, err)
	})
}
