package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// BenchmarkUserEmbeddings reads one user's vectors (772 bytes each: 768
// dimensions in the int8 form) in the one query ranking will make, among
// another user's as many.
//
//	go test -run '^$' -bench UserEmbeddings -benchtime 50x ./store/
func BenchmarkUserEmbeddings(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ctx := context.Background()
			s := storetest.New(b)
			vector := make([]byte, 772)
			for _, u := range []string{"alice", "bob"} {
				var ws []store.ContextWrite
				for i := range n {
					ws = append(ws, store.ContextWrite{UserID: u, Question: fmt.Sprintf("question %d", i), Answer: "answer", CreatedAt: t0})
				}
				ids, err := s.InsertContext(ctx, ws)
				if err != nil {
					b.Fatal(err)
				}
				targets, err := s.EmbeddingTargets(ctx, u, ids, "m")
				if err != nil {
					b.Fatal(err)
				}
				var es []store.EmbeddingWrite
				for _, t := range targets {
					es = append(es, store.EmbeddingWrite{ContextID: t.ID, ContentHash: t.ContentHash, Dims: 768, Vector: vector})
				}
				if _, err := s.SaveEmbeddings(ctx, "m", es); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := s.Pool().Exec(ctx, `ANALYZE`); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				vs, err := s.UserEmbeddings(ctx, "alice", "m")
				if err != nil || len(vs) != n {
					b.Fatalf("%d vectors, %v", len(vs), err)
				}
			}
		})
	}
}
