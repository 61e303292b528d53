package enricher

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// seedChunkVectors saves a random vector of 768 dimensions (a common
// direction, one of 30 topics and noise, as seedBench's items) for every
// chunk of the put document.
func seedChunkVectors(b *testing.B, st *store.Store, put store.PutResult) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(uint64(put.Chunks), 9))
	const dims = 768
	gauss := func() []float32 {
		v := make([]float32, dims)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return embedding.Normalize(v)
	}
	common := gauss()
	topics := make([][]float32, 30)
	for i := range topics {
		topics[i] = gauss()
	}
	ts, err := st.ChunkEmbeddingTargets(ctx, put.Collection.ID, put.DocID, put.Hash, 0, put.Chunks, "bench")
	if err != nil || len(ts) != put.Chunks {
		b.Fatalf("targets %d of %d: %v", len(ts), put.Chunks, err)
	}
	ws := make([]store.ChunkEmbeddingWrite, len(ts))
	for i, tg := range ts {
		v, noise, topic := make([]float32, dims), gauss(), topics[i%len(topics)]
		for j := range v {
			v[j] = common[j] + 0.6*topic[j] + 0.6*noise[j]
		}
		ws[i] = store.ChunkEmbeddingWrite{ChunkIndex: tg.ChunkIndex, Sum: tg.Sum, Dims: dims, Vector: embedding.Encode(v)}
	}
	for part := range slices.Chunk(ws, 2000) {
		if _, err := st.SaveChunkEmbeddings(ctx, "bench", put.Collection.ID, put.DocID, put.Hash, part); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEnrichDocumentsHybrid measures a whole enrich with documents
// (read, ranking and injection) for a user of 1,000 items of 768
// dimensions and a collection of about 1 and 5 MB of Markdown (chunker
// defaults) whose every chunk has a vector, lexical (no embedder) against
// hybrid (context items and documents, vectors cached), the query's
// embedding excluded (an in-process embedder answers at once; see
// BenchmarkQueryEmbeddingFake for the call over HTTP). Each iteration runs
// both, one after the other, so that the machine's load weighs on both
// alike; it reports each one's p50 and p99 and the p50 of the paired
// differences, in milliseconds.
func BenchmarkEnrichDocumentsHybrid(b *testing.B) {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		b.Skipf("NATS: %v", err)
	}
	defer nc.Close()
	for _, sections := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("sections=%d", sections), func(b *testing.B) {
			st := storetest.New(b)
			qv := seedBench(b, st, "alice", 1000, 0)
			ctx := context.Background()
			doc := benchHandbook(sections)
			put, err := st.PutDocument(ctx, store.DocumentPut{Owner: store.Owner{User: "alice"}, Collection: "kb", Source: "handbook.md",
				Content: doc, Chunk: ChunkDocument})
			if err != nil {
				b.Fatal(err)
			}
			seedChunkVectors(b, st, put)
			lexical, hybrid := benchServices(b, nc, st, qv)
			p := benchParams()
			p.collections, p.docsMaxResults, p.docsThreshold, p.maxTokens = []string{"kb"}, 3, 0, 2000
			for _, s := range []*Service{lexical, hybrid} { // warms the pool and the cache
				if _, err := s.enrich(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
			var lex, hyb, diff []time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := lexical.enrich(ctx, p); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				r, err := hybrid.enrich(ctx, p)
				if err != nil {
					b.Fatal(err)
				}
				end := time.Now()
				if len(r.Documents) == 0 {
					b.Fatal("no documents")
				}
				lex, hyb, diff = append(lex, mid.Sub(start)), append(hyb, end.Sub(mid)), append(diff, end.Sub(mid)-mid.Sub(start))
			}
			b.ReportMetric(float64(len(doc))/1e6, "doc-MB")
			b.ReportMetric(float64(put.Chunks), "chunks")
			reportQuantiles(b, "lexical", lex)
			reportQuantiles(b, "hybrid", hyb)
			slices.Sort(diff)
			b.ReportMetric(float64(diff[len(diff)/2])/1e6, "extra-p50-ms")
			h := hybrid.hybrid
			if h.docFallbacks.Load() != 0 || h.reloads.Load() != 2 {
				b.Fatalf("hybrid: %d fallbacks, %d reloads; want none and the two warming loads (items, collection)", h.docFallbacks.Load(), h.reloads.Load())
			}
		})
	}
}
