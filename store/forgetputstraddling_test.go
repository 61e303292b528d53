package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// A put begun before a forget's time that creates a collection and
// commits while the forget's delete waits at its first lock (for a put
// into another collection of the user's) is answered before the forget
// is: its document was put before the forget's time and must go with the
// forget. The delete read only the collections its first lock saw and
// left that collection with its document (an ok forget, a write of the
// user's answered before it, left).
func TestForgetDeletesAPutBeforeItIntoACollectionCreatedDuringIt(t *testing.T) {
	for _, c := range forgetDocumentDeletes {
		t.Run(c.name, func(t *testing.T) {
			ctx, s := setup(t)
			put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "a", Source: "a.md", Content: "# A\n\nThe first fact.\n", Chunk: chunkWith})
			// The put into a new collection begins, creates it and waits
			// for the documents cap's lock.
			// Held on connections of their own: the store's pool serves
			// the put, the delete and the waits' checks.
			capTx, capPID := beginOwn(t, s)
			if _, err := capTx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('memoryd.docs_cap.' || current_schema(), 0))`); err != nil {
				t.Fatal(err)
			}
			_, putDone := waitingOn(t, s, capPID, "the put into a new collection", "the documents cap", func() error {
				_, err := s.PutDocument(ctx, store.DocumentPut{Owner: alice, Collection: "new", DocID: "x", Source: "x.md",
					Content: "# X\n\nA fact put before the forget.\n", Chunk: chunkWith, MaxTotalBytes: 1 << 20})
				return err
			})
			// The forget's time, after the put began.
			var at time.Time
			if err := s.Pool().QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&at); err != nil {
				t.Fatal(err)
			}
			// The delete waits at its first lock for a put into kb.
			first, firstPID := beginOwn(t, s)
			if _, err := first.Exec(ctx, `SELECT FROM collections WHERE owner = 'alice' AND name = 'kb' FOR KEY SHARE`); err != nil {
				t.Fatal(err)
			}
			var deleted int64
			_, done := waitingOn(t, s, firstPID, "the forget's delete", "kb", func() error {
				var err error
				deleted, err = c.delete(ctx, s, at)
				return err
			})
			// The put commits and is answered, before the forget.
			if err := capTx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-putDone; err != nil {
				t.Fatalf("the put begun before the forget: %v", err)
			}
			if err := first.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("the forget's delete: %v", err)
			}
			cols, _, docs := aliceCollectionsAndDocuments(t, ctx, s)
			if deleted != 2 || cols != 0 || docs != 0 {
				t.Fatalf("deleted %d documents, %d collections and %d documents of alice left; want 2 deleted, none left: the put into the new collection was answered before the forget and put before its time", deleted, cols, docs)
			}
		})
	}
}

// beginOwn begins a transaction on a connection of its own, outside the
// store's pool, and returns it with its backend's pid.
func beginOwn(t *testing.T, s *store.Store) (pgx.Tx, int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, storetest.URL(t, s))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return beginOn(t, conn)
}
