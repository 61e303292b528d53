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
	hold, forgot := forgetHeldAt(t, e, put.Collection.ID)
	if granted, err := s.GrantReader(ctx, "team-b", "alice"); err != nil || !granted {
		t.Fatalf("grant during the forget: %v, %v; want it granted", granted, err)
	}
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-forgot
	if r.err != nil {
		t.Fatalf("forget: %v", r.err)
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

// A document put while the user's forget runs, after its memory's
// transaction committed and before its documents' delete, was answered ok
// and then deleted by that delete, which took every collection of the
// user: a lost write, where a forget cut short and finished at a start
// (store.DeleteDocumentsBefore) keeps a document created after the
// forget's time, and the collection created for it. Both stay now, in a
// collection of the user's from before the forget (journal) as in one the
// put created (later); the documents put before the forget go, and so do
// their collections, but journal, which holds the new one. The documents'
// delete is held at alice's first collection (notes, a transaction holding
// it) until the puts are answered.
func TestForgetKeepsADocumentPutDuringIt(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	s := e.store
	alice := store.Owner{User: "alice"}
	put := func(collection, doc string) store.PutResult {
		t.Helper()
		r, err := s.PutDocument(ctx, store.DocumentPut{Owner: alice, Collection: collection, DocID: doc, Content: "# " + doc + "\n\nThe boat is blue.\n"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	notes := put("notes", "n1")
	put("journal", "j1")
	hold, forgot := forgetHeldAt(t, e, notes.Collection.ID)
	put("journal", "j2")
	put("later", "l1")
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-forgot
	if r.err != nil {
		t.Fatalf("forget: %v", r.err)
	}
	if r.Documents != 2 {
		t.Errorf("the forget reports %d documents, want 2 (n1 and j1)", r.Documents)
	}
	rows, err := s.Pool().Query(ctx, `SELECT c.name || '/' || d.doc_id FROM collections c LEFT JOIN documents d ON d.collection_id = c.id
		WHERE c.owner_kind = 'user' AND c.owner = 'alice' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"journal/j2", "later/l1"}; !slices.Equal(left, want) {
		t.Errorf("alice's documents after the forget: %v; want %v, put during it (n1 and j1, put before, deleted with notes)", left, want)
	}
}

// A docs grant whose statement began before the user's forget and
// committed after its documents' delete (here it waits for a transaction
// inserting the same grant, which then rolls back) kept its time from
// before the forget (granted_at, the transaction's start): that delete,
// whose snapshot did not hold it, left it, and a finish of the forget at
// a start (store.DeleteDocumentsBefore) would delete it, the grant going
// or staying by which path the forget took. The grant takes a lock the
// documents' delete takes too, and its time once it holds it: made after
// the forget's time, it stays either way.
func TestForgetOrdersAGrantThatBeganBeforeIt(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	s := e.store
	if _, err := s.PutDocument(ctx, store.DocumentPut{Owner: store.Owner{User: "alice"}, Collection: "notes", DocID: "d", Content: "# Notes\n\nThe boat is blue.\n"}); err != nil {
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
	if _, err := hold.Exec(ctx, `INSERT INTO collection_readers (scope, user_id) VALUES ('team-b', 'alice')`); err != nil {
		t.Fatal(err)
	}
	granted := make(chan error, 1)
	go func() {
		_, err := s.GrantReader(ctx, "team-b", "alice")
		granted <- err
	}()
	// The backends waiting for the holder (the grant), and those waiting
	// for one of them (the forget).
	blocked := func() (grants, behind int) {
		if err := s.Pool().QueryRow(ctx, `SELECT
			(SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))),
			(SELECT count(*) FROM pg_stat_activity a WHERE EXISTS (SELECT 1 FROM pg_stat_activity g
				WHERE $1 = ANY(pg_blocking_pids(g.pid)) AND g.pid = ANY(pg_blocking_pids(a.pid))))`, holder).Scan(&grants, &behind); err != nil {
			t.Fatal(err)
		}
		return grants, behind
	}
	eventstest.Eventually(t, "the grant to wait for the holder", 30*time.Second, func() (bool, string) {
		n, _ := blocked()
		return n == 1, fmt.Sprint(n, " waiting")
	})

	var r worker.ForgetResult
	forgot := make(chan error, 1)
	go func() {
		var err error
		r, err = worker.Forget(ctx, e.js, s, e.prefix, e.stream, "alice")
		forgot <- err
	}()
	// The forget ends, or waits for the grant.
	eventstest.Eventually(t, "the forget to end or wait for the grant", 30*time.Second, func() (bool, string) {
		_, n := blocked()
		return len(forgot) > 0 || n == 1, fmt.Sprint(n, " waiting for the grant")
	})
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-granted; err != nil {
		t.Fatalf("grant: %v", err)
	}
	if err := <-forgot; err != nil {
		t.Fatalf("forget: %v", err)
	}
	if r.Documents != 1 {
		t.Errorf("the forget reports %d documents, want 1", r.Documents)
	}
	var grants int
	var after bool
	if err := s.Pool().QueryRow(ctx, `SELECT count(*), coalesce(bool_and(granted_at > (SELECT forgotten_at FROM tombstones WHERE user_token = 'alice')), false)
		FROM collection_readers WHERE user_id = 'alice'`).Scan(&grants, &after); err != nil {
		t.Fatal(err)
	}
	if grants != 1 || !after {
		t.Errorf("alice's grants after the forget: %d, made after the forget's time: %v; want the grant, answered after the forget's memory, made after its time", grants, after)
	}
}

// forgottenDocs is a forget's end: its result, or its error.
type forgottenDocs struct {
	worker.ForgetResult
	err error
}

// forgetHeldAt starts alice's forget with a transaction holding her
// collection, and returns once the forget's memory transaction has
// committed (the tombstone is there) and its documents' delete waits for
// the holder: committing hold lets it go on, and its end arrives on
// forgot.
func forgetHeldAt(t *testing.T, e *env, collection int64) (hold pgx.Tx, forgot <-chan forgottenDocs) {
	t.Helper()
	ctx := context.Background()
	s := e.store
	hold, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Rollback(ctx) })
	var holder int
	if err := hold.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	if _, err := hold.Exec(ctx, `SELECT FROM collections WHERE id = $1 FOR KEY SHARE`, collection); err != nil {
		t.Fatal(err)
	}
	done := make(chan forgottenDocs, 1)
	go func() {
		r, err := worker.Forget(ctx, e.js, s, e.prefix, e.stream, "alice")
		done <- forgottenDocs{r, err}
	}()
	eventstest.Eventually(t, "the forget's documents' delete to wait for the holder", 30*time.Second, func() (bool, string) {
		if len(done) > 0 {
			return true, ""
		}
		var tombs, waiting int
		err := s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM tombstones WHERE user_token = 'alice'),
			(SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid)))`, holder).Scan(&tombs, &waiting)
		return err == nil && tombs == 1 && waiting == 1, fmt.Sprint(tombs, waiting, err)
	})
	if len(done) > 0 {
		t.Fatalf("the forget ended before its documents' delete waited: %v", (<-done).err)
	}
	return hold, done
}

// A default collection chosen while the user's forget runs, after its
// memory's transaction committed (which deletes the defaults chosen
// before) and before its documents' delete, naming a collection of the
// user's from before the forget whose documents the forget then deletes,
// was answered ok and then went with the collection, which that delete
// found empty: the user's later searches read every collection, as though
// never chosen, and a document put again into it was not searched by
// default. Chosen after the forget's time, as one chosen after its reply,
// it stays, and the collection it names with it (empty). The documents'
// delete is held at alice's first collection (notes).
func TestForgetKeepsADefaultCollectionChosenDuringIt(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	s := e.store
	alice := store.Owner{User: "alice"}
	var notes store.PutResult
	for _, c := range []string{"notes", "journal"} {
		r, err := s.PutDocument(ctx, store.DocumentPut{Owner: alice, Collection: c, DocID: "d", Content: "# " + c + "\n\nThe boat is blue.\n"})
		if err != nil {
			t.Fatal(err)
		}
		if c == "notes" {
			notes = r
		}
	}
	hold, forgot := forgetHeldAt(t, e, notes.Collection.ID)
	set, err := s.SetDefaultCollections(ctx, "alice", []string{"journal"})
	if err != nil {
		t.Fatalf("default collections chosen during the forget: %v, %v; want journal set", set, err)
	}
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-forgot; r.err != nil || r.Documents != 2 {
		t.Fatalf("forget: %d documents, %v; want both deleted", r.Documents, r.err)
	}
	if got, err := s.DefaultCollections(ctx, "alice"); err != nil || !slices.Equal(got, set) {
		t.Errorf("alice's default collections after the forget: %v, %v; want %v, chosen during it", got, err, set)
	}
}
