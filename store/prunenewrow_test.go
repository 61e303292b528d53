package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
)

// The prune locks its victims' users' generation rows before its delete
// (in user order), but only the rows there are then: a user's first
// vectors, saved and committed while the prune waits, make the user a row
// that the delete's cascade (064) then locks last, out of user order. A
// save holding that row and waiting for a row the prune holds closed a
// cycle (40P01). The prune now passes over such a victim, until its next
// run.
func TestPruneBesideFirstVectorsOfAUser(t *testing.T) {
	ctx, s := setup(t)
	// a2 has no vector (so no generation row); b2 has.
	a2, err := s.InsertContext(ctx, []store.ContextWrite{
		{UserID: "a2", Question: "Which city?", Answer: "Paris", CreatedAt: past},
		{UserID: "a2", Question: "Which gate?", Answer: "Gate 9", CreatedAt: past.Add(time.Hour)},
	})
	if err != nil {
		t.Fatal(err)
	}
	b2, err := s.InsertContext(ctx, []store.ContextWrite{
		{UserID: "b2", Question: "Which city?", Answer: "Rome", CreatedAt: past.Add(time.Minute)},
		{UserID: "b2", Question: "Which gate?", Answer: "Gate 4", CreatedAt: past.Add(2 * time.Hour)},
	})
	if err != nil {
		t.Fatal(err)
	}
	saveAll(t, ctx, s, "b2", "m", b2[:1])
	var rows int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM embedding_generations WHERE user_id = 'a2'`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("a2 has %d generation rows (%v); want none", rows, err)
	}
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM embedding_generations WHERE user_id = 'b2' FOR NO KEY UPDATE`); err != nil {
		t.Fatal(err)
	}
	// The prune's victims: a2's oldest and b2's oldest. It waits for b2's row.
	pruned := pruneOldest(ctx, s, 2)
	pruner := blockedBy(t, s, holder, func() bool { return len(pruned) > 0 }, "the prune to wait for b2's generation row")
	if pruner == 0 {
		r := <-pruned
		t.Fatalf("the prune did not wait: %d deleted, %v", r.n, r.err)
	}
	// a2's first vector (of the prune's victim): a2 has a row now.
	saveAll(t, ctx, s, "a2", "m", a2[:1])
	// A save of a2's and b2's newer items takes a2's row, then waits for
	// b2's, behind the prune.
	targets, err := s.EmbeddingTargets(ctx, "a2", a2[1:], "m")
	if err != nil || len(targets) != 1 {
		t.Fatal(len(targets), err)
	}
	more, err := s.EmbeddingTargets(ctx, "b2", b2[1:], "m")
	if err != nil || len(more) != 1 {
		t.Fatal(len(more), err)
	}
	var ws []store.EmbeddingWrite
	for _, tg := range append(targets, more...) {
		ws = append(ws, store.EmbeddingWrite{ContextID: tg.ID, ContentHash: tg.ContentHash, Dims: 3, Vector: vec(tg.ID, "m")})
	}
	saved := make(chan saveResult, 1)
	go func() {
		n, err := s.SaveEmbeddings(ctx, "m", ws)
		saved <- saveResult{n, err}
	}()
	eventstest.Eventually(t, "the save to wait for b2's generation row", 30*time.Second, func() (bool, string) {
		if len(saved) > 0 {
			return true, ""
		}
		var waiting int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE pg_blocking_pids(pid) && ARRAY[$1, $2]::int[] AND pid <> $2 AND query LIKE '%INSERT INTO embedding_generations%'`, holder, pruner).Scan(&waiting)
		return err == nil && waiting > 0, fmt.Sprint(waiting, err)
	})
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res, pr := <-saved, <-pruned
	if res.err != nil || res.n != 2 || pr.err != nil || pr.n != 1 {
		t.Fatalf("save: %d saved, %v; prune: %d deleted, %v; want 2 saved and 1 deleted (b2's; a2's passed over)", res.n, res.err, pr.n, pr.err)
	}
	// The victim passed over goes in the next run.
	if n, err := s.DeleteOldestContext(ctx, 1); err != nil || n != 1 {
		t.Fatalf("the next prune deleted %d (%v); want a2's oldest", n, err)
	}
	var left int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM context WHERE id = ANY($1)`, []int64{a2[0], b2[0]}).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d of the two oldest items left (%v); want none", left, err)
	}
}
