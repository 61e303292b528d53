package store_test

import (
	"fmt"
	"testing"
	"time"

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
	dropped := make(chan error, 1)
	go func() {
		n, _, err := s.DeleteOtherModelVectors(ctx, "m", time.Minute, 100)
		if err == nil && n != 0 && n != 3 {
			err = fmt.Errorf("dropped %d vectors, want 3 (or 0 after the clear)", n)
		}
		dropped <- err
	}()
	dropper := blockedBy(t, s, holder, func() bool { return len(dropped) > 0 }, "the drop to wait for the held vector")
	if dropper == 0 {
		t.Fatalf("the drop did not wait for the held vector: %v", <-dropped)
	}
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
	dropped := make(chan error, 1)
	go func() {
		_, _, err := s.DeleteOtherModelVectors(ctx, "m", time.Minute, 100)
		dropped <- err
	}()
	dropper := blockedBy(t, s, holder, func() bool { return len(dropped) > 0 }, "the drop to wait for m1's generation")
	if dropper == 0 {
		t.Fatalf("the drop did not wait for m1's generation: %v", <-dropped)
	}
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
