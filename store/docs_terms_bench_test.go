package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// BenchmarkChunkCandidates measures a chunk search's read of its
// candidates (SearchChunks with a ranker keeping 3) from chunk_terms
// (migration 027) and, alternated in the same iteration so that the
// machine's load weighs on both alike, from the chunks' vectors as before
// it (the path phrase queries keep). The collection is a generated
// handbook of 1,000 or 5,000 sections (2,000 or 10,000 chunks, chunker
// defaults) whose words are a small vocabulary, and the query's two words
// are in almost every chunk: the worst case. It reports each path's p50
// and p99 and the p50 of the paired differences (vectors − terms), in
// milliseconds, and chunk_terms' size per 1,000 chunks.
func BenchmarkChunkCandidates(b *testing.B) {
	words := strings.Fields("garden party said about what piano kitchen tea coffee blue sofa book music train paris dog cat window door table chair lamp river mountain forest ocean bridge castle tower")
	for _, sections := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("sections=%d", sections), func(b *testing.B) {
			s := storetest.New(b)
			ctx := context.Background()
			r := rand.New(rand.NewPCG(uint64(sections), 11))
			var doc strings.Builder
			for i := range sections {
				fmt.Fprintf(&doc, "## Section %d on %s\n\n", i, words[r.IntN(len(words))])
				for range 3 {
					for range 50 {
						doc.WriteString(words[r.IntN(len(words))])
						doc.WriteByte(' ')
					}
					doc.WriteString("done.\n\n")
				}
			}
			res, err := s.PutDocument(ctx, store.DocumentPut{Owner: store.Owner{User: "alice"}, Collection: "kb", DocID: "h",
				Content: doc.String(), Chunk: chunkWith})
			if err != nil {
				b.Fatal(err)
			}
			q := store.ChunkQuery{Reader: store.Owner{User: "alice"}, Keywords: []string{"garden", "party"}}
			top3 := func(c store.ChunkCandidates) []store.ChunkHit {
				out := make([]store.ChunkHit, 0, 3)
				for _, m := range c.Matches[:min(3, len(c.Matches))] {
					out = append(out, m.Hit)
				}
				return out
			}
			vectors := store.WithChunkVectors(ctx)
			for _, c := range []context.Context{ctx, vectors} { // warms the pool
				if _, err := s.SearchChunks(c, q, top3); err != nil {
					b.Fatal(err)
				}
			}
			var terms, vecs, diff []time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := s.SearchChunks(ctx, q, top3); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if _, err := s.SearchChunks(vectors, q, top3); err != nil {
					b.Fatal(err)
				}
				end := time.Now()
				terms, vecs, diff = append(terms, mid.Sub(start)), append(vecs, end.Sub(mid)), append(diff, end.Sub(mid)-mid.Sub(start))
			}
			var size int64
			if err := s.Pool().QueryRow(ctx, `SELECT pg_total_relation_size('chunk_terms')`).Scan(&size); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(res.Chunks), "chunks")
			b.ReportMetric(float64(size)/float64(res.Chunks)*1000/1e6, "terms-MB/1k-chunks")
			for _, x := range []struct {
				name string
				d    []time.Duration
			}{{"terms", terms}, {"vectors", vecs}} {
				slices.Sort(x.d)
				b.ReportMetric(float64(x.d[len(x.d)/2])/1e6, x.name+"-p50-ms")
				b.ReportMetric(float64(x.d[len(x.d)*99/100])/1e6, x.name+"-p99-ms")
			}
			slices.Sort(diff)
			b.ReportMetric(float64(diff[len(diff)/2])/1e6, "saved-p50-ms")
		})
	}
}
