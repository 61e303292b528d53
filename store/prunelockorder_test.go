package store_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
)

// A prune locks its victims (SKIP LOCKED, so it never waits for an item)
// and then, in its delete's cascade, bumps the user's embedding generation
// (migration 021) when a victim has a vector. A writer that deleted items
// with vectors earlier in its transaction holds that row: had it then
// waited for the prune's victim (an insert restating the victim's pair),
// each waited for the other and Postgres failed one of them (40P01). The
// tests below force that interleaving: the writer is held after its
// delete, the prune chooses the oldest item (the one the writer restates),
// then the writer goes on. Both must succeed.

// A re-extraction by the model of a turn the offline extractor processed
// (ReplaceOffline) that restates the oldest item's pair.
func TestPruneBesideReplaceOffline(t *testing.T) {
	ctx, s := setup(t)
	hold, _, replaced := heldReextraction(t, ctx, s)
	pruned := pruneBeside(t, s)
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	rerr, perr := <-replaced, <-pruned
	if rerr != nil || perr != nil {
		t.Fatalf("re-extraction: %v; prune: %v; want both done", rerr, perr)
	}
}

// heldReextraction seeds alice's turn e1, processed by the offline
// extractor (its item "Which gate?" and fact city=Paris, embedded), and an
// older item "Which city?"/"Paris", the oldest; a turn e2 an hour later is
// recorded too. It starts the model's re-extraction of e1
// (ReplaceOffline), which restates the older item's pair, and returns
// once it waits for the third transaction hold, which holds it after its
// delete of the offline items (at its delete of the offline fact of the
// key it writes), with hold's backend and the re-extraction's pid and
// result.
func heldReextraction(t *testing.T, ctx context.Context, s *store.Store) (hold pgx.Tx, replacer int, replaced <-chan error) {
	t.Helper()
	if _, err := s.InsertTurns(ctx, []store.Turn{
		{EventID: "e1", UserID: "alice", UserMessage: "Gate 9, in Paris", TurnAt: past},
		{EventID: "e2", UserID: "alice", UserMessage: "Still Paris", TurnAt: past.Add(time.Hour)},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "alice", Question: "Which gate?", Answer: "Gate 9", EventID: "e1",
		CreatedAt: past, Provenance: store.Provenance{Extractor: "rules"}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "alice", Question: "Which city?", Answer: "Paris", CreatedAt: past.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: "city", Value: "Paris", SourceAt: past, EventID: "e1",
		Provenance: store.Provenance{Extractor: "rules"}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkProcessed(ctx, "alice", []string{"e1"}, store.Provenance{Extractor: "rules"}); err != nil {
		t.Fatal(err)
	}
	embedAll(t, ctx, s, "alice")
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM facts WHERE user_id = 'alice' AND key = 'city' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
			_, err := q.ReplaceOffline(ctx, store.Reextraction{UserID: "alice", EventIDs: []string{"e1"}, Offline: "rules",
				Facts:      []store.FactWrite{{UserID: "alice", Key: "city", Value: "Paris", SourceAt: past, EventID: "e1"}},
				Context:    []store.ContextWrite{{UserID: "alice", Question: "Which city?", Answer: "Paris", EventID: "e1", CreatedAt: past}},
				Provenance: store.Provenance{Extractor: "llm", Model: "m"}})
			return err
		})
	}()
	if replacer = blockedBy(t, s, holder, func() bool { return len(done) > 0 }, "the re-extraction to wait for the held fact"); replacer == 0 {
		t.Fatalf("the re-extraction did not wait for the held fact: %v", <-done)
	}
	return hold, replacer, done
}

// An import whose clear deletes an item with a vector and whose items
// restate the oldest item's pair.
func TestPruneBesideImportOfAClear(t *testing.T) {
	ctx, s := setup(t)
	if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "alice", Question: "Which city?", Answer: "Paris", CreatedAt: past.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	gate, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "alice", Question: "Which gate?", Answer: "Gate 9", CreatedAt: past})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "alice", ID: gate}); err != nil {
		t.Fatal(err)
	}
	// The export holds the clear of the gate's pair and the city's item.
	var exp bytes.Buffer
	if err := s.Export(ctx, "alice", &exp); err != nil {
		t.Fatal(err)
	}
	// Written again directly (a write the clear does not hold back), older
	// than the clear: the import's clear deletes it.
	if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "alice", Question: "Which gate?", Answer: "Gate 9", CreatedAt: past}); err != nil {
		t.Fatal(err)
	}
	embedAll(t, ctx, s, "alice")
	var pruned <-chan error
	hooked := store.WithImportHook(ctx, func() { pruned = pruneBeside(t, s) })
	_, ierr := s.Import(hooked, "alice", "alice", bytes.NewReader(exp.Bytes()))
	if pruned == nil {
		t.Fatalf("the import did not reach its hook: %v", ierr)
	}
	if perr := <-pruned; ierr != nil || perr != nil {
		t.Fatalf("import: %v; prune: %v; want both done", ierr, perr)
	}
}

// embedAll saves a vector of model "m" for each of the user's items.
func embedAll(t *testing.T, ctx context.Context, s *store.Store, userID string) {
	t.Helper()
	refs, err := s.MissingEmbeddings(ctx, userID, "m", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, r := range refs {
		ids = append(ids, r.ID)
	}
	targets, err := s.EmbeddingTargets(ctx, userID, ids, "m")
	if err != nil {
		t.Fatal(err)
	}
	var ws []store.EmbeddingWrite
	for _, tg := range targets {
		ws = append(ws, store.EmbeddingWrite{ContextID: tg.ID, ContentHash: tg.ContentHash, Dims: 3, Vector: vec(tg.ID, "m")})
	}
	if n, err := s.SaveEmbeddings(ctx, "m", ws); err != nil || n != int64(len(ws)) || n == 0 {
		t.Fatalf("saved %d of %d vectors: %v", n, len(ws), err)
	}
}

// begin starts a transaction on its own backend and returns it with the
// backend's pid.
func begin(t *testing.T, s *store.Store) (pgx.Tx, int) {
	t.Helper()
	return beginOn(t, s.Pool())
}

// beginOn starts a transaction on db's connection (a pool's: one of its
// own) and returns it with the backend's pid.
func beginOn(t *testing.T, db interface {
	Begin(context.Context) (pgx.Tx, error)
}) (pgx.Tx, int) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	var pid int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return tx, pid
}

// pruneBeside starts a prune of the oldest item, in a transaction of its
// own (committed once the prune returns), and returns once the prune waits
// for a lock or is done, with a channel that gets the prune's error.
func pruneBeside(t *testing.T, s *store.Store) <-chan error {
	t.Helper()
	ctx := context.Background()
	tx, pid := begin(t, s)
	pruned, done := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(done)
		_, err := s.WithTx(tx).DeleteOldestContext(ctx, 1)
		if err == nil {
			err = tx.Commit(ctx)
		}
		pruned <- err
	}()
	eventstest.Eventually(t, "the prune to wait for a lock or finish", 30*time.Second, func() (bool, string) {
		select {
		case <-done:
			return true, ""
		default:
		}
		var waits bool
		err := s.Pool().QueryRow(ctx, `SELECT cardinality(pg_blocking_pids($1)) > 0`, pid).Scan(&waits)
		return err == nil && waits, fmt.Sprint(err)
	})
	return pruned
}

// An extraction of another turn of the user (holding the fact key it
// wrote, UpsertFacts) restates an item with a newer time (InsertContext,
// which bumps the user's embedding generation) while a re-extraction
// writing that key has deleted the offline items, with vectors.
func TestReplaceOfflineBesideExtraction(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.InsertTurns(ctx, []store.Turn{
		{EventID: "e1", UserID: "alice", UserMessage: "Gate 9, in Paris", TurnAt: past},
		{EventID: "e2", UserID: "alice", UserMessage: "Still Paris", TurnAt: past.Add(time.Hour)},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertContext(ctx, []store.ContextWrite{
		{UserID: "alice", Question: "Which gate?", Answer: "Gate 9", EventID: "e1", CreatedAt: past, Provenance: store.Provenance{Extractor: "rules"}},
		{UserID: "alice", Question: "Which city?", Answer: "Paris", CreatedAt: past.Add(-time.Hour)},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkProcessed(ctx, "alice", []string{"e1"}, store.Provenance{Extractor: "rules"}); err != nil {
		t.Fatal(err)
	}
	embedAll(t, ctx, s, "alice")
	// The extraction of e2, its facts written.
	ext, extractor := begin(t, s)
	q := s.WithTx(ext)
	if _, err := q.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: "city", Value: "Paris", SourceAt: past.Add(time.Hour), EventID: "e2"}}); err != nil {
		t.Fatal(err)
	}
	replaced := make(chan error, 1)
	go func() {
		replaced <- s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
			_, err := q.ReplaceOffline(ctx, store.Reextraction{UserID: "alice", EventIDs: []string{"e1"}, Offline: "rules",
				Facts:      []store.FactWrite{{UserID: "alice", Key: "city", Value: "Paris", SourceAt: past, EventID: "e1"}},
				Provenance: store.Provenance{Extractor: "llm", Model: "m"}})
			return err
		})
	}()
	if blockedBy(t, s, extractor, func() bool { return len(replaced) > 0 }, "the re-extraction to wait for the extraction's fact key") == 0 {
		t.Fatalf("the re-extraction did not wait for the extraction: %v", <-replaced)
	}
	_, err := q.InsertContext(ctx, []store.ContextWrite{{UserID: "alice", Question: "Which city?", Answer: "Paris", EventID: "e2", CreatedAt: past.Add(time.Hour)}})
	if err == nil {
		err = ext.Commit(ctx)
	} else {
		ext.Rollback(ctx) // the re-extraction waits for it
	}
	if rerr := <-replaced; err != nil || rerr != nil {
		t.Fatalf("extraction: %v; re-extraction: %v; want both done", err, rerr)
	}
}

// A prune whose victims' user has a generation row held (a save of the
// user's vectors in flight: its trigger holds the row until it commits)
// waits for it and then deletes its batch. It passed over every victim of
// that user instead (SKIP LOCKED), deleting nothing, and a call deleting
// nothing ends a prune's run: beside a loop of saves, half its calls did
// (deadorder3).
func TestPruneWaitsForAGenerationRowHeld(t *testing.T) {
	ctx, s := setup(t)
	for i := range 3 {
		if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "alice", Question: fmt.Sprintf("Which gate, %d?", i), Answer: fmt.Sprint(i), CreatedAt: past.Add(time.Duration(i) * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	embedAll(t, ctx, s, "alice")
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM embedding_generations WHERE user_id = 'alice' FOR NO KEY UPDATE`); err != nil {
		t.Fatal(err)
	}
	pruned := pruneOldest(ctx, s, 2)
	if blockedBy(t, s, holder, func() bool { return len(pruned) > 0 }, "the prune to wait for alice's generation row") == 0 {
		r := <-pruned
		t.Fatalf("the prune did not wait for the held generation row: it deleted %d (%v)", r.n, r.err)
	}
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-pruned; r.err != nil || r.n != 2 {
		t.Fatalf("prune deleted %d (%v) once the row was let go; want its batch of 2", r.n, r.err)
	}
	var left int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM context WHERE user_id = 'alice'`).Scan(&left); err != nil || left != 1 {
		t.Fatalf("alice has %d items left (%v); want the newest", left, err)
	}
}

// pruneResult is what DeleteOldestContext returned.
type pruneResult struct {
	n   int64
	err error
}

// pruneOldest runs DeleteOldestContext(n) on the pool in a goroutine.
func pruneOldest(ctx context.Context, s *store.Store, n int) <-chan pruneResult {
	pruned := make(chan pruneResult, 1)
	go func() {
		d, err := s.DeleteOldestContext(ctx, n)
		pruned <- pruneResult{d, err}
	}()
	return pruned
}
