package enricher

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// fixedEmbedder answers every query with one vector, in process: the
// benchmark measures what hybrid retrieval costs enrich apart from the
// embedding call (BenchmarkQueryEmbeddingFake measures that call).
type fixedEmbedder struct{ v []float32 }

func (f fixedEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = slices.Clone(f.v)
	}
	return out, nil
}

func (fixedEmbedder) Model() string { return "bench" }

// benchTail is the filler of a long answer: words no query asks for.
var benchTail = []string{"which", "would", "probably", "consider", "several", "options", "depending", "on", "your", "needs",
	"budget", "and", "the", "time", "available", "also", "worth", "noting", "that", "many", "people", "find", "helpful"}

var benchWords = []string{"garden", "party", "kitchen", "paint", "holiday", "train", "doctor", "coffee", "book", "music",
	"football", "sister", "birthday", "office", "bakery", "river", "winter", "summer", "cello", "recipe"}

// seedBench gives user n items of a few random words each (and tail more
// in each answer: a real reply's length) and a random 768-dimensional
// vector each (clustered like real embeddings: a common direction, topics,
// noise); it returns a query vector near one item.
func seedBench(b *testing.B, st *store.Store, user string, n, tail int) []float32 {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(uint64(n), 7))
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
	var ws []store.ContextWrite
	vecs := make([][]float32, n)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		q := fmt.Sprintf("item %d about %s and %s", i, benchWords[r.IntN(len(benchWords))], benchWords[r.IntN(len(benchWords))])
		a := fmt.Sprintf("the %s was %s", benchWords[r.IntN(len(benchWords))], benchWords[r.IntN(len(benchWords))])
		for range tail {
			a += " " + benchTail[r.IntN(len(benchTail))]
		}
		ws = append(ws, store.ContextWrite{UserID: user, Question: q, Answer: a, CreatedAt: at.Add(time.Duration(i) * time.Minute)})
		v, noise, topic := make([]float32, dims), gauss(), topics[i%len(topics)]
		for j := range v {
			v[j] = common[j] + 0.6*topic[j] + 0.6*noise[j]
		}
		vecs[i] = v
	}
	ids, err := st.InsertContext(ctx, ws)
	if err != nil {
		b.Fatal(err)
	}
	targets, err := st.EmbeddingTargets(ctx, user, ids, "bench")
	if err != nil || len(targets) != n {
		b.Fatalf("targets %d %v", len(targets), err)
	}
	byID := map[int64][]float32{}
	for i, id := range ids {
		byID[id] = vecs[i]
	}
	var saves []store.EmbeddingWrite
	for _, tg := range targets {
		saves = append(saves, store.EmbeddingWrite{ContextID: tg.ID, ContentHash: tg.ContentHash, Dims: dims, Vector: embedding.Encode(byID[tg.ID])})
	}
	if _, err := st.SaveEmbeddings(ctx, "bench", saves); err != nil {
		b.Fatal(err)
	}
	q := slices.Clone(vecs[n/2])
	for j, x := range gauss() {
		q[j] += 0.3 * x
	}
	return embedding.Normalize(q)
}

// BenchmarkHybridEnrich measures enrich's read and ranking (relevant: the
// store round trip, ranking, and for hybrid the vector search of the
// cached vectors and the fusion) for one user of 1,000 and 5,000 items of
// 768 dimensions, lexical against hybrid with a cache hit, the query
// embedding excluded. Each iteration runs both, one after the other, so
// that the machine's load weighs on both alike; it reports each one's p50
// and p99 and the p50 of the paired differences, in milliseconds.
//
// BenchmarkHybridRanking measures the in-process part alone.
func BenchmarkHybridEnrich(b *testing.B) {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		b.Skipf("NATS: %v", err)
	}
	defer nc.Close()
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			st := storetest.New(b)
			qv := seedBench(b, st, "alice", n, 0)
			lexical, hybrid := benchServices(b, nc, st, qv)
			p := benchParams()
			ctx := context.Background()
			for _, s := range []*Service{lexical, hybrid} { // warms the pool and the cache
				if _, _, _, _, err := s.relevant(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
			relevant := func(s *Service) {
				if _, _, _, _, err := s.relevant(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
			paired(b, func() { relevant(lexical) }, func() { relevant(hybrid) })
			if hybrid.hybrid.cache.hits.Load() == 0 || hybrid.hybrid.reloads.Load() != 1 {
				b.Fatalf("hybrid: %d cache hits, %d reloads; want hits and the one warming load", hybrid.hybrid.cache.hits.Load(), hybrid.hybrid.reloads.Load())
			}
		})
	}
}

// BenchmarkHybridRanking measures what hybrid retrieval adds in process to
// a lexical enrich, on the candidates of one read (1,000 and 5,000 items of
// 768 dimensions, cached): the vector search (sign prefilter, int8
// rescoring, statistics) and the fusion, against Rank alone.
func BenchmarkHybridRanking(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			st := storetest.New(b)
			qv := seedBench(b, st, "alice", n, 0)
			ctx := context.Background()
			uv, err := st.UserVectors(ctx, "alice", "bench")
			if err != nil {
				b.Fatal(err)
			}
			e, err := newUserVectors("alice", "bench", len(qv), uv)
			if err != nil {
				b.Fatal(err)
			}
			p := benchParams()
			q := store.SearchQuery{UserID: "alice", Keywords: p.keywords, Hybrid: true}
			q.VectorIDs, _ = e.pick(qv, q, p.maxResults)
			_, cands, err := st.Recall(ctx, store.RecallQuery{SearchQuery: q, MaxFacts: 1})
			if err != nil {
				b.Fatal(err)
			}
			var lex, hyb []time.Duration
			for b.Loop() {
				start := time.Now()
				Rank(cands, p.at, p.threshold, p.maxResults)
				mid := time.Now()
				_, vec := e.pick(qv, q, p.maxResults)
				fuse(cands, vec, p.at, p.threshold, p.maxResults)
				lex, hyb = append(lex, mid.Sub(start)), append(hyb, time.Since(mid))
			}
			b.ReportMetric(float64(len(cands.Matches)), "candidates")
			reportQuantiles(b, "rank", lex)
			reportQuantiles(b, "pick+fuse", hyb)
		})
	}
}

// BenchmarkSearch measures the search endpoint's work (its reads and
// ranking, in process: no NATS) for one user of 5,000 items whose answers
// are ~2 KB, as real replies are, lexical against hybrid with a cache hit
// (the query embedding excluded), paired as in BenchmarkHybridEnrich. Both
// rank first and read only their hits' texts.
func BenchmarkSearch(b *testing.B) {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		b.Skipf("NATS: %v", err)
	}
	defer nc.Close()
	st := storetest.New(b)
	qv := seedBench(b, st, "alice", 5000, 300)
	lexical, hybrid := benchServices(b, nc, st, qv)
	ctx := context.Background()
	req := []byte(`{"user_id":"alice","query":"what did I say about the garden party"}`)
	search := func(s *Service) {
		c, err := s.reads.search(events.UserToken("alice"), req)
		if err != nil {
			b.Fatal(err)
		}
		r, err := c(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if res := r.(searchResults).Results; len(res) == 0 || res[0].Answer == "" {
			b.Fatalf("search returned %+v", res)
		}
	}
	search(lexical) // warms the pool and the cache
	search(hybrid)
	paired(b, func() { search(lexical) }, func() { search(hybrid) })
	if hybrid.hybrid.cache.hits.Load() == 0 {
		b.Fatal("hybrid: no cache hits")
	}
}

// paired runs lexical and then hybrid once per iteration, so that the
// machine's load weighs on both alike, and reports each one's p50 and p99
// and the p50 of the paired differences (hybrid − lexical), in
// milliseconds.
func paired(b *testing.B, lexical, hybrid func()) {
	var lex, hyb, diff []time.Duration
	for b.Loop() {
		start := time.Now()
		lexical()
		mid := time.Now()
		hybrid()
		end := time.Now()
		lex, hyb, diff = append(lex, mid.Sub(start)), append(hyb, end.Sub(mid)), append(diff, end.Sub(mid)-mid.Sub(start))
	}
	reportQuantiles(b, "lexical", lex)
	reportQuantiles(b, "hybrid", hyb)
	slices.Sort(diff)
	b.ReportMetric(float64(diff[len(diff)/2])/1e6, "extra-p50-ms")
}

// benchServices returns two services of st, lexical and hybrid (every
// query embedded as qv, in process).
func benchServices(b *testing.B, nc *nats.Conn, st *store.Store, qv []float32) (lexical, hybrid *Service) {
	cfg := Config{Conn: nc, Store: st, Logger: slog.New(slog.DiscardHandler), Timeout: 10 * time.Second}
	lexical, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Embedder = fixedEmbedder{qv}
	if hybrid, err = New(cfg); err != nil {
		b.Fatal(err)
	}
	return lexical, hybrid
}

func benchParams() enrichParams {
	const msg = "what did I say about the garden party"
	return enrichParams{userID: "alice", message: msg, maxResults: events.DefaultMaxResults, threshold: events.DefaultThreshold,
		facts: events.FactsRelevant, keywords: Keywords(msg), at: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)}
}

func reportQuantiles(b *testing.B, name string, took []time.Duration) {
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2])/1e6, name+"-p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100])/1e6, name+"-p99-ms")
}

// BenchmarkQueryEmbeddingFake measures one query's embedding call, as
// enrich makes it, against the fake server over HTTP (768 dimensions): the
// plumbing's cost, not a model's.
func BenchmarkQueryEmbeddingFake(b *testing.B) {
	srv := embeddingtest.New(b)
	srv.SetDims(768)
	c, err := embedding.New(embedding.Config{BaseURL: srv.URL, Model: "fake", BatchSize: 1})
	if err != nil {
		b.Fatal(err)
	}
	h := &hybrid{emb: c, timeout: time.Second, logger: slog.New(slog.DiscardHandler), cache: newVectorCache(1 << 20),
		outcomes: map[string]*atomic.Int64{}}
	for _, o := range embedOutcomes {
		h.outcomes[o] = new(atomic.Int64)
	}
	ctx := context.Background()
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		if h.embed(ctx, "alice", "what did I say about the garden party", 0) == nil {
			b.Fatal("no vector")
		}
		took = append(took, time.Since(start))
	}
	reportQuantiles(b, "embed", took)
}
