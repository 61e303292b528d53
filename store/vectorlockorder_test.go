package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
)

// The tests below force, with a third transaction's lock, interleavings
// of writers of a user's vectors (see lockorder_test.go for the scheme)
// that closed a cycle of row locks, and Postgres failed one of them
// (40P01). Both must succeed.

// The drop of an earlier model's vectors (the prune after a model change)
// deleted them in (item, model) order without locking their items, and a
// clear's cascade deletes an item's vectors in the order it deletes the
// items (the table's): each held a vector the other waited for. The
// third transaction holds the drop between the lower id's two vectors
// and the higher id's one, which the clear's cascade has deleted first.
func TestDropOfOtherModelsBesideClear(t *testing.T) {
	ctx, s := setup(t)
	lo, ws := disorderedItems(t, ctx, s, false)
	// Saved one by one: the table's order is the drop's, (item, model).
	for _, v := range []struct {
		model string
		w     store.EmbeddingWrite
	}{{"old1", ws[0]}, {"old2", ws[0]}, {"old1", ws[1]}} {
		if n, err := s.SaveEmbeddings(ctx, v.model, []store.EmbeddingWrite{v.w}); err != nil || n != 1 {
			t.Fatal(n, err)
		}
	}
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM context_embeddings WHERE context_id = $1 AND model = 'old2' FOR KEY SHARE`, lo); err != nil {
		t.Fatal(err)
	}
	dropper, dropped := dropHeld(t, ctx, s, holder, "the held vector", func(n int64) error {
		if n != 0 && n != 3 {
			return fmt.Errorf("dropped %d vectors, want 3 (or 0 after the clear)", n)
		}
		return nil
	})
	cleared := make(chan error, 1)
	go func() {
		_, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "alice", All: true})
		cleared <- err
	}()
	blockedBy(t, s, dropper, func() bool { return len(cleared) > 0 }, "the clear to wait for the drop or finish")
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	derr, cerr := <-dropped, <-cleared
	if derr != nil || cerr != nil {
		t.Fatalf("drop: %v; clear: %v; want both done", derr, cerr)
	}
	var left int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM context_embeddings`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d vectors left (%v), want none", left, err)
	}
}

// A vector delete bumps the embedding generation of several users
// (migration 021's trigger) in the order its plan meets their rows: a
// hash join reads embedding_generations in the table's order, which is
// the order the rows were last written in, not the users'. A save of
// vectors of several users bumps them in user order (an insert sorted by
// user). The drop of an earlier model's vectors of users whose rows lie
// as b1, m1, a1 in the table, beside a save of a1's and b1's: the third
// transaction holds m1's row, the drop holds b1's, the save a1's.
func TestDropOfOtherModelsBesideSaveOfSeveralUsers(t *testing.T) {
	ctx, s := setup(t)
	// Four items each: twelve vectors, enough for a hash join.
	items := map[string][]store.EmbeddingWrite{}
	for _, u := range []string{"b1", "m1", "a1"} {
		var writes []store.ContextWrite
		for i := range 4 {
			writes = append(writes, store.ContextWrite{UserID: u, Question: fmt.Sprintf("Which gate %d?", i), Answer: "Gate 9", CreatedAt: past})
		}
		ids, err := s.InsertContext(ctx, writes)
		if err != nil {
			t.Fatal(err)
		}
		targets, err := s.EmbeddingTargets(ctx, u, ids, "m")
		if err != nil || len(targets) != 4 {
			t.Fatal(len(targets), err)
		}
		for _, tg := range targets {
			items[u] = append(items[u], store.EmbeddingWrite{ContextID: tg.ID, ContentHash: tg.ContentHash, Dims: 3, Vector: vec(tg.ID, "m")})
		}
		// The user's generation row is written here, after the previous
		// user's: the table's order is b1, m1, a1.
		if n, err := s.SaveEmbeddings(ctx, "old", items[u]); err != nil || n != 4 {
			t.Fatal(n, err)
		}
	}
	var order []string
	if err := s.Pool().QueryRow(ctx, `SELECT array_agg(user_id ORDER BY ctid) FROM embedding_generations`).Scan(&order); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(order) != "[b1 m1 a1]" {
		t.Fatalf("generation rows in the table's order %v, want [b1 m1 a1]", order)
	}
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM embedding_generations WHERE user_id = 'm1' FOR NO KEY UPDATE`); err != nil {
		t.Fatal(err)
	}
	dropper, dropped := dropHeld(t, ctx, s, holder, "m1's generation", nil)
	saved := make(chan saveResult, 1)
	go func() {
		n, err := s.SaveEmbeddings(ctx, "m", append(append([]store.EmbeddingWrite(nil), items["a1"]...), items["b1"]...))
		saved <- saveResult{n, err}
	}()
	blockedBy(t, s, dropper, func() bool { return len(saved) > 0 }, "the save to wait for the drop or finish")
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	derr, res := <-dropped, <-saved
	if derr != nil || res.err != nil || res.n != 8 {
		t.Fatalf("drop: %v; save: %d saved, %v; want both done, 8 saved", derr, res.n, res.err)
	}
}

// Two saves of the same items given in opposite orders (two embed jobs
// whose batches overlap) must upsert the vectors in the same order: a
// hash join of the items with the caller's list (the plan of four items
// and more) upserted them in the caller's. The third transaction holds
// the vector of the first save's second item; the second save, in the
// opposite order, has saved all the others but the first's first.
func TestEmbedSavesInOppositeOrders(t *testing.T) {
	ctx, s := setup(t)
	var writes []store.ContextWrite
	for i := range 6 {
		writes = append(writes, store.ContextWrite{UserID: "alice", Question: fmt.Sprintf("Which gate %d?", i), Answer: "Gate 9", CreatedAt: past})
	}
	ids, err := s.InsertContext(ctx, writes)
	if err != nil {
		t.Fatal(err)
	}
	targets, err := s.EmbeddingTargets(ctx, "alice", ids, "m")
	if err != nil || len(targets) != 6 {
		t.Fatal(len(targets), err)
	}
	var ws []store.EmbeddingWrite // in id order
	for _, tg := range targets {
		ws = append(ws, store.EmbeddingWrite{ContextID: tg.ID, ContentHash: tg.ContentHash, Dims: 3, Vector: vec(tg.ID, "m")})
	}
	// The second item's vector exists, for the third transaction to hold.
	if n, err := s.SaveEmbeddings(ctx, "m", ws[1:2]); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM context_embeddings WHERE context_id = $1 FOR SHARE`, ws[1].ContextID); err != nil {
		t.Fatal(err)
	}
	first := make(chan saveResult, 1)
	go func() {
		n, err := s.SaveEmbeddings(ctx, "m", ws)
		first <- saveResult{n, err}
	}()
	saver := blockedBy(t, s, holder, func() bool { return len(first) > 0 }, "the first save to wait for the held vector")
	if saver == 0 {
		r := <-first
		t.Fatalf("the first save did not wait for the held vector: %d, %v", r.n, r.err)
	}
	second := make(chan saveResult, 1)
	go func() {
		n, err := s.SaveEmbeddings(ctx, "m", []store.EmbeddingWrite{ws[5], ws[4], ws[3], ws[2], ws[0]})
		second <- saveResult{n, err}
	}()
	blockedBy(t, s, saver, func() bool { return len(second) > 0 }, "the second save to wait for the first or finish")
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r1, r2 := <-first, <-second
	if r1.err != nil || r2.err != nil || r1.n != 6 || r2.n != 5 {
		t.Fatalf("first save: %d, %v; second: %d, %v; want 6 and 5 saved", r1.n, r1.err, r2.n, r2.err)
	}
}

// A re-extraction (ReplaceOffline) holds the user's embedding generation
// from its delete of the offline items, which have vectors, and then
// restates a pair (InsertContext). An extraction of a later turn of the
// user restating the same pair holds the item and then bumps the
// generation (021's trigger on the item's time). The third transaction
// holds the re-extraction between its delete of the items and its insert
// (at its delete of the offline fact).
func TestReplaceOfflineBesideExtractionRestatingAPair(t *testing.T) {
	ctx, s := setup(t)
	hold, replacer, replaced := heldReextraction(t, ctx, s)
	// The extraction of e2.
	ext, _ := begin(t, s)
	extracted := make(chan error, 1)
	go func() {
		_, err := s.WithTx(ext).InsertContext(ctx, []store.ContextWrite{{UserID: "alice", Question: "Which city?", Answer: "Paris", EventID: "e2", CreatedAt: past.Add(time.Hour)}})
		if err == nil {
			err = ext.Commit(ctx)
		} else {
			ext.Rollback(ctx)
		}
		extracted <- err
	}()
	blockedBy(t, s, replacer, func() bool { return len(extracted) > 0 }, "the extraction to wait for the re-extraction or finish")
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	rerr, eerr := <-replaced, <-extracted
	if rerr != nil || eerr != nil {
		t.Fatalf("re-extraction: %v; extraction: %v; want both done", rerr, eerr)
	}
}

// A save of several users' vectors that replaces one user's vector (an
// item edited since it was embedded) and inserts another's is one INSERT
// ... ON CONFLICT DO UPDATE, which fires its AFTER UPDATE statement
// trigger (the replaced vectors' users) before its AFTER INSERT one (the
// new vectors'), each bumping its users' embedding generations (021) in
// user order: b1 (replaced) then a1 (inserted), out of user order. A
// prune of a1's and b1's oldest items locks their generation rows in
// user order, waiting for them: it held a1's and waited for b1's, which
// the save held while it waited for a1's (40P01). The third transaction
// holds b1's row until the save and then the prune wait for it.
func TestPruneBesideSaveReplacingAVector(t *testing.T) {
	ctx, s := setup(t)
	var saves []store.EmbeddingWrite
	for i, u := range []string{"a1", "b1"} {
		// The prune's victim (the oldest), and the save's item.
		ids, err := s.InsertContext(ctx, []store.ContextWrite{
			{UserID: u, Question: "Which city?", Answer: "Paris", CreatedAt: past.Add(time.Duration(i) * time.Minute)},
			{UserID: u, Question: "Which gate?", Answer: "Gate 9", CreatedAt: past.Add(time.Hour)},
		})
		if err != nil {
			t.Fatal(err)
		}
		targets, err := s.EmbeddingTargets(ctx, u, ids, "m")
		if err != nil || len(targets) != 2 {
			t.Fatal(len(targets), err)
		}
		for _, tg := range targets {
			w := store.EmbeddingWrite{ContextID: tg.ID, ContentHash: tg.ContentHash, Dims: 3, Vector: vec(tg.ID, "m")}
			// a1's second item has no vector yet (the save inserts
			// it); every other item has one (b1's second is replaced).
			if u == "b1" || tg.ID == ids[0] {
				if n, err := s.SaveEmbeddings(ctx, "m", []store.EmbeddingWrite{w}); err != nil || n != 1 {
					t.Fatal(n, err)
				}
			}
			if tg.ID == ids[1] {
				saves = append(saves, w)
			}
		}
	}
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM embedding_generations WHERE user_id = 'b1' FOR NO KEY UPDATE`); err != nil {
		t.Fatal(err)
	}
	saved := make(chan saveResult, 1)
	go func() {
		n, err := s.SaveEmbeddings(ctx, "m", saves)
		saved <- saveResult{n, err}
	}()
	saver := blockedBy(t, s, holder, func() bool { return len(saved) > 0 }, "the save to wait for b1's generation row")
	if saver == 0 {
		r := <-saved
		t.Fatalf("the save did not wait for b1's generation row: %d saved, %v", r.n, r.err)
	}
	pruned := pruneOldest(ctx, s, 2)
	// The prune holds a1's row and waits for b1's, behind the save (which
	// holds the row's tuple lock while it waits).
	eventstest.Eventually(t, "the prune to wait for b1's generation row", 30*time.Second, func() (bool, string) {
		if len(pruned) > 0 {
			return true, ""
		}
		var waiting int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE pg_blocking_pids(pid) && ARRAY[$1, $2]::int[] AND pid <> $2 AND query LIKE '%FOR NO KEY UPDATE%'`, holder, saver).Scan(&waiting)
		return err == nil && waiting > 0, fmt.Sprint(waiting, err)
	})
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res, pr := <-saved, <-pruned
	if res.err != nil || res.n != 2 || pr.err != nil || pr.n != 2 {
		t.Fatalf("save: %d saved, %v; prune: %d deleted, %v; want 2 saved and 2 deleted", res.n, res.err, pr.n, pr.err)
	}
}

// The drop of an earlier model's chunk vectors (one DELETE a collection)
// deleted them in its plan's order, the table's, without locking their
// chunks, and a document's delete deletes its chunks' vectors by its
// cascade, chunk after chunk: vectors saved in another order than the
// chunks' (embed jobs of a document's chunk ranges end in any order) were
// each held by one while the other waited for them. The third
// transaction holds the middle chunk's vector, which both then wait for:
// the drop holding the last chunk's, the delete the first's.
func TestDropOfOtherModelsChunkVectorsBesideDocumentDelete(t *testing.T) {
	ctx, s := setup(t)
	content := "# One\n\nFirst part.\n\n# Two\n\nSecond part.\n\n# Three\n\nThird part.\n"
	r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "a", Content: content})
	ws := chunkVectorWrites(t, ctx, s, r, "old")
	if len(ws) != 3 {
		t.Fatalf("%d chunks, want 3", len(ws))
	}
	// Saved last chunk first: the table's order is 2, 1, 0.
	for i := len(ws) - 1; i >= 0; i-- {
		if n, err := s.SaveChunkEmbeddings(ctx, "old", r.Collection.ID, r.DocID, r.Hash, ws[i:i+1]); err != nil || n != 1 {
			t.Fatal(n, err)
		}
	}
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM chunk_embeddings WHERE collection_id = $1 AND doc_id = $2 AND chunk_index = 1 FOR KEY SHARE`,
		r.Collection.ID, r.DocID); err != nil {
		t.Fatal(err)
	}
	dropper, dropped := dropHeld(t, ctx, s, holder, "the held vector", nil)
	deleted := make(chan error, 1)
	go func() {
		_, err := s.DeleteDocument(ctx, alice, "kb", "a")
		deleted <- err
	}()
	eventstest.Eventually(t, "the delete to wait for the held vector or the drop", 30*time.Second, func() (bool, string) {
		if len(deleted) > 0 {
			return true, ""
		}
		var waiting int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE pg_blocking_pids(pid) && ARRAY[$1, $2]::int[] AND query LIKE 'DELETE FROM documents%'`, holder, dropper).Scan(&waiting)
		return err == nil && waiting > 0, fmt.Sprint(waiting, err)
	})
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	derr, xerr := <-dropped, <-deleted
	if derr != nil || xerr != nil {
		t.Fatalf("drop: %v; document delete: %v; want both done", derr, xerr)
	}
	var left int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM chunk_embeddings WHERE collection_id = $1`, r.Collection.ID).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d chunk vectors left (%v), want none", left, err)
	}
}

// dropHeld starts the drop of the vectors of models other than "m" (the
// prune after a model change) and returns once it waits for holder's
// backend, with its own and a channel that gets its error; check, when
// not nil, judges how many context items' vectors it dropped.
func dropHeld(t *testing.T, ctx context.Context, s *store.Store, holder int, what string, check func(int64) error) (int, <-chan error) {
	t.Helper()
	return waitingOn(t, s, holder, "the drop", what, func() error {
		n, _, err := s.DeleteOtherModelVectors(ctx, "m", time.Minute, 100)
		if err == nil && check != nil {
			err = check(n)
		}
		return err
	})
}
