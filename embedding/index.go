package embedding

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Index holds stored vectors (Encode's form) of one dimension, laid out for
// exact search over one user's items: the int8 components of all vectors in
// one slice, a scale each, and a sign bit per dimension (64 to a word) for a
// cheap prefilter. It is immutable once built and safe for concurrent
// searches.
//
// Search is exact where it counts: every candidate is scored with the int8
// dot product (Quantised.Dot). Over more than SearchParams.Candidates
// vectors, the candidates are first the Candidates vectors whose sign bits
// differ least from the query's (a popcount over a dozen words per 768
// dimensions, about 40 times cheaper than the dot product); the int8 top-k
// of those is then almost always the int8 top-k of all (TestPrefilterRecall
// and BenchmarkPrefilterRecall measure how often).
//
// The item bits are signs of the vector less the index's mean vector:
// embeddings of one model share a large common direction (cosines of
// unrelated texts are often 0.4 to 0.6), which would make most sign bits
// the same for every item. The query's bits are its own signs: the dot
// product with an item is the dot product with the mean, the same for all
// items, plus the dot product with the item's offset from the mean, whose
// angle the bits estimate.
type Index struct {
	dims, words int
	vals        []int8
	scales      []float32
	signs       []uint64
}

// NewIndex builds an index of stored vectors, each Encode's form of dims
// dimensions; position i of the index is stored[i].
func NewIndex(dims int, stored [][]byte) (*Index, error) {
	if dims <= 0 {
		return nil, fmt.Errorf("%w: %d dimensions", ErrBadVector, dims)
	}
	n := len(stored)
	x := &Index{dims: dims, words: (dims + 63) / 64, vals: make([]int8, n*dims), scales: make([]float32, n)}
	mean := make([]float64, dims)
	used := 0
	for i, b := range stored {
		if len(b) != 4+dims {
			return nil, fmt.Errorf("%w: vector %d has %d bytes for %d dimensions", ErrBadVector, i, len(b), dims)
		}
		s := math.Float32frombits(binary.LittleEndian.Uint32(b))
		if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
			// One bad vector (an earlier Normalize overflowed on tiny
			// components) must not cost the user every other: it gets
			// scale 0, so searches leave it out, and the store counts it
			// as missing, so the backfill embeds it anew.
			continue
		}
		x.scales[i] = s
		if s == 0 {
			continue // no direction: absent from every search
		}
		used++
		row := x.vals[i*dims : (i+1)*dims]
		for j := range row {
			row[j] = int8(b[4+j])
			mean[j] += float64(row[j]) * float64(s)
		}
	}
	if used > 0 {
		for j := range mean {
			mean[j] /= float64(used)
		}
	}
	x.signs = make([]uint64, n*x.words)
	for i := range n {
		row, s := x.vals[i*dims:(i+1)*dims], float64(x.scales[i])
		w := x.signs[i*x.words : (i+1)*x.words]
		for j, v := range row {
			if float64(v)*s > mean[j] {
				w[j/64] |= 1 << (j % 64)
			}
		}
	}
	return x, nil
}

// Len is the number of vectors.
func (x *Index) Len() int { return len(x.scales) }

// Dims is the vectors' dimensions.
func (x *Index) Dims() int { return x.dims }

// Bytes is about the memory the index holds.
func (x *Index) Bytes() int { return len(x.vals) + 4*len(x.scales) + 8*len(x.signs) + 64 }

// Dot is the int8 dot product of vector i with q (dims long): the cosine
// similarity when q is unit length.
func (x *Index) Dot(i int, q []float32) float32 {
	return Quantised{Scale: x.scales[i], Values: x.vals[i*x.dims : (i+1)*x.dims]}.Dot(q)
}

// SearchParams tune Search.
type SearchParams struct {
	// K is the most hits returned.
	K int
	// Candidates is how many vectors the sign prefilter keeps for exact
	// scoring when more than twice as many are searched; under 1: every
	// vector is scored exactly.
	Candidates int
	// Sample is how many vectors (evenly spaced) the similarity statistics
	// are estimated from when there are more than twice Candidates; at
	// least 2.
	Sample int
	// Population selects the vectors the statistics are over (nil: all);
	// keep must accept only vectors it accepts. A search can so be
	// calibrated against more vectors than it searches (memoryd's: against
	// the scope's items, whatever the time range).
	Population func(i int) bool
}

// Hit is a vector of the index and its similarity to the query.
type Hit struct {
	I   int
	Cos float32
}

// Result is a search's answer.
type Result struct {
	// Hits are the best K of the searched vectors, highest similarity
	// first (ties: lower position first).
	Hits []Hit
	// N is how many vectors were searched (those keep accepted).
	N int
	// Population is how many vectors the statistics are over, and Mean
	// and Std the mean and standard deviation of the query's similarity
	// over them: exact up to twice Candidates vectors, else estimated from
	// Sample of them.
	Population int
	Mean, Std  float64
}

// Search scores q, unit length and Dims long, against the vectors keep
// accepts (all when keep is nil). A query of other dimensions finds
// nothing.
func (x *Index) Search(q []float32, keep func(i int) bool, p SearchParams) Result {
	if len(q) != x.dims || x.Len() == 0 || p.K < 1 {
		return Result{}
	}
	// A vector of scale 0 (all zeros, or one NewIndex could not use) has
	// no direction: it is neither a candidate nor of the population.
	idx := make([]int32, 0, x.Len())
	for i := range x.Len() {
		if x.scales[i] != 0 && (keep == nil || keep(i)) {
			idx = append(idx, int32(i))
		}
	}
	r := Result{N: len(idx)}
	pop := idx
	if p.Population != nil || keep != nil {
		pop = make([]int32, 0, x.Len())
		for i := range x.Len() {
			if x.scales[i] != 0 && (p.Population == nil || p.Population(i)) {
				pop = append(pop, int32(i))
			}
		}
	}
	r.Population = len(pop)
	small := func(n int) bool { return p.Candidates < 1 || n <= 2*p.Candidates }
	var cands []Hit
	switch {
	case r.N == 0:
	case small(r.N):
		cands = make([]Hit, len(idx))
		for k, i := range idx {
			cands[k] = Hit{int(i), x.Dot(int(i), q)}
		}
	default:
		cands = x.prefilter(q, idx, p.Candidates)
		for k := range cands {
			cands[k].Cos = x.Dot(cands[k].I, q)
		}
	}
	switch {
	case len(pop) == len(idx) && small(r.N):
		r.Mean, r.Std = moments(cands) // the same vectors (keep's are a subset), all scored
	case small(len(pop)):
		all := make([]Hit, len(pop))
		for k, i := range pop {
			all[k] = Hit{int(i), x.Dot(int(i), q)}
		}
		r.Mean, r.Std = moments(all)
	default:
		sample := make([]Hit, 0, max(p.Sample, 2))
		step := max(1, len(pop)/cap(sample))
		for k := 0; k < len(pop) && len(sample) < cap(sample); k += step {
			sample = append(sample, Hit{int(pop[k]), x.Dot(int(pop[k]), q)})
		}
		r.Mean, r.Std = moments(sample)
	}
	slices.SortFunc(cands, func(a, b Hit) int {
		if c := cmp.Compare(b.Cos, a.Cos); c != 0 {
			return c
		}
		return cmp.Compare(a.I, b.I)
	})
	r.Hits = cands[:min(len(cands), p.K)]
	return r
}

// prefilter returns the n of idx whose sign bits differ least from q's
// (ties: lower positions first), their Cos unset.
func (x *Index) prefilter(q []float32, idx []int32, n int) []Hit {
	qb := make([]uint64, x.words)
	for j, v := range q {
		if v > 0 {
			qb[j/64] |= 1 << (j % 64)
		}
	}
	dist := make([]uint16, len(idx))
	hist := make([]int, x.dims+1)
	for k, i := range idx {
		w := x.signs[int(i)*x.words : (int(i)+1)*x.words]
		d := 0
		for j, b := range w {
			d += bits.OnesCount64(b ^ qb[j])
		}
		dist[k] = uint16(d)
		hist[d]++
	}
	// The cutoff: every vector nearer than it is kept, and the first of
	// those at it until n.
	cut, below := 0, 0
	for cut < len(hist) && below+hist[cut] < n {
		below += hist[cut]
		cut++
	}
	atCut := n - below
	out := make([]Hit, 0, n)
	for k, i := range idx {
		switch d := int(dist[k]); {
		case d < cut:
			out = append(out, Hit{I: int(i)})
		case d == cut && atCut > 0:
			out = append(out, Hit{I: int(i)})
			atCut--
		}
	}
	return out
}

// moments returns the mean and (population) standard deviation of hs' Cos.
func moments(hs []Hit) (mean, std float64) {
	if len(hs) == 0 {
		return 0, 0
	}
	for _, h := range hs {
		mean += float64(h.Cos)
	}
	mean /= float64(len(hs))
	var ss float64
	for _, h := range hs {
		d := float64(h.Cos) - mean
		ss += d * d
	}
	return mean, math.Sqrt(ss / float64(len(hs)))
}
