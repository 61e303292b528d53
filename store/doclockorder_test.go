package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
)

// A start finishing a forget cut short (DeleteDocumentsBefore) locks the
// user's collections in id order, and a forget of the same user
// (DeleteCollections) deleted them in its plan's order: the user's
// collections by name (the (owner_kind, owner, name) index). Each held a
// collection the other waited for and Postgres failed one of them
// (40P01). The third transaction holds the collection the forget's plan
// meets second (as a put into it does): the forget holds the first, the
// finish the one of the lowest id, which the forget's plan meets last.
func TestForgetOfDocumentsBesideFinishOfAForgetCutShort(t *testing.T) {
	ctx, s := setup(t)
	// Created in id order zulu, mike, alpha: the names' order is the
	// reverse.
	ids := collectionsOfAlice(t, ctx, s)
	// The order the forget's delete meets them in (rolled back).
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var order []int64
	err = tx.QueryRow(ctx, `WITH d AS (DELETE FROM collections WHERE owner_kind = 'user' AND owner = 'alice' RETURNING id)
		SELECT array_agg(id) FROM d`).Scan(&order)
	tx.Rollback(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{ids[2], ids[1], ids[0]}; !slices.Equal(order, want) {
		t.Fatalf("the forget's delete meets the collections in the order %v, want %v (the names')", order, want)
	}

	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM collections WHERE id = $1 FOR KEY SHARE`, ids[1]); err != nil {
		t.Fatal(err)
	}
	var forgot, finished int64
	forgetter, forgotten := waitingOn(t, s, holder, "the forget", "the held collection", func() error {
		var err error
		forgot, err = s.DeleteCollections(ctx, alice)
		return err
	})
	done := make(chan error, 1)
	go func() {
		var err error
		finished, err = s.DeleteDocumentsBefore(ctx, "alice", time.Now().Add(time.Hour))
		done <- err
	}()
	// The finish waits for a collection the forget holds or waits for.
	blockedByEither(t, s, holder, forgetter, func() bool { return len(done) > 0 }, "the finish to wait for the forget or the held collection, or finish")
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	ferr, derr := <-forgotten, <-done
	if ferr != nil || derr != nil {
		t.Fatalf("forget: %v; finish of the forget cut short: %v; want both done", ferr, derr)
	}
	if forgot+finished != 3 {
		t.Fatalf("the forget deleted %d documents, the finish %d; want 3 in all", forgot, finished)
	}
	var left int
	if err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM collections WHERE owner = 'alice'`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d collections of alice left (%v), want none", left, err)
	}
}

// Setting a user's default collections locks them (KEY SHARE) by its
// insert's foreign key checks, in the order the user named them, and a
// forget of the user deletes them in id order: each held a collection the
// other waited for (40P01). The defaults name alpha, then zulu (the lowest
// id); the third transaction holds mike, which the forget then waits for
// holding zulu, and the setting waits for zulu holding alpha.
func TestSetDefaultCollectionsBesideForgetOfDocuments(t *testing.T) {
	ctx, s := setup(t)
	ids := collectionsOfAlice(t, ctx, s)
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM collections WHERE id = $1 FOR KEY SHARE`, ids[1]); err != nil {
		t.Fatal(err)
	}
	forgetter, forgotten := forgetHeld(t, ctx, s, holder)
	set := make(chan error, 1)
	go func() {
		_, err := s.SetDefaultCollections(ctx, "alice", []string{"alpha", "zulu"})
		set <- err
	}()
	blockedBy(t, s, forgetter, func() bool { return len(set) > 0 }, "the setting to wait for the forget or finish")
	forgetAndSettingDone(t, s, hold, forgotten, set)
}

// Setting a user's default collections deleted the user's defaults
// before it locked the collections it names (its insert's foreign key
// checks), and a forget of the user deletes the defaults of a collection
// (its cascade) after it locked the collections: each held what the other
// waited for (40P01). Alice's defaults name zulu and mike; the setting
// names alpha. The third transaction holds the default of mike: the
// setting deletes the default of zulu and waits for it; the forget locks
// the collections and its cascade waits for the default of zulu; then the
// setting goes on to alpha.
func TestSetDefaultCollectionsBesideForgetOfTheDefaults(t *testing.T) {
	ctx, s := setup(t)
	ids := collectionsOfAlice(t, ctx, s)
	if _, err := s.SetDefaultCollections(ctx, "alice", []string{"zulu", "mike"}); err != nil {
		t.Fatal(err)
	}
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM doc_defaults WHERE user_id = 'alice' AND collection_id = $1 FOR KEY SHARE`, ids[1]); err != nil {
		t.Fatal(err)
	}
	setter, set := waitingOn(t, s, holder, "the setting", "the held default", func() error {
		_, err := s.SetDefaultCollections(ctx, "alice", []string{"alpha"})
		return err
	})
	_, forgotten := forgetHeld(t, ctx, s, setter)
	forgetAndSettingDone(t, s, hold, forgotten, set)
}

// A forget of a user deleted the user's defaults of the user's own
// collections by its cascade, and the others (of shared collections) at
// its end, and a clear of the defaults deletes them in collection order:
// with a shared collection's id between two of the user's, each held a
// default the other waited for (40P01). Alice's defaults name team/kb and
// alpha (the higher id). The third transaction holds alice's grant of
// team, which the forget deletes between the two: the forget holds the
// default of alpha, the clear the one of team/kb.
func TestClearOfDefaultCollectionsBesideForgetOfDocuments(t *testing.T) {
	ctx, s := setup(t)
	var ids []int64
	for _, c := range []struct {
		owner store.Owner
		name  string
	}{{alice, "zulu"}, {store.Owner{Shared: "team"}, "kb"}, {alice, "alpha"}} {
		r := put(t, ctx, s, store.DocumentPut{Owner: c.owner, Collection: c.name, DocID: "d", Content: "# Notes\n\nThe boat is blue.\n"})
		ids = append(ids, r.Collection.ID)
	}
	if !slices.IsSorted(ids) {
		t.Fatalf("collection ids %v, want them ascending", ids)
	}
	if _, err := s.GrantReader(ctx, "team", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetDefaultCollections(ctx, "alice", []string{"team/kb", "alpha"}); err != nil {
		t.Fatal(err)
	}
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM collection_readers WHERE scope = 'team' AND user_id = 'alice' FOR KEY SHARE`); err != nil {
		t.Fatal(err)
	}
	forgetter, forgotten := forgetHeld(t, ctx, s, holder)
	cleared := make(chan error, 1)
	go func() {
		_, err := s.SetDefaultCollections(ctx, "alice", nil)
		cleared <- err
	}()
	blockedBy(t, s, forgetter, func() bool { return len(cleared) > 0 }, "the clear to wait for the forget or finish")
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	ferr, cerr := <-forgotten, <-cleared
	if ferr != nil || cerr != nil {
		t.Fatalf("forget: %v; clear of the defaults: %v; want both done", ferr, cerr)
	}
	nothingOfAliceLeft(t, s)
}

// Two settings of a user's default collections, with no defaults before
// (nothing to delete, which would have ordered them), inserted their rows
// in the order named: each waited for a row the other inserted (the
// primary key's check) while holding one the other waited for (40P01);
// or the second's insert met the rows the first committed after the
// second's delete looked (23505). The third transaction inserts the
// default of mike: one setting (zulu, mike, alpha) holds zulu, the other
// (alpha, mike, zulu) alpha.
func TestSetDefaultCollectionsInOppositeOrders(t *testing.T) {
	ctx, s := setup(t)
	ids := collectionsOfAlice(t, ctx, s)
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `INSERT INTO doc_defaults (user_id, collection_id, position) VALUES ('alice', $1, 1)`, ids[1]); err != nil {
		t.Fatal(err)
	}
	set2 := make(chan error, 1)
	setter, set1 := waitingOn(t, s, holder, "the first setting", "the held default", func() error {
		_, err := s.SetDefaultCollections(ctx, "alice", []string{"zulu", "mike", "alpha"})
		return err
	})
	go func() {
		_, err := s.SetDefaultCollections(ctx, "alice", []string{"alpha", "mike", "zulu"})
		set2 <- err
	}()
	blockedByEither(t, s, holder, setter, func() bool { return len(set2) > 0 }, "the second setting to wait")
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err1, err2 := <-set1, <-set2; err1 != nil || err2 != nil {
		t.Fatalf("settings: %v; %v; want both done", err1, err2)
	}
	got, err := s.DefaultCollections(ctx, "alice")
	if err != nil || len(got) != 3 {
		t.Fatalf("defaults %v (%v), want the three of one of the settings", got, err)
	}
}

// The finish of a forget cut short deletes the collections it emptied,
// with their defaults by the cascade, in its delete's plan order (by
// name), and a clear of the user's defaults deletes them in its plan's
// order (the table's: as they were inserted, here in id order): each held
// a default the other waited for (40P01). The third
// transaction holds the default of mike: the finish holds alpha's, the
// clear zulu's.
func TestClearOfDefaultCollectionsBesideFinishOfAForgetCutShort(t *testing.T) {
	ctx, s := setup(t)
	ids := collectionsOfAlice(t, ctx, s)
	// Named (and stored) in id order.
	if _, err := s.SetDefaultCollections(ctx, "alice", []string{"zulu", "mike", "alpha"}); err != nil {
		t.Fatal(err)
	}
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM doc_defaults WHERE user_id = 'alice' AND collection_id = $1 FOR KEY SHARE`, ids[1]); err != nil {
		t.Fatal(err)
	}
	finisher, done := waitingOn(t, s, holder, "the finish", "the held default", func() error {
		_, err := s.DeleteDocumentsBefore(ctx, "alice", time.Now().Add(time.Hour))
		return err
	})
	cleared := make(chan error, 1)
	go func() {
		_, err := s.SetDefaultCollections(ctx, "alice", nil)
		cleared <- err
	}()
	blockedByEither(t, s, holder, finisher, func() bool { return len(cleared) > 0 }, "the clear to wait")
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if derr, cerr := <-done, <-cleared; derr != nil || cerr != nil {
		t.Fatalf("finish of the forget cut short: %v; clear of the defaults: %v; want both done", derr, cerr)
	}
	nothingOfAliceLeft(t, s)
}

// forgetAndSettingDone lets the third transaction go and checks that the
// forget and the setting of the defaults both ended well (the setting may
// come after the forget, which deleted what it names) and left nothing.
func forgetAndSettingDone(t *testing.T, s *store.Store, hold pgx.Tx, forgotten, set <-chan error) {
	t.Helper()
	if err := hold.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	ferr, serr := <-forgotten, <-set
	if ferr != nil || serr != nil && !errors.Is(serr, store.ErrNoCollection) {
		t.Fatalf("forget: %v; setting of the defaults: %v; want both done (or the collections gone)", ferr, serr)
	}
	nothingOfAliceLeft(t, s)
}

// nothingOfAliceLeft fails the test when a collection of alice, or a
// default collection of anyone, is left.
func nothingOfAliceLeft(t *testing.T, s *store.Store) {
	t.Helper()
	var left int
	if err := s.Pool().QueryRow(context.Background(), `SELECT (SELECT count(*) FROM collections WHERE owner = 'alice') + (SELECT count(*) FROM doc_defaults)`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d collections or defaults of alice left (%v), want none", left, err)
	}
}

// collectionsOfAlice creates alice's collections zulu, mike and alpha, in
// this order, with a document each, and returns their ids (ascending).
func collectionsOfAlice(t *testing.T, ctx context.Context, s *store.Store) []int64 {
	t.Helper()
	var ids []int64
	for _, name := range []string{"zulu", "mike", "alpha"} {
		r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: name, DocID: "d", Content: "# Notes\n\nThe boat is blue.\n"})
		ids = append(ids, r.Collection.ID)
	}
	if !slices.IsSorted(ids) {
		t.Fatalf("collection ids %v, want them ascending", ids)
	}
	return ids
}

// forgetHeld starts a forget of alice's documents and returns once it
// waits for holder's backend, with its own and a channel that gets its
// error.
func forgetHeld(t *testing.T, ctx context.Context, s *store.Store, holder int) (int, <-chan error) {
	t.Helper()
	return waitingOn(t, s, holder, "the forget", "backend "+fmt.Sprint(holder), func() error {
		_, err := s.DeleteCollections(ctx, alice)
		return err
	})
}

// blockedByEither waits until a backend other than b waits for a lock a
// or b holds, or done says the other side finished first.
func blockedByEither(t *testing.T, s *store.Store, a, b int, done func() bool, what string) {
	t.Helper()
	eventstest.Eventually(t, what, 30*time.Second, func() (bool, string) {
		if done() {
			return true, ""
		}
		var waiting int
		err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE pid <> $2 AND pg_blocking_pids(pid) && ARRAY[$1, $2]::int[]`, a, b).Scan(&waiting)
		return err == nil && waiting > 0, fmt.Sprint(waiting, err)
	})
}

// A collection named as a default and deleted after the setting read it
// (a forget of its user locks it, then deletes it) is "no such
// collection", naming it, which docs.defaults answers as its 404: the
// insert's foreign key check failed with Postgres's own error (23503), a
// 500. The defaults set before stay.
func TestSetDefaultCollectionsOfACollectionDeletedMeanwhile(t *testing.T) {
	ctx, s := setup(t)
	ids := collectionsOfAlice(t, ctx, s)
	if _, err := s.SetDefaultCollections(ctx, "alice", []string{"zulu"}); err != nil {
		t.Fatal(err)
	}
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM collections WHERE id = $1 FOR UPDATE`, ids[1]); err != nil {
		t.Fatal(err)
	}
	_, set := waitingOn(t, s, holder, "the setting", "the held collection", func() error {
		_, err := s.SetDefaultCollections(ctx, "alice", []string{"alpha", "mike"})
		return err
	})
	if _, err := hold.Exec(ctx, `DELETE FROM collections WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	err := <-set
	if nc := (*store.NoCollectionError)(nil); !errors.As(err, &nc) || nc.Name != "mike" {
		t.Fatalf("setting of a default deleted meanwhile: %v, want no such collection \"mike\"", err)
	}
	if got, err := s.DefaultCollections(ctx, "alice"); err != nil || !slices.Equal(got, []string{"zulu"}) {
		t.Fatalf("defaults after the refused setting = %v, %v; want [zulu]", got, err)
	}
}

// A forget of a user's documents reports the documents it deleted, a
// document a put it waited for added among them: counted before its
// locks, the forget reported 3 of the 4 it deleted.
func TestForgetOfDocumentsCountsAPutItWaitedFor(t *testing.T) {
	ctx, s := setup(t)
	collectionsOfAlice(t, ctx, s)
	hold, holder := begin(t, s)
	if _, err := s.WithTx(hold).PutDocument(ctx, store.DocumentPut{Owner: alice, Collection: "mike", DocID: "e", Content: "# Notes\n\nThe car is red.\n"}); err != nil {
		t.Fatal(err)
	}
	var forgot int64
	_, forgotten := waitingOn(t, s, holder, "the forget", "the put", func() error {
		var err error
		forgot, err = s.DeleteCollections(ctx, alice)
		return err
	})
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-forgotten; err != nil {
		t.Fatal(err)
	}
	var left int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM documents`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d documents left (%v), want none", left, err)
	}
	if forgot != 4 {
		t.Fatalf("the forget reported %d documents, want the 4 it deleted", forgot)
	}
}
