package worker_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// A docs grant to a user made while the user's forget runs, after its
// memory's transaction committed and before its documents' delete, was
// answered ok and then deleted by that delete, which took every grant of
// the user. It is made after the forget (its time, the tombstone's), as
// one made after the forget's reply: it stays, as a forget cut short and
// finished at a start keeps it (store.DeleteDocumentsBefore). A grant
// made before the forget goes with it. The documents' delete is held
// at alice's collection (a transaction holding it) until the grant is
// made.
func TestForgetKeepsAGrantMadeDuringIt(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	s := e.store
	put, err := s.PutDocument(ctx, store.DocumentPut{Owner: store.Owner{User: "alice"}, Collection: "notes", DocID: "d", Content: "# Notes\n\nThe boat is blue.\n"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GrantReader(ctx, "team-a", "alice"); err != nil {
		t.Fatal(err)
	}
	hold, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Rollback(ctx) })
	var holder int
	if err := hold.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	if _, err := hold.Exec(ctx, `SELECT FROM collections WHERE id = $1 FOR KEY SHARE`, put.Collection.ID); err != nil {
		t.Fatal(err)
	}

	var r worker.ForgetResult
	forgot := make(chan error, 1)
	go func() {
		var err error
		r, err = worker.Forget(ctx, e.js, s, e.prefix, e.stream, "alice")
		forgot <- err
	}()
	// The memory's transaction has committed (the tombstone is there) and
	// the documents' delete waits for the holder.
	eventstest.Eventually(t, "the forget's documents' delete to wait for the holder", 30*time.Second, func() (bool, string) {
		if len(forgot) > 0 {
			return true, ""
		}
		var tombs, waiting int
		err := s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM tombstones WHERE user_token = 'alice'),
			(SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid)))`, holder).Scan(&tombs, &waiting)
		return err == nil && tombs == 1 && waiting == 1, fmt.Sprint(tombs, waiting, err)
	})
	if len(forgot) > 0 {
		t.Fatalf("the forget ended before its documents' delete waited: %v", <-forgot)
	}
	if granted, err := s.GrantReader(ctx, "team-b", "alice"); err != nil || !granted {
		t.Fatalf("grant during the forget: %v, %v; want it granted", granted, err)
	}
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-forgot; err != nil {
		t.Fatalf("forget: %v", err)
	}
	if r.Documents != 1 {
		t.Errorf("the forget reports %d documents, want 1", r.Documents)
	}
	rows, err := s.Pool().Query(ctx, `SELECT scope FROM collection_readers WHERE user_id = 'alice' ORDER BY scope`)
	if err != nil {
		t.Fatal(err)
	}
	scopes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(scopes, []string{"team-b"}) {
		t.Errorf("alice's grants after the forget: %v; want team-b's, made during it (team-a's, made before, deleted)", scopes)
	}
}
