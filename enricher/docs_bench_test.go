package enricher

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// benchHandbook is a Markdown document of sections sections, each a
// heading and three paragraphs of benchWords: about 1 KB a section.
func benchHandbook(sections int) string {
	r := rand.New(rand.NewPCG(uint64(sections), 11))
	var b strings.Builder
	for i := range sections {
		fmt.Fprintf(&b, "## Section %d on %s\n\n", i, benchWords[r.IntN(len(benchWords))])
		for range 3 {
			for range 50 {
				b.WriteString(benchWords[r.IntN(len(benchWords))])
				b.WriteByte(' ')
			}
			b.WriteString("done.\n\n")
		}
	}
	return b.String()
}

// BenchmarkEnrichDocuments measures a whole enrich (read, ranking and
// injection, lexical) for a user of 1,000 items, without documents and
// with a collection of about 1 and 5 MB of Markdown (chunker defaults)
// named, at threshold 0 (the query's two words are in most chunks, so
// every chunk is a candidate to rank: the worst case). Each iteration runs both, one after the other, so that the
// machine's load weighs on both alike; it reports each one's p50 and p99
// and the p50 of the paired differences, in milliseconds.
func BenchmarkEnrichDocuments(b *testing.B) {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		b.Skipf("NATS: %v", err)
	}
	defer nc.Close()
	for _, sections := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("sections=%d", sections), func(b *testing.B) {
			st := storetest.New(b)
			seedBench(b, st, "alice", 1000, 0)
			ctx := context.Background()
			doc := benchHandbook(sections)
			put, err := st.PutDocument(ctx, store.DocumentPut{Owner: store.Owner{User: "alice"}, Collection: "kb", Source: "handbook.md",
				Content: doc, Chunk: ChunkDocument})
			if err != nil {
				b.Fatal(err)
			}
			s, err := New(Config{Conn: nc, Store: st, Logger: slog.New(slog.DiscardHandler), Timeout: 10 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			plain := benchParams()
			withDocs := plain
			withDocs.collections, withDocs.docsMaxResults, withDocs.docsThreshold, withDocs.maxTokens = []string{"kb"}, 3, 0, 2000
			plain.maxTokens = 2000
			for _, p := range []enrichParams{plain, withDocs} { // warms the pool
				if _, err := s.enrich(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
			var without, with, diff []time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := s.enrich(ctx, plain); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				r, err := s.enrich(ctx, withDocs)
				if err != nil {
					b.Fatal(err)
				}
				end := time.Now()
				if len(r.Documents) == 0 {
					b.Fatal("no documents")
				}
				without, with, diff = append(without, mid.Sub(start)), append(with, end.Sub(mid)), append(diff, end.Sub(mid)-mid.Sub(start))
			}
			b.ReportMetric(float64(len(doc))/1e6, "doc-MB")
			b.ReportMetric(float64(put.Chunks), "chunks")
			reportQuantiles(b, "no-docs", without)
			reportQuantiles(b, "docs", with)
			slices.Sort(diff)
			b.ReportMetric(float64(diff[len(diff)/2])/1e6, "extra-p50-ms")
		})
	}
}
