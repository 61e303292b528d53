package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/store"
)

// vec is a stand-in stored vector: the store keeps the bytes as they are.
func vec(id int64, model string) []byte { return []byte(fmt.Sprintf("%s/%d", model, id)) }

func saveAll(t *testing.T, ctx context.Context, s *store.Store, user, model string, ids []int64) {
	t.Helper()
	targets, err := s.EmbeddingTargets(ctx, user, ids, model)
	if err != nil {
		t.Fatal(err)
	}
	var ws []store.EmbeddingWrite
	for _, tg := range targets {
		ws = append(ws, store.EmbeddingWrite{ContextID: tg.ID, ContentHash: tg.ContentHash, Dims: 3, Vector: vec(tg.ID, model)})
	}
	if _, err := s.SaveEmbeddings(ctx, model, ws); err != nil {
		t.Fatal(err)
	}
}

func embeddedIDs(t *testing.T, ctx context.Context, s *store.Store, user, model string) []int64 {
	t.Helper()
	es, err := s.UserEmbeddings(ctx, user, model)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, e := range es {
		if !bytes.Equal(e.Vector, vec(e.ContextID, model)) || e.Dims != 3 {
			t.Errorf("item %d: vector %q dims %d, want %q dims 3", e.ContextID, e.Vector, e.Dims, vec(e.ContextID, model))
		}
		ids = append(ids, e.ContextID)
	}
	return ids
}

// TestEmbeddingsRoundTrip: vectors saved for a user's items come back in
// one read, only the user's and only the model's; what lacks a vector is
// listed (per model, per user, paged) and counted; an edited item's vector
// is stale until it is embedded again.
func TestEmbeddingsRoundTrip(t *testing.T) {
	ctx, s := setup(t)
	var writes []store.ContextWrite
	for i := range 5 {
		writes = append(writes,
			store.ContextWrite{UserID: "alice", Question: fmt.Sprintf("q%d", i), Answer: "a", CreatedAt: t0},
			store.ContextWrite{UserID: "bob", Question: fmt.Sprintf("q%d", i), Answer: "a", CreatedAt: t0})
	}
	ids, err := s.InsertContext(ctx, writes)
	if err != nil {
		t.Fatal(err)
	}
	var alice, bob []int64
	question := map[int64]string{}
	for i, id := range ids {
		question[id] = writes[i].Question
		if i%2 == 0 {
			alice = append(alice, id)
		} else {
			bob = append(bob, id)
		}
	}
	slices.Sort(alice)
	// bob's ids asked for as alice's are not hers.
	targets, err := s.EmbeddingTargets(ctx, "alice", append(slices.Clone(alice), bob...), "m1")
	if err != nil || len(targets) != 5 {
		t.Fatalf("targets %v %v, want alice's 5", targets, err)
	}
	if targets[0].ID != alice[0] || targets[0].Question != question[alice[0]] || targets[0].Answer != "a" {
		t.Errorf("target text %q %q", targets[0].Question, targets[0].Answer)
	}
	saveAll(t, ctx, s, "alice", "m1", alice[:3])
	if got := embeddedIDs(t, ctx, s, "alice", "m1"); !slices.Equal(got, alice[:3]) {
		t.Errorf("alice's m1 vectors %v, want %v", got, alice[:3])
	}
	if got := embeddedIDs(t, ctx, s, "bob", "m1"); len(got) != 0 {
		t.Errorf("bob has vectors %v", got)
	}
	if got := embeddedIDs(t, ctx, s, "alice", "m2"); len(got) != 0 {
		t.Errorf("alice has m2 vectors %v", got)
	}
	missing, err := s.MissingEmbeddings(ctx, "alice", "m1", 0, 10)
	if err != nil || len(missing) != 2 || missing[0].ID != alice[3] || missing[1] != (store.ContextRef{UserID: "alice", ID: alice[4]}) {
		t.Errorf("alice missing %v %v, want %v", missing, err, alice[3:])
	}
	// Every user's, paged.
	var all []int64
	for after := int64(0); ; {
		page, err := s.MissingEmbeddings(ctx, "", "m1", after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			all = append(all, r.ID)
		}
		after = page[len(page)-1].ID
	}
	if len(all) != 7 {
		t.Errorf("all users missing %v, want 7 items", all)
	}
	n, err := s.CountEmbeddings(ctx, "alice", "m1")
	if err != nil || n != (store.EmbeddingCount{Items: 5, Embedded: 3}) {
		t.Errorf("count %+v %v, want 5 items, 3 embedded", n, err)
	}
	if n, _ := s.CountEmbeddings(ctx, "", "m1"); n != (store.EmbeddingCount{Items: 10, Embedded: 3}) {
		t.Errorf("count of all %+v, want 10 items, 3 embedded", n)
	}

	// An edited item: its old vector is no longer served, it is missing
	// again, and a vector of the old text is not saved.
	oldHash := targets[0].ContentHash
	newQ := "edited"
	if _, err := s.UpdateContext(ctx, store.ContextUpdate{UserID: "alice", ID: alice[0], Question: &newQ}); err != nil {
		t.Fatal(err)
	}
	if got := embeddedIDs(t, ctx, s, "alice", "m1"); !slices.Equal(got, alice[1:3]) {
		t.Errorf("after the edit, vectors %v, want %v", got, alice[1:3])
	}
	if n, err := s.SaveEmbeddings(ctx, "m1", []store.EmbeddingWrite{{ContextID: alice[0], ContentHash: oldHash, Dims: 3, Vector: vec(alice[0], "m1")}}); err != nil || n != 0 {
		t.Errorf("saved %d vectors of the old text (%v), want 0", n, err)
	}
	saveAll(t, ctx, s, "alice", "m1", alice)
	if got := embeddedIDs(t, ctx, s, "alice", "m1"); !slices.Equal(got, alice) {
		t.Errorf("after re-embedding, vectors %v, want %v", got, alice)
	}
}

func countVectors(t *testing.T, ctx context.Context, s *store.Store, user string) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM context_embeddings WHERE user_id = $1`, user).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestEmbeddingsCascade: deleting items (by id, all, forget) removes their
// vectors of every model.
func TestEmbeddingsCascade(t *testing.T) {
	ctx, s := setup(t)
	for _, u := range []string{"alice", "bob", "carol"} {
		ids, err := s.InsertContext(ctx, []store.ContextWrite{
			{UserID: u, Question: "q1", CreatedAt: t0}, {UserID: u, Question: "q2", CreatedAt: t0}})
		if err != nil {
			t.Fatal(err)
		}
		saveAll(t, ctx, s, u, "m1", ids)
		saveAll(t, ctx, s, u, "m2", ids)
		if n := countVectors(t, ctx, s, u); n != 4 {
			t.Fatalf("%s has %d vectors, want 4", u, n)
		}
		if u == "carol" {
			if _, err := s.DeleteContext(ctx, store.ContextDelete{UserID: u, ID: ids[0]}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}, store.RiverJobs{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "bob", All: true}); err != nil {
		t.Fatal(err)
	}
	for u, want := range map[string]int{"alice": 0, "bob": 0, "carol": 2} {
		if n := countVectors(t, ctx, s, u); n != want {
			t.Errorf("%s keeps %d vectors, want %d", u, n, want)
		}
	}
}

// TestContextHook: the hook sees every item a write inserts or re-texts,
// inside that write's transaction, and its error undoes the write.
func TestContextHook(t *testing.T) {
	ctx, s := setup(t)
	var seen []store.ContextRef
	fail := false
	s.SetContextHook(func(ctx context.Context, tx pgx.Tx, items []store.ContextRef) error {
		// The items are visible in the transaction handed over.
		for _, it := range items {
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM context WHERE id = $1`, it.ID).Scan(&n); err != nil || n != 1 {
				return fmt.Errorf("item %d not in the hook's transaction: %d %v", it.ID, n, err)
			}
		}
		if fail {
			return errors.New("hook refused")
		}
		seen = append(seen, items...)
		return nil
	})
	t.Cleanup(func() { s.SetContextHook(nil) })

	ids, err := s.InsertContext(ctx, []store.ContextWrite{
		{UserID: "alice", Question: "q1", CreatedAt: t0}, {UserID: "alice", Question: "q1", CreatedAt: t0},
		{UserID: "bob", Question: "q2", CreatedAt: t0}})
	if err != nil {
		t.Fatal(err)
	}
	want := []store.ContextRef{{UserID: "alice", ID: ids[0]}, {UserID: "bob", ID: ids[2]}}
	if !slices.Equal(seen, want) {
		t.Errorf("InsertContext hooked %v, want %v", seen, want)
	}
	seen = nil
	// Inserting the same pair again inserts nothing: no hook.
	if _, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "alice", Question: "q1", CreatedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	id, inserted, err := s.StoreContext(ctx, store.ContextWrite{UserID: "alice", Question: "q3"})
	if err != nil || !inserted {
		t.Fatal(err)
	}
	if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "alice", Question: "q3"}); err != nil {
		t.Fatal(err)
	}
	edited := "q1 edited"
	if _, err := s.UpdateContext(ctx, store.ContextUpdate{UserID: "alice", ID: ids[0], Question: &edited}); err != nil {
		t.Fatal(err)
	}
	want = []store.ContextRef{{UserID: "alice", ID: id}, {UserID: "alice", ID: ids[0]}}
	if !slices.Equal(seen, want) {
		t.Errorf("StoreContext, UpdateContext hooked %v, want %v", seen, want)
	}
	fail = true
	if _, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "carol", Question: "q4", CreatedAt: t0}}); err == nil {
		t.Error("InsertContext succeeded although its hook failed")
	}
	if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "carol", Question: "q5"}); err == nil {
		t.Error("StoreContext succeeded although its hook failed")
	}
	if n, err := s.CountEmbeddings(ctx, "carol", "m"); err != nil || n.Items != 0 {
		t.Errorf("carol has %d items after failed hooks (%v), want 0", n.Items, err)
	}
}

// TestUnusableVectorsCountAsMissing: a stored vector of zeros (scale 0: a
// reply of nulls or zeros saved before the embedding client refused them),
// one of infinite scale (tiny components, before Normalize computed in
// float64) and one of other dimensions than the model's recorded ones count as
// missing for the targets, the backfill and the count, so that a backfill
// repairs a database holding them. Before, any vector of the model name
// counted.
func TestUnusableVectorsCountAsMissing(t *testing.T) {
	ctx, s := setup(t)
	ids := aliceItems(t, ctx, s, 4)
	slices.Sort(ids)
	targets, err := s.EmbeddingTargets(ctx, "alice", ids, "m1")
	if err != nil {
		t.Fatal(err)
	}
	good := embedding.Encode([]float32{1, 2, 3})
	// Scale +Inf, as Encode stored a vector of tiny components before it
	// normalised in float64.
	inf := slices.Clone(good)
	inf[0], inf[1], inf[2], inf[3] = 0, 0, 0x80, 0x7f
	ws := []store.EmbeddingWrite{
		{ContextID: targets[0].ID, ContentHash: targets[0].ContentHash, Dims: 3, Vector: good},
		{ContextID: targets[1].ID, ContentHash: targets[1].ContentHash, Dims: 3, Vector: embedding.Encode([]float32{0, 0, 0})},
		{ContextID: targets[2].ID, ContentHash: targets[2].ContentHash, Dims: 3, Vector: inf},
		{ContextID: targets[3].ID, ContentHash: targets[3].ContentHash, Dims: 2, Vector: embedding.Encode([]float32{1, 1})},
	}
	if _, err := s.SaveEmbeddings(ctx, "m1", ws); err != nil {
		t.Fatal(err)
	}
	check := func(what string, want []int64) {
		t.Helper()
		missing, err := s.MissingEmbeddings(ctx, "alice", "m1", 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, r := range missing {
			got = append(got, r.ID)
		}
		tg, err := s.EmbeddingTargets(ctx, "alice", ids, "m1")
		if err != nil {
			t.Fatal(err)
		}
		var gotTargets []int64
		for _, x := range tg {
			gotTargets = append(gotTargets, x.ID)
		}
		n, err := s.CountEmbeddings(ctx, "alice", "m1")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) || !slices.Equal(gotTargets, want) || n.Embedded != int64(4-len(want)) {
			t.Errorf("%s: missing %v, targets %v, count %+v; want %v missing", what, got, gotTargets, n, want)
		}
	}
	// No dimensions recorded yet: only the zero and infinite vectors are
	// missing.
	check("before the model's dimensions are recorded", []int64{ids[1], ids[2]})
	if d, err := s.EmbeddingDims(ctx, "m1", 3); err != nil || d != 3 {
		t.Fatalf("recorded dims %d (%v), want 3", d, err)
	}
	if d, err := s.EmbeddingDims(ctx, "m1", 2); err != nil || d != 3 {
		t.Fatalf("dims after a second reply of 2: %d (%v), want the first's 3", d, err)
	}
	check("with 3 dimensions recorded", []int64{ids[1], ids[2], ids[3]})
	if prev, err := s.SetEmbeddingDims(ctx, "m1", 2); err != nil || prev != 3 {
		t.Fatalf("set dims 2: %d before (%v), want 3", prev, err)
	}
	check("with 2 dimensions set", []int64{ids[0], ids[1], ids[2]})
	if prev, err := s.SetEmbeddingDims(ctx, "m1", 2); err != nil || prev != 2 {
		t.Fatalf("set dims 2 again: %d before (%v), want 2", prev, err)
	}
	if prev, err := s.SetEmbeddingDims(ctx, "m9", 2); err != nil || prev != 0 {
		t.Fatalf("set dims of a model without any: %d before (%v), want 0", prev, err)
	}
}

// TestSaveEmbeddingsBesideADeleteOfOneItem: a batch of vectors saved while
// one of its items is being deleted (prune, clear, forget; the delete not
// yet committed) waits for the delete and saves the others. The statement
// had seen the item in its snapshot and the foreign key check then failed
// the whole batch (a race review: "violates foreign key constraint", the
// job retried, its items embedded again).
func TestSaveEmbeddingsBesideADeleteOfOneItem(t *testing.T) {
	ctx, s := setup(t)
	ids, ws := aliceWrites(t, ctx, s, 3)
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `DELETE FROM context WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	// The save locks its items (KEY SHARE) in its first statement, which
	// bumps their users' generations, and again in its insert.
	done := saveWaitingOnALock(t, s, tx, "FOR KEY SHARE OF c", func() (int64, error) { return s.SaveEmbeddings(ctx, "m", ws) })
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.err != nil || res.n != 2 {
		t.Fatalf("save beside a delete of one of 3 items: %d saved, %v; want the other 2 saved", res.n, res.err)
	}
	if got := embeddedIDs(t, ctx, s, "alice", "m"); !slices.Equal(got, []int64{ids[0], ids[2]}) {
		t.Fatalf("vectors of items %v; want %v", got, []int64{ids[0], ids[2]})
	}
}

// saveResult is what a save returned.
type saveResult struct {
	n   int64
	err error
}

// saveWaitingOnALock runs save in a goroutine and returns once a statement
// holding query waits on a lock of the transaction tx (polled, for at most
// a minute: only that transaction's waiters count, not another test's in
// the shared database), failing the test when the save ends first; the
// channel gets what it returns.
func saveWaitingOnALock(t *testing.T, s *store.Store, tx pgx.Tx, query string, save func() (int64, error)) <-chan saveResult {
	t.Helper()
	var holder int
	if err := tx.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	done := make(chan saveResult, 1)
	go func() {
		n, err := save()
		done <- saveResult{n, err}
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		var waiting int
		if err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE $2 = ANY(pg_blocking_pids(pid)) AND query LIKE '%' || $1 || '%'`, query, holder).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return done
		}
		select {
		case res := <-done:
			t.Fatalf("the save did not wait on a lock: %d saved, %v", res.n, res.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q waited on a lock within a minute", query)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDeleteOtherModelVectors: every vector of another model goes, items'
// and chunks', the model's own stay, whatever the batch: an item holding
// vectors of two other models, split by a batch, kept the second when the
// pages went by item alone (a review: 3 of 6 left with a batch of 1).
// The models of running worker processes stay too (a rolling change of
// model), and go once their processes have stopped.
func TestDeleteOtherModelVectors(t *testing.T) {
	ctx, s := setup(t)
	ids := aliceItems(t, ctx, s, 3)
	for _, m := range []string{"a", "b", "c", "d"} {
		saveAll(t, ctx, s, "alice", m, ids)
	}
	// A live process of model b, a dead one of model a, one without.
	for id, m := range map[string]string{"pb": "b", "pa": "a", "pnone": ""} {
		if err := s.RegisterProcess(ctx, id, store.ProcessRecord{EmbedModel: m}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.EndProcess(ctx, "pa"); err != nil {
		t.Fatal(err)
	}
	items, chunks, err := s.DeleteOtherModelVectors(ctx, "c", time.Minute, 1)
	if err != nil || items != 6 || chunks != 0 {
		t.Fatalf("with a live process of model b: deleted %d item and %d chunk vectors (%v); want models a's and d's 6", items, chunks, err)
	}
	for _, m := range []string{"a", "d"} {
		if got := embeddedIDs(t, ctx, s, "alice", m); len(got) != 0 {
			t.Fatalf("vectors of model %s left for items %v", m, got)
		}
	}
	if got := embeddedIDs(t, ctx, s, "alice", "b"); len(got) != 3 {
		t.Fatalf("the live process's model b keeps vectors of items %v; want all 3", got)
	}
	if err := s.EndProcess(ctx, "pb"); err != nil {
		t.Fatal(err)
	}
	for _, batch := range []int{1, 2, 1000} {
		items, chunks, err := s.DeleteOtherModelVectors(ctx, "c", time.Minute, batch)
		if err != nil {
			t.Fatal(err)
		}
		want := map[int]int64{1: 3}[batch] // the first run deletes model b's three, the others nothing
		if items != want || chunks != 0 {
			t.Fatalf("batch %d: deleted %d item and %d chunk vectors; want %d and 0", batch, items, chunks, want)
		}
		for _, m := range []string{"a", "b"} {
			if got := embeddedIDs(t, ctx, s, "alice", m); len(got) != 0 {
				t.Fatalf("batch %d: vectors of model %s left for items %v", batch, m, got)
			}
		}
		if got, want := embeddedIDs(t, ctx, s, "alice", "c"), slices.Sorted(slices.Values(ids)); !slices.Equal(got, want) {
			t.Fatalf("batch %d: the model's own vectors %v; want %v", batch, got, want)
		}
	}
}

// aliceWrites inserts n context items of alice and returns their ids and
// a vector of model "m" for each, as an embed job would save them.
func aliceWrites(t *testing.T, ctx context.Context, s *store.Store, n int) ([]int64, []store.EmbeddingWrite) {
	t.Helper()
	ids := aliceItems(t, ctx, s, n)
	targets, err := s.EmbeddingTargets(ctx, "alice", ids, "m")
	if err != nil || len(targets) != n {
		t.Fatal(len(targets), err)
	}
	var ws []store.EmbeddingWrite
	for _, tg := range targets {
		ws = append(ws, store.EmbeddingWrite{ContextID: tg.ID, ContentHash: tg.ContentHash, Dims: 3, Vector: vec(tg.ID, "m")})
	}
	return ids, ws
}

// aliceItems stores n items for alice, questions q0, q1, ..., and returns
// their ids in input order.
func aliceItems(t *testing.T, ctx context.Context, s *store.Store, n int) []int64 {
	t.Helper()
	var writes []store.ContextWrite
	for i := range n {
		writes = append(writes, store.ContextWrite{UserID: "alice", Question: fmt.Sprintf("q%d", i), Answer: "a", CreatedAt: t0})
	}
	ids, err := s.InsertContext(ctx, writes)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}
