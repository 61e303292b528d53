package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
)

// TestTwoPutsOfOneDocumentAtOnce: two puts of the same document with other
// content, the second running while the first's transaction is open (it
// waits for it), leave the second's document wholly: its hash, content,
// size, chunk count, and exactly its chunks (no chunk of the first's left
// beside or among them), each chunk with the embed hook's call. Both as
// the document's first put (neither sees a row: the second's insert meets
// the first's) and as a replacement of a stored one.
func TestTwoPutsOfOneDocumentAtOnce(t *testing.T) {
	first := strings.Repeat("## Boats\n\nThe first boat is blue and sails at dawn.\n\n", 12)
	second := "## Trains\n\nThe second train is red.\n"
	for _, stored := range []bool{false, true} {
		t.Run(fmt.Sprintf("stored=%v", stored), func(t *testing.T) {
			ctx, s := setup(t)
			hooked := make(chan []store.DocChunksRef, 4)
			s.SetChunkHook(func(_ context.Context, _ pgx.Tx, docs []store.DocChunksRef) error {
				hooked <- docs
				return nil
			})
			if stored {
				put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "d", Content: "# Old\n\nOld words.\n"})
				<-hooked
			}
			tx, pid := beginWithPID(t, ctx, s)
			r1, err := s.WithTx(tx).PutDocument(ctx, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "d", Content: first, Chunk: chunkWith})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			var r2 store.PutResult
			go func() {
				var err error
				r2, err = s.PutDocument(ctx, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "d", Content: second, Chunk: chunkWith})
				done <- err
			}()
			eventstest.Eventually(t, "the second put to wait for the first", 30*time.Second, func() (bool, string) {
				return waitersOn(t, ctx, s, pid) > 0, "not waiting"
			})
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if r1.Chunks <= r2.Chunks {
				t.Fatalf("the first put has %d chunks, the second %d: want the first's more, so that a leftover shows", r1.Chunks, r2.Chunks)
			}
			var hash, content, status string
			var size, chunks int
			if err := s.Pool().QueryRow(ctx, `SELECT content_hash, content, status, size_bytes, chunks FROM documents d
				JOIN collections c ON c.id = d.collection_id WHERE c.owner = 'alice' AND d.doc_id = 'd'`).
				Scan(&hash, &content, &status, &size, &chunks); err != nil {
				t.Fatal(err)
			}
			if hash != r2.Hash || content != second || status != store.DocReady || size != len(second) || chunks != r2.Chunks {
				t.Fatalf("document after both puts: hash %.8s, %d bytes, %s, %d chunks; want the second's (%.8s, %d bytes, ready, %d chunks)",
					hash, size, status, chunks, r2.Hash, len(second), r2.Chunks)
			}
			want, err := chunkWith(r2.Collection, "d", second)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := s.Pool().Query(ctx, `SELECT text FROM doc_chunks WHERE collection_id = $1 AND doc_id = 'd' ORDER BY chunk_index`, r2.Collection.ID)
			if err != nil {
				t.Fatal(err)
			}
			texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			var wantTexts []string
			for _, c := range want {
				wantTexts = append(wantTexts, c.Text)
			}
			if !slices.Equal(texts, wantTexts) {
				t.Fatalf("chunks after both puts: %q; want the second's %q", texts, wantTexts)
			}
			// The hook saw the first content's chunks, then the second's.
			got := []store.DocChunksRef{(<-hooked)[0], (<-hooked)[0]}
			if got[0].Hash != r1.Hash || got[1].Hash != r2.Hash || got[1].Chunks != r2.Chunks {
				t.Fatalf("chunk hook calls %+v; want the first's %.8s, then the second's %.8s with %d chunks", got, r1.Hash, r2.Hash, r2.Chunks)
			}
		})
	}
}
