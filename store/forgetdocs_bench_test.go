package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// BenchmarkForgetCollections10MB times the document side of a forget of a
// user holding about 10 MB of documents (BenchmarkPutDocuments10MB's
// text, chunked, in two collections): ForgetCollections, which the forget
// runs, beside DeleteCollections, which it ran before (every collection
// by the cascade). Run with -benchtime=1x: the puts are not timed.
func BenchmarkForgetCollections10MB(b *testing.B) {
	docs := benchCorpus(b, 10<<20)
	ids := slices.Sorted(func(yield func(string) bool) {
		for k := range docs {
			if !yield(k) {
				return
			}
		}
	})
	s := storetest.New(b)
	ctx := context.Background()
	for _, bc := range []struct {
		name   string
		forget func(user string) (int64, error)
	}{
		{"ForgetCollections", func(user string) (int64, error) {
			return s.ForgetCollections(ctx, user, time.Now().Add(time.Minute))
		}},
		{"DeleteCollections", func(user string) (int64, error) {
			return s.DeleteCollections(ctx, store.Owner{User: user})
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				user := "bench-" + bc.name
				for i, id := range ids {
					col := []string{"a", "b"}[i%2]
					if _, err := s.PutDocument(ctx, store.DocumentPut{Owner: store.Owner{User: user}, Collection: col, DocID: id, Content: docs[id], Chunk: chunkWith}); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				n, err := bc.forget(user)
				if err != nil || n != int64(len(ids)) {
					b.Fatalf("forgot %d documents, %v; want %d", n, err, len(ids))
				}
			}
			b.ReportMetric(float64(len(ids)), "docs")
		})
	}
}
