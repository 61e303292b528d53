package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// A forget's delete of a user's documents (DeleteDocumentsBefore, a start
// finishing a forget cut short; ForgetCollections, the forget's own)
// locked the user's collections, deleted the documents of every
// collection its delete statement saw, then locked the collections left
// empty again to delete them. A collection a put created and committed
// between the first lock and the delete was not locked first: its
// documents were deleted, and a put or a chunk vector save into it that
// held its key share lock (as each takes it first) and then waited for
// one of those documents closed a cycle with the second lock, which
// waited for that put. Postgres rolled one back (40P01): the forget's
// transaction, with the documents it had deleted (a review's stress test,
// 5 runs of 20). Now the delete locks a collection before it deletes any
// of its documents (the new one in a round of its own, after the put into
// it commits), and nothing waits in a cycle.
func TestForgetOfDocumentsBesidePutIntoACollectionCreatedDuringIt(t *testing.T) {
	for _, c := range forgetDocumentDeletes {
		t.Run(c.name, func(t *testing.T) {
			ctx, s := setup(t)
			put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "a", Source: "a.md", Content: "# A\n\nThe first fact.\n", Chunk: chunkWith})
			// The delete waits at its first lock for a put into kb.
			first, firstPID := begin(t, s)
			if _, err := first.Exec(ctx, `SELECT FROM collections WHERE owner = 'alice' AND name = 'kb' FOR KEY SHARE`); err != nil {
				t.Fatal(err)
			}
			var deleted int64
			_, done := waitingOn(t, s, firstPID, "the forget's delete", "kb", func() error {
				var err error
				// A time after every put here: each is before the forget.
				deleted, err = c.delete(ctx, s, time.Now().Add(time.Hour))
				return err
			})
			// Meanwhile a put creates a collection, which the delete's
			// first lock did not see, and a second put into it holds
			// its key share lock.
			created := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "new", DocID: "x", Source: "x.md", Content: "# X\n\nA fact put during the forget.\n", Chunk: chunkWith})
			second, secondPID := begin(t, s)
			if _, err := second.Exec(ctx, `SELECT FROM collections WHERE id = $1 FOR KEY SHARE`, created.Collection.ID); err != nil {
				t.Fatal(err)
			}
			if err := first.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			// The delete goes on: before, it deleted x and then waited
			// for the new collection, which the second put holds.
			if blockedBy(t, s, secondPID, func() bool { return len(done) > 0 }, "the delete to wait for the new collection, or finish") != 0 {
				// The second put goes on to its document, as a put of x
				// again does (its upsert locks the row).
				_, err := second.Exec(ctx, `SELECT FROM documents WHERE collection_id = $1 AND doc_id = 'x' FOR UPDATE`, created.Collection.ID)
				if err != nil {
					t.Errorf("the put into the new collection: %v", err)
				}
			}
			// The second put commits, as a put does, and the delete, which
			// now waits for it at the new collection's lock before any of
			// its documents, goes on.
			if err := second.Commit(ctx); err != nil {
				t.Errorf("the put into the new collection: commit: %v", err)
			}
			derr := <-done
			_, kb, docs := aliceCollectionsAndDocuments(t, ctx, s)
			if derr != nil {
				// Rolled back: kb and its document were left.
				t.Fatalf("the forget's delete beside a put into a collection created during it: %v (%d kb collections, %d documents of alice left); want it done", derr, kb, docs)
			}
			// x was put before the forget's time and answered before the
			// forget: it goes too, with its collection
			// (TestForgetDeletesAPutBeforeItIntoACollectionCreatedDuringIt).
			if deleted != 2 || kb != 0 || docs != 0 {
				t.Fatalf("deleted %d documents, %d kb collections and %d documents of alice left; want 2 deleted, none left", deleted, kb, docs)
			}
		})
	}
}

// forgetDocumentDeletes are the two ways a forget deletes a user's
// documents: the forget's own (ForgetCollections) and the finish of a
// forget cut short (DeleteDocumentsBefore), alice's of at or before.
var forgetDocumentDeletes = []struct {
	name   string
	delete func(ctx context.Context, s *store.Store, at time.Time) (int64, error)
}{
	{"finish of a forget cut short", func(ctx context.Context, s *store.Store, at time.Time) (int64, error) {
		return s.DeleteDocumentsBefore(ctx, "alice", at)
	}},
	{"forget", func(ctx context.Context, s *store.Store, at time.Time) (int64, error) {
		return s.ForgetCollections(ctx, "alice", at)
	}},
}

// aliceCollectionsAndDocuments counts alice's collections, those of them
// named kb, and the documents in them.
func aliceCollectionsAndDocuments(t *testing.T, ctx context.Context, s *store.Store) (cols, kb, docs int) {
	t.Helper()
	if err := s.Pool().QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE name = 'kb'),
		(SELECT count(*) FROM documents d JOIN collections c ON c.id = d.collection_id WHERE c.owner = 'alice')
		FROM collections WHERE owner = 'alice'`).Scan(&cols, &kb, &docs); err != nil {
		t.Fatal(err)
	}
	return cols, kb, docs
}
