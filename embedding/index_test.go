package embedding_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/memoryd/memoryd/embedding"
)

// corpus is a set of unit vectors and queries for measuring search.
type corpus struct {
	items   [][]float32
	queries [][]float32
}

func unit(v []float32) []float32 { return embedding.Normalize(v) }

func gaussian(r *rand.Rand, dims int) []float32 {
	v := make([]float32, dims)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// near returns v plus gaussian noise of norm about noise·|v|, unit length.
func near(r *rand.Rand, v []float32, noise float64) []float32 {
	out := make([]float32, len(v))
	s := noise / math.Sqrt(float64(len(v)))
	for i, x := range v {
		out[i] = x + float32(r.NormFloat64()*s)
	}
	return unit(out)
}

// randomCorpus: isotropic random items; queries are noisy copies of items
// (cosine about 0.7 to their item).
func randomCorpus(seed uint64, n, dims, queries int) corpus {
	r := rand.New(rand.NewPCG(seed, 1))
	var c corpus
	for range n {
		c.items = append(c.items, unit(gaussian(r, dims)))
	}
	for q := range queries {
		c.queries = append(c.queries, near(r, c.items[(q*7919)%n], 1))
	}
	return c
}

// clusteredCorpus: like real embeddings, items share a large common
// direction (unrelated items have cosine about 0.5) and fall in topics
// (clusters); queries are new members of a topic, near one item.
func clusteredCorpus(seed uint64, n, dims, queries int) corpus {
	r := rand.New(rand.NewPCG(seed, 2))
	common := unit(gaussian(r, dims))
	topics := make([][]float32, 40)
	for i := range topics {
		topics[i] = unit(gaussian(r, dims))
	}
	mix := func(v []float32, w float32, u []float32) {
		for i := range v {
			v[i] += w * u[i]
		}
	}
	var c corpus
	for i := range n {
		v := make([]float32, dims)
		mix(v, 1, common)
		mix(v, 0.6, topics[i%len(topics)])
		mix(v, 0.6, unit(gaussian(r, dims)))
		c.items = append(c.items, unit(v))
	}
	for q := range queries {
		c.queries = append(c.queries, near(r, c.items[(q*7919)%n], 0.8))
	}
	return c
}

func buildIndex(t testing.TB, items [][]float32) *embedding.Index {
	stored := make([][]byte, len(items))
	for i, v := range items {
		stored[i] = embedding.Encode(v)
	}
	x, err := embedding.NewIndex(len(items[0]), stored)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// prefilterRecall is the share of the exact int8 top-k that the prefiltered
// search also returns, over the corpus' queries.
func prefilterRecall(x *embedding.Index, c corpus, k, candidates int) float64 {
	found, want := 0, 0
	for _, q := range c.queries {
		exact := x.Search(q, nil, embedding.SearchParams{K: k})
		fast := x.Search(q, nil, embedding.SearchParams{K: k, Candidates: candidates, Sample: 64})
		ids := map[int]bool{}
		for _, h := range fast.Hits {
			ids[h.I] = true
		}
		for _, h := range exact.Hits {
			want++
			if ids[h.I] {
				found++
			}
		}
	}
	return float64(found) / float64(want)
}

// TestPrefilterRecall measures how much of the exact int8 top-1 and top-10
// the sign prefilter (192 candidates, as enrich uses it) keeps, over 5000
// 768-dimensional vectors. On the clustered corpus (shaped like real
// embeddings) it fails under 0.95 at 10; on the isotropic random one, whose
// top-10 past the first are noise-level neighbours, at 1 only.
func TestPrefilterRecall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 5000-vector corpora")
	}
	for _, tc := range []struct {
		name string
		c    corpus
		k    int
	}{
		{"random", randomCorpus(1, 5000, 768, 50), 1},
		{"clustered", clusteredCorpus(1, 5000, 768, 50), 10},
	} {
		x := buildIndex(t, tc.c.items)
		r1, r10 := prefilterRecall(x, tc.c, 1, 192), prefilterRecall(x, tc.c, 10, 192)
		t.Logf("%s: prefilter recall@1 %.3f recall@10 %.3f (5000 × 768, 192 candidates, 50 queries)", tc.name, r1, r10)
		if rec := map[int]float64{1: r1, 10: r10}[tc.k]; rec < 0.95 {
			t.Errorf("%s: prefilter recall@%d %.3f under 0.95", tc.name, tc.k, rec)
		}
	}
}

// TestIndexSearch: the exact path returns the brute-force top-k, keep
// filters, the statistics are those of the searched vectors, the
// prefiltered path returns exact scores, and a query of other dimensions
// finds nothing.
func TestIndexSearch(t *testing.T) {
	c := clusteredCorpus(3, 600, 64, 5)
	x := buildIndex(t, c.items)
	if x.Len() != 600 || x.Dims() != 64 || x.Bytes() < 600*64 {
		t.Fatalf("index of %d × %d, %d bytes", x.Len(), x.Dims(), x.Bytes())
	}
	q := c.queries[0]
	even := func(i int) bool { return i%2 == 0 }
	r := x.Search(q, even, embedding.SearchParams{K: 5, Population: even})
	var all []embedding.Hit
	for i := 0; i < 600; i += 2 {
		all = append(all, embedding.Hit{I: i, Cos: x.Dot(i, q)})
	}
	slices.SortFunc(all, func(a, b embedding.Hit) int {
		if a.Cos != b.Cos {
			if a.Cos > b.Cos {
				return -1
			}
			return 1
		}
		return a.I - b.I
	})
	if r.N != 300 || r.Population != 300 || !slices.Equal(r.Hits, all[:5]) {
		t.Fatalf("search %+v, want N 300 and hits %v", r, all[:5])
	}
	var mean float64
	for _, h := range all {
		mean += float64(h.Cos)
	}
	mean /= 300
	if math.Abs(r.Mean-mean) > 1e-6 || r.Std <= 0 {
		t.Errorf("mean %v std %v, want mean %v", r.Mean, r.Std, mean)
	}
	fast := x.Search(q, even, embedding.SearchParams{K: 5, Candidates: 50, Sample: 100, Population: even})
	for _, h := range fast.Hits {
		if h.I%2 != 0 || h.Cos != x.Dot(h.I, q) {
			t.Errorf("prefiltered hit %+v", h)
		}
	}
	if math.Abs(fast.Mean-mean) > 0.05 {
		t.Errorf("sampled mean %v, exact %v", fast.Mean, mean)
	}
	// Statistics over all, search over the even ones.
	pop := x.Search(q, even, embedding.SearchParams{K: 5}) // Population nil: all
	whole := x.Search(q, nil, embedding.SearchParams{K: 5})
	if pop.N != 300 || pop.Population != 600 || pop.Mean != whole.Mean || pop.Std != whole.Std || !slices.Equal(pop.Hits, r.Hits) {
		t.Errorf("population search %+v, want the even hits with the statistics of all %+v", pop, whole)
	}
	if r := x.Search(q[:32], nil, embedding.SearchParams{K: 5}); len(r.Hits) != 0 || r.N != 0 {
		t.Errorf("a 32-dimensional query found %+v", r)
	}
	if _, err := embedding.NewIndex(64, [][]byte{make([]byte, 10)}); err == nil {
		t.Error("a malformed vector was indexed")
	}
}

// BenchmarkIndexSearch: one query against one user's vectors (768
// dimensions) as enrich searches them: prefilter of 192, 64-vector sample.
// The exact variant scores every vector.
func BenchmarkIndexSearch(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		c := clusteredCorpus(1, n, 768, 16)
		x := buildIndex(b, c.items)
		for _, exact := range []bool{false, true} {
			p := embedding.SearchParams{K: 50, Candidates: 192, Sample: 64}
			name := fmt.Sprintf("items=%d/prefilter", n)
			if exact {
				p.Candidates, name = 0, fmt.Sprintf("items=%d/exact", n)
			}
			b.Run(name, func(b *testing.B) {
				i := 0
				for b.Loop() {
					x.Search(c.queries[i%len(c.queries)], nil, p)
					i++
				}
			})
		}
	}
}

// BenchmarkPrefilterRecall prints the prefilter's (192 candidates) recall@1
// and recall@10 against full int8 scoring on random and clustered corpora.
func BenchmarkPrefilterRecall(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		for _, kind := range []string{"random", "clustered"} {
			b.Run(fmt.Sprintf("%s/items=%d", kind, n), func(b *testing.B) {
				c := randomCorpus(2, n, 768, 50)
				if kind == "clustered" {
					c = clusteredCorpus(2, n, 768, 50)
				}
				x := buildIndex(b, c.items)
				var r1, r10 float64
				for b.Loop() {
					r1, r10 = prefilterRecall(x, c, 1, 192), prefilterRecall(x, c, 10, 192)
				}
				b.ReportMetric(r1, "recall@1")
				b.ReportMetric(r10, "recall@10")
			})
		}
	}
}
