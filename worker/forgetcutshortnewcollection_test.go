package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/worker"
)

// A start finishing a forget cut short beside a put that began before the
// forget and creates a collection while the finish deletes the user's
// documents, and a second put into that collection: the finish's
// transaction deadlocked with the second put (store.DeleteDocumentsBefore
// deleted the new collection's document, then waited for the collection
// the put held while it waited for that document), Postgres rolled it
// back, and the finish, which does not retry in place, logged that the
// user's documents were still here: they stayed, the record unfinished,
// until the next start or the reconcile's sweep of stale forgets. Now the
// finish locks a collection before it deletes any of its documents (the
// new one in a round of its own, once the second put commits): done, and
// the new collection's document, put by a put begun before the forget,
// deleted with it.
func TestForgetCutShortFinishedBesideAPutIntoACollectionCreatedDuringIt(t *testing.T) {
	e := setup(t)
	e.start(extractor.NewRules(), nil)() // the streams
	e.putDoc("alice", "notes", "a")
	ctx := e.ctx
	begin := func() (pgx.Tx, int) {
		tx, err := e.store.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback(context.WithoutCancel(ctx)) })
		var pid int
		if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		return tx, pid
	}
	// blockedBy waits until a backend waits for a lock pid holds (true)
	// or done says the finish ended (false).
	blockedBy := func(pid int, done func() bool, what string) bool {
		var waiter int
		eventstest.Eventually(t, what, 30*time.Second, func() (bool, string) {
			if done() {
				return true, ""
			}
			err := e.store.Pool().QueryRow(ctx, `SELECT coalesce(min(pid), 0) FROM pg_stat_activity
				WHERE $1 = ANY(pg_blocking_pids(pid))`, pid).Scan(&waiter)
			return err == nil && waiter != 0, fmt.Sprint(waiter, err)
		})
		return waiter != 0
	}
	// The put that began before the forget: its time is before it.
	early, _ := begin()
	e.cutForget("alice")
	var collection int64
	if err := early.QueryRow(ctx, `INSERT INTO collections (owner_kind, owner, name, chunk_tokens, overlap_tokens, ts_config)
		VALUES ('user', 'alice', 'new', 200, 30, 'english') RETURNING id`).Scan(&collection); err != nil {
		t.Fatal(err)
	}
	if _, err := early.Exec(ctx, `INSERT INTO documents (collection_id, doc_id, source, content_hash, content, size_bytes, status, put_at)
		VALUES ($1, 'x', 'x.md', 'h', '# X', 3, 'ready', now())`, collection); err != nil {
		t.Fatal(err)
	}
	// The finish waits at its first lock for a put into notes.
	first, firstPID := begin()
	if _, err := first.Exec(ctx, `SELECT FROM collections WHERE owner = 'alice' AND name = 'notes' FOR KEY SHARE`); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		worker.ReapplyForgets(ctx, e.js, e.store, e.prefix, e.stream, slog.New(slog.NewTextHandler(&logs, nil)))
	}()
	finished := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	if !blockedBy(firstPID, finished, "the finish to wait for notes") {
		t.Fatalf("the finish did not wait for notes:\n%s", logs.String())
	}
	// The early put commits: a collection the finish's lock did not see.
	if err := early.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	second, secondPID := begin()
	if _, err := second.Exec(ctx, `SELECT FROM collections WHERE id = $1 FOR KEY SHARE`, collection); err != nil {
		t.Fatal(err)
	}
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if blockedBy(secondPID, finished, "the finish to wait for the new collection, or end") {
		// The second put goes on to its document, as a put of x again does.
		if _, err := second.Exec(ctx, `SELECT FROM documents WHERE collection_id = $1 AND doc_id = 'x' FOR UPDATE`, collection); err != nil {
			t.Errorf("the second put: %v", err)
		}
	}
	// The second put commits, as a put does; the finish, which waits for
	// it at the new collection's lock before any of its documents, goes on.
	if err := second.Commit(ctx); err != nil {
		t.Errorf("the second put: commit: %v", err)
	}
	<-done
	// x was put by a put begun before the forget: it goes too.
	docs, unfinished := e.docsOf("alice"), e.forgetRecord("alice").Unfinished
	if strings.Contains(logs.String(), "cannot finish a forget cut short") || unfinished || len(docs) != 0 {
		t.Fatalf("after the start: alice's documents %q, record unfinished %v; want none, finished; log:\n%s", docs, unfinished, logs.String())
	}
}
