package embedding_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/memoryd/memoryd/embedding"
)

func TestEncodeRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		v    []float32
	}{
		{"unit axis", []float32{1, 0, 0}},
		{"not unit", []float32{3, 4}},
		{"negative", []float32{-0.2, 0.5, -0.9, 0.1}},
		{"zero", []float32{0, 0, 0}},
		// Normalize's factor here is beyond float32 (an embeddings server
		// answering 1e-40 everywhere): the vector became +Inf.
		{"tiny", []float32{1e-40, 1e-40, -1e-40, 1e-40}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := embedding.Encode(tc.v)
			if len(b) != 4+len(tc.v) {
				t.Fatalf("%d bytes for %d dims", len(b), len(tc.v))
			}
			q, err := embedding.Decode(b, len(tc.v))
			if err != nil {
				t.Fatal(err)
			}
			want := embedding.Normalize(slices.Clone(tc.v))
			got := q.Float32()
			for i := range want {
				if math.Abs(float64(got[i]-want[i])) > 1.0/127 {
					t.Errorf("component %d: %g, want %g", i, got[i], want[i])
				}
			}
			if self := q.Dot(want); len(tc.name) > 0 && tc.name != "zero" && math.Abs(float64(self)-1) > 0.01 {
				t.Errorf("cosine with itself %g, want 1", self)
			}
		})
	}
	if s := embedding.Encode([]float32{1e-40, 1e-40})[:4]; math.IsInf(float64(math.Float32frombits(uint32(s[0])|uint32(s[1])<<8|uint32(s[2])<<16|uint32(s[3])<<24)), 0) {
		t.Error("Encode of a tiny vector stored an infinite scale")
	}
	// A stored vector of infinite scale (an earlier Encode's) is indexed as
	// matching nothing; the others of the set still serve.
	inf := embedding.Encode([]float32{1, 0})
	inf[0], inf[1], inf[2], inf[3] = 0, 0, 0x80, 0x7f
	x, err := embedding.NewIndex(2, [][]byte{embedding.Encode([]float32{1, 0}), inf, embedding.Encode([]float32{0, 1})})
	if err != nil {
		t.Fatalf("an index holding one vector of infinite scale: %v", err)
	}
	if d0, d1 := x.Dot(0, []float32{1, 0}), x.Dot(1, []float32{1, 0}); d0 < 0.99 || d1 != 0 {
		t.Errorf("cosines %g (a good vector), %g (the bad one); want 1 and 0", d0, d1)
	}
	if r := x.Search([]float32{1, 0}, nil, embedding.SearchParams{K: 3}); r.N != 2 || r.Population != 2 || len(r.Hits) != 2 || r.Hits[1].I != 2 {
		t.Errorf("search %+v; want the two good vectors only", r)
	}
	if _, err := embedding.Decode([]byte{1, 2, 3}, 4); err == nil {
		t.Error("Decode accepted a short vector")
	}
	if got := (embedding.Quantised{Values: []int8{1, 2}, Scale: 1}).Dot([]float32{1}); got != 0 {
		t.Errorf("Dot of other dimensions %g, want 0", got)
	}
}

// TestQuantisedRecall measures what int8 storage costs in ranking: the
// top-10 by int8 dot product against the top-10 by exact float32 cosine,
// for queries that are noisy copies of items (the case retrieval is for).
func TestQuantisedRecall(t *testing.T) {
	const n, dims, queries, k = 1000, 256, 100, 10
	r := rand.New(rand.NewPCG(1, 2))
	randUnit := func() []float32 {
		v := make([]float32, dims)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return embedding.Normalize(v)
	}
	items := make([][]float32, n)
	stored := make([]embedding.Quantised, n)
	for i := range items {
		items[i] = randUnit()
		q, err := embedding.Decode(embedding.Encode(items[i]), dims)
		if err != nil {
			t.Fatal(err)
		}
		stored[i] = q
	}
	top := func(score func(i int) float32) []int {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		s := make([]float32, n)
		for i := range s {
			s[i] = score(i)
		}
		sort.SliceStable(idx, func(a, b int) bool { return s[idx[a]] > s[idx[b]] })
		return idx[:k]
	}
	var overlap int
	for range queries {
		base := items[r.IntN(n)]
		noise := randUnit()
		q := make([]float32, dims)
		for i := range q {
			q[i] = base[i] + 1.2*noise[i]
		}
		embedding.Normalize(q)
		exact := top(func(i int) float32 {
			var d float32
			for j := range q {
				d += q[j] * items[i][j]
			}
			return d
		})
		approx := top(func(i int) float32 { return stored[i].Dot(q) })
		for _, i := range approx {
			if slices.Contains(exact, i) {
				overlap++
			}
		}
	}
	recall := float64(overlap) / float64(queries*k)
	t.Logf("int8 vs float32: top-%d overlap %.4f over %d queries, %d items of %d dims", k, recall, queries, n, dims)
	if recall < 0.95 {
		t.Errorf("top-%d overlap %.4f, want at least 0.95", k, recall)
	}
}

// BenchmarkScore scores one query against a user's stored vectors (768
// dimensions), as exact ranking will.
//
//	go test -run '^$' -bench Score ./embedding/
func BenchmarkScore(b *testing.B) {
	const dims = 768
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			items := make([]embedding.Quantised, n)
			v := make([]float32, dims)
			for i := range items {
				for j := range v {
					v[j] = float32(r.NormFloat64())
				}
				q, err := embedding.Decode(embedding.Encode(v), dims)
				if err != nil {
					b.Fatal(err)
				}
				items[i] = q
			}
			query := embedding.Normalize(slices.Clone(v))
			var sink float32
			for b.Loop() {
				for _, it := range items {
					sink += it.Dot(query)
				}
			}
			_ = sink
		})
	}
}
