package store_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
)

// An embedding save locks its items (KEY SHARE) in id order. Every writer
// that deletes several of a user's items must lock them in that order too:
// deleting them in the table's order (an edited item's row lies after
// those of later ids), each could hold an item the other waited for, and
// Postgres failed one of them (40P01): a forget, a clear or a reset that
// told its caller it failed, or an embed job retried. Each test below
// forces that interleaving: the save's first item is held by a third
// transaction (FOR SHARE, which the save's KEY SHARE passes and the
// delete's lock waits for), the deleter is started and waits for it, then
// the save is started and runs until it waits for the deleter or is done,
// then the third transaction ends. Both must succeed.

func TestEmbedSaveBesideForget(t *testing.T) {
	ctx, s := setup(t)
	lo, ws := disorderedItems(t, ctx, s, false)
	embedSaveBeside(t, s, lo, ws, func(ctx context.Context) error {
		_, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{})
		return err
	})
}

func TestEmbedSaveBesideClearOfAll(t *testing.T) {
	ctx, s := setup(t)
	lo, ws := disorderedItems(t, ctx, s, false)
	embedSaveBeside(t, s, lo, ws, func(ctx context.Context) error {
		_, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "alice", All: true})
		return err
	})
}

func TestEmbedSaveBesideClearOfAQuestion(t *testing.T) {
	ctx, s := setup(t)
	lo, ws := disorderedItems(t, ctx, s, false)
	embedSaveBeside(t, s, lo, ws, func(ctx context.Context) error {
		_, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "alice", Question: "Which gate?"})
		return err
	})
}

func TestEmbedSaveBesideResetOfTheUser(t *testing.T) {
	ctx, s := setup(t)
	lo, ws := disorderedItems(t, ctx, s, true)
	embedSaveBeside(t, s, lo, ws, func(ctx context.Context) error {
		r, _, err := s.ResetMemory(ctx, []string{"alice"})
		if err == nil && r.Context != 2 {
			err = fmt.Errorf("reset deleted %d items, want 2", r.Context)
		}
		return err
	})
}

func TestEmbedSaveBesideImportOfAClear(t *testing.T) {
	ctx, s := setup(t)
	// bob's export holds a clear of all his items, which an import
	// applies to alice's older items (both of them).
	if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "bob", Question: "Which train?", Answer: "The 9:12", CreatedAt: past}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "bob", All: true}); err != nil {
		t.Fatal(err)
	}
	var exp bytes.Buffer
	if err := s.Export(ctx, "bob", &exp); err != nil {
		t.Fatal(err)
	}
	lo, ws := disorderedItems(t, ctx, s, false)
	embedSaveBeside(t, s, lo, ws, func(ctx context.Context) error {
		_, err := s.Import(ctx, "alice", "alice", bytes.NewReader(exp.Bytes()))
		if err != nil {
			return err
		}
		if n, err := s.CountContext(ctx, "alice"); err != nil || n != 0 {
			return fmt.Errorf("alice's items after the import of a clear: %d (%v), want 0", n, err)
		}
		return nil
	})
}

// A re-extraction by the model of turns the offline extractor processed
// deletes the offline extractor's items of them (ReplaceOffline).
func TestEmbedSaveBesideReplaceOffline(t *testing.T) {
	ctx, s := setup(t)
	lo, ws := disorderedItems(t, ctx, s, true)
	if err := s.MarkProcessed(ctx, "alice", []string{"e1", "e2"}, store.Provenance{Extractor: "rules"}); err != nil {
		t.Fatal(err)
	}
	embedSaveBeside(t, s, lo, ws, func(ctx context.Context) error {
		return s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
			replaced, err := q.ReplaceOffline(ctx, store.Reextraction{UserID: "alice", EventIDs: []string{"e1", "e2"}, Offline: "rules",
				Provenance: store.Provenance{Extractor: "llm", Model: "m"}})
			if err == nil && len(replaced) != 2 {
				err = fmt.Errorf("replaced %v, want e1 and e2", replaced)
			}
			return err
		})
	})
	if n, err := s.CountContext(ctx, "alice"); err != nil || n != 0 {
		t.Fatalf("alice's items after the re-extraction: %d (%v), want 0", n, err)
	}
}

// An extraction restating both items (InsertContext's dedup update) locks
// them FOR NO KEY UPDATE, which a save's KEY SHARE does not wait for: no
// cycle, whatever the order.
func TestEmbedSaveBesideExtractionRestatingTheItems(t *testing.T) {
	ctx, s := setup(t)
	lo, ws := disorderedItems(t, ctx, s, false)
	embedSaveBeside(t, s, lo, ws, func(ctx context.Context) error {
		_, err := s.InsertContext(ctx, []store.ContextWrite{
			{UserID: "alice", Question: "Which gate?", Answer: "Gate 9", CreatedAt: past.Add(time.Hour), Provenance: store.Provenance{Extractor: "rules"}},
			{UserID: "alice", Question: "Which gate?", Answer: "Gate 10", CreatedAt: past.Add(time.Hour), Provenance: store.Provenance{Extractor: "rules"}},
		})
		return err
	})
}

// past is before any clear's time (a clear is stamped with the server's).
var past = time.Date(2020, 1, 1, 10, 0, 0, 0, time.UTC)

// disorderedItems stores two items of alice with the same question (from
// recorded turns, extracted, when extracted; else written directly) and
// moves the row of the one of the lower id, lo, after the other's, as an
// edit does; it returns lo and a vector of model "m" for each.
func disorderedItems(t *testing.T, ctx context.Context, s *store.Store, extracted bool) (int64, []store.EmbeddingWrite) {
	t.Helper()
	var prov store.Provenance
	if extracted {
		prov.Extractor = "rules"
		if _, err := s.InsertTurns(ctx, []store.Turn{
			{EventID: "e1", UserID: "alice", UserMessage: "Gate 9", TurnAt: past},
			{EventID: "e2", UserID: "alice", UserMessage: "Gate 10", TurnAt: past},
		}); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := s.InsertContext(ctx, []store.ContextWrite{
		{UserID: "alice", Question: "Which gate?", Answer: "Gate 9", EventID: "e1", CreatedAt: past, Provenance: prov},
		{UserID: "alice", Question: "Which gate?", Answer: "Gate 10", EventID: "e2", CreatedAt: past, Provenance: prov},
	})
	if err != nil || len(ids) != 2 {
		t.Fatal(ids, err)
	}
	slices.Sort(ids)
	// A new row version outside HOT (created_at is indexed): after the
	// other item's in the heap and in every index ordered by heap position.
	if _, err := s.Pool().Exec(ctx, `UPDATE context SET created_at = created_at + interval '1 second' WHERE id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	var order []int64
	if err := s.Pool().QueryRow(ctx, `SELECT array_agg(id ORDER BY ctid) FROM context WHERE user_id = 'alice'`).Scan(&order); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order, []int64{ids[1], ids[0]}) {
		t.Fatalf("items in the table's order %v; want %v, the lower id last", order, []int64{ids[1], ids[0]})
	}
	targets, err := s.EmbeddingTargets(ctx, "alice", ids, "m")
	if err != nil || len(targets) != 2 {
		t.Fatal(len(targets), err)
	}
	var ws []store.EmbeddingWrite
	for _, tg := range targets {
		ws = append(ws, store.EmbeddingWrite{ContextID: tg.ID, ContentHash: tg.ContentHash, Dims: 3, Vector: vec(tg.ID, "m")})
	}
	return ids[0], ws
}

// embedSaveBeside runs del and a save of ws beside each other, in the
// order that closes a cycle when del locks the items in another order
// than the save's (see the top of this file), and fails the test unless
// both succeed.
func embedSaveBeside(t *testing.T, s *store.Store, lo int64, ws []store.EmbeddingWrite, del func(context.Context) error) {
	t.Helper()
	ctx := context.Background()
	hold, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx)
	var holder int
	if err := hold.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	if _, err := hold.Exec(ctx, `SELECT FROM context WHERE id = $1 FOR SHARE`, lo); err != nil {
		t.Fatal(err)
	}
	// The deleter's backend, once it waits for the held item.
	deleter, deleted := waitingOn(t, s, holder, "the deleter", "the held item", func() error { return del(ctx) })
	saved := make(chan saveResult, 1)
	go func() {
		n, err := s.SaveEmbeddings(ctx, "m", ws)
		saved <- saveResult{n, err}
	}()
	// The save waits for an item the deleter locked, or is done.
	blockedBy(t, s, deleter, func() bool { return len(saved) > 0 }, "the save to wait for the deleter or finish")
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	derr, res := <-deleted, <-saved
	if derr != nil || res.err != nil {
		t.Fatalf("deleter: %v; save: %d saved, %v; want both done", derr, res.n, res.err)
	}
}

// waitingOn runs f in a goroutine and returns once it waits for a lock
// backend pid holds: the pid of its backend, and a channel that gets f's
// error. The test fails when f ends without having waited (who did not
// wait for on).
func waitingOn(t *testing.T, s *store.Store, pid int, who, on string, f func() error) (int, <-chan error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	waiter := blockedBy(t, s, pid, func() bool { return len(done) > 0 }, who+" to wait for "+on)
	if waiter == 0 {
		t.Fatalf("%s did not wait for %s: %v", who, on, <-done)
	}
	return waiter, done
}

// blockedBy waits until a backend waits for a lock backend pid holds and
// returns its pid, or 0 once done says the other side finished first. Only
// the backends pid blocks count: other tests share the server.
func blockedBy(t *testing.T, s *store.Store, pid int, done func() bool, what string) int {
	t.Helper()
	var waiter int
	eventstest.Eventually(t, what, 30*time.Second, func() (bool, string) {
		if done() {
			return true, ""
		}
		err := s.Pool().QueryRow(context.Background(), `SELECT coalesce(min(pid), 0) FROM pg_stat_activity
			WHERE $1 = ANY(pg_blocking_pids(pid))`, pid).Scan(&waiter)
		return err == nil && waiter != 0, fmt.Sprint(waiter, err)
	})
	return waiter
}
