package store_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
)

// TestForgetChunkRefusalsBesidePutOfNewContent: a forget of a model's
// chunk refusals (embed --backfill --retry-refused, --dims) beside a put
// of new content leaves none of them under the new content. The put
// keeps the refusals of the chunks it cuts alike (keptChunkVectors):
// read before the forget deleted them, and saved again after it
// committed, they came back, and the retry the operator asked for left
// those chunks out. Now the forget locks the documents holding the
// refusals, as deleteOtherModelChunks does: it waits for the put and
// then deletes what the put kept. The put is held after its read by a
// row trigger on its delete of the old chunks (waiting on an advisory
// lock the test holds).
func TestForgetChunkRefusalsBesidePutOfNewContent(t *testing.T) {
	for _, stale := range []bool{false, true} {
		t.Run(fmt.Sprintf("stale=%v", stale), func(t *testing.T) {
			ctx, s := setup(t)
			p := store.DocumentPut{Owner: alice, Collection: "kb", DocID: "guide", Content: guide, Chunk: chunkWith}
			r := put(t, ctx, s, p)
			if n, err := s.SaveChunkEmbeddingRefusals(ctx, "m", r.Collection.ID, r.DocID, r.Hash, chunkTargets(t, ctx, s, r, "m")[:1]); err != nil || n != 1 {
				t.Fatalf("recorded %d refusals (%v), want 1", n, err)
			}
			if stale {
				// The model behind the name changed since the refusal.
				if _, err := s.EmbeddingDims(ctx, "m", 4); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Pool().Exec(ctx, `UPDATE embedding_models SET recorded_at = now() + interval '1 minute' WHERE model = 'm'`); err != nil {
					t.Fatal(err)
				}
			}
			key := rand.Int64()
			if _, err := s.Pool().Exec(ctx, fmt.Sprintf(`
				CREATE FUNCTION test_hold_put() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN PERFORM pg_advisory_xact_lock_shared(%d); RETURN OLD; END $$;
				CREATE TRIGGER test_hold_put BEFORE DELETE ON doc_chunks FOR EACH ROW
					WHEN (OLD.collection_id = %d) EXECUTE FUNCTION test_hold_put()`, key, r.Collection.ID)); err != nil {
				t.Fatal(err)
			}
			hold, err := s.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer hold.Rollback(ctx)
			if _, err := hold.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, key); err != nil {
				t.Fatal(err)
			}
			// One sentence of the last chunk edited: chunk 0 is cut alike.
			p.Content = guide + "\nRead the release notes.\n"
			var edited store.PutResult
			putDone := saveWaitingOnALock(t, s, hold, "DELETE FROM doc_chunks", func() (int64, error) {
				var err error
				edited, err = s.PutDocument(ctx, p)
				return 0, err
			})
			// The forget, until it is done or waits for the held put.
			type forgot struct {
				n   int64
				err error
			}
			forgetDone := make(chan forgot, 1)
			go func() {
				var f forgot
				if stale {
					_, f.n, f.err = s.ForgetStaleEmbeddingRefusals(ctx, "alice", "m")
				} else {
					f.n, f.err = s.ForgetChunkEmbeddingRefusals(ctx, "alice", "m")
				}
				forgetDone <- f
			}()
			var putter int
			if err := s.Pool().QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE query LIKE 'DELETE FROM doc_chunks%'`).Scan(&putter); err != nil {
				t.Fatal(err)
			}
			var f forgot
			finished := false
			eventstest.Eventually(t, "the forget finished or waiting for the put", time.Minute, func() (bool, string) {
				select {
				case f = <-forgetDone:
					finished = true
					return true, ""
				default:
				}
				var waiting int
				err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, putter).Scan(&waiting)
				return err == nil && waiting > 0, fmt.Sprintf("%d waiting on the put, %v", waiting, err)
			})
			if err := hold.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if res := <-putDone; res.err != nil {
				t.Fatalf("put: %v", res.err)
			}
			if !finished {
				f = <-forgetDone
			}
			if f.err != nil {
				t.Fatalf("forget: %v", f.err)
			}
			var left int
			if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM chunk_embedding_refusals WHERE collection_id = $1 AND model = 'm'`, r.Collection.ID).Scan(&left); err != nil {
				t.Fatal(err)
			}
			if ts := chunkTargets(t, ctx, s, edited, "m"); left != 0 || len(ts) != edited.Chunks {
				t.Errorf("after a forget of the refusals (%d forgotten) beside the put, %d refusals left, %d of %d chunks to embed; want none left, all to embed", f.n, left, len(ts), edited.Chunks)
			}
		})
	}
}
