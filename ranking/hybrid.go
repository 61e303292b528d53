package ranking

import "math"

// Constants of hybrid retrieval's vector side (memoryd's enricher, with
// embeddings): see Hybrid.
const (
	// VectorHalf is the z-score margin (see Hybrid.VectorScore) at which an
	// item's vector score is 0.5, as RelevanceHalf is the BM25 sum at which
	// its relevance is.
	VectorHalf = 2.0
	// MinVectorItems is the fewest items of a population for which the
	// vector side scores: with fewer, a similarity distribution means
	// nothing.
	MinVectorItems = 3
)

// Hybrid are the constants with which hybrid retrieval turns an item's
// similarity to the query into a vector score and fuses it with the
// lexical score. DefaultHybrid holds the values the enricher uses; others
// serve to measure alternatives (tools/memeval -cv with embeddings) before
// a default changes.
type Hybrid struct {
	// VectorHalf is the margin over chance at which the vector score is
	// 0.5.
	VectorHalf float64
	// NoiseScale multiplies the chance offset NoiseMax(n) that the z-score
	// must pass; 1 is the expected best of n unrelated items, 0 no offset.
	NoiseScale float64
	// VectorWeight multiplies the vector score (after recency) in the
	// fusion, at most to 1.
	VectorWeight float64
}

// DefaultHybrid returns the constants the enricher uses.
func DefaultHybrid() Hybrid {
	return Hybrid{VectorHalf: VectorHalf, NoiseScale: 1, VectorWeight: 1}
}

// VectorScore calibrates an item's similarity to the query (cos) into 0..1
// without regard to the model's range of cosines, which differs widely
// (unrelated texts score about 0.4 to 0.6 with nomic-embed-text, 0.1 to
// 0.3 with OpenAI's models): against the distribution of the query's
// similarity over the user's items (mean, std over pop items: the scope's,
// whatever the range). Its z-score (cos−mean)/std is compared with the
// z-score the best of the n searched items would reach by chance were none
// related (NoiseMax(n) × NoiseScale; NoiseMax grows with n: about 1.9 for
// 20 items, 3.2 for 1,000, 3.7 for 5,000); the margin d over it maps to
// d/(d+VectorHalf), the shape of the lexical relevance s/(s+RelevanceHalf).
// So, with the defaults, 0 means "no more similar than the best unrelated
// item would be", 0.3 a margin of about 0.86 standard deviations, 0.5 of
// 2. A population under MinVectorItems items, or without spread, gives 0.
func (h Hybrid) VectorScore(cos, mean, std float64, pop, n int) float64 {
	if pop < MinVectorItems || n < 1 || !(std > 1e-9) {
		return 0
	}
	d := (cos-mean)/std - NoiseMax(n)*h.NoiseScale
	if !(d > 0) {
		return 0
	}
	return d / (d + h.VectorHalf)
}

// NoiseMax is about the expected maximum of n standard normal values:
// Blom's approximation Φ⁻¹((n − 0.375)/(n + 0.25)), within 0.03 of the
// exact value from n = 1 (0) up.
func NoiseMax(n int) float64 {
	p := (float64(n) - 0.375) / (float64(n) + 0.25)
	return math.Sqrt2 * math.Erfinv(2*p-1)
}

// Fuse is an item's hybrid score from its lexical score l (Rank's, which
// includes recency), its vector score v (VectorScore; 0 when the vector
// side did not pick it) and recency, the recency factor of its age
// (Params.Recency): 1 − (1 − l)(1 − min(v·recency·VectorWeight, 1)). Each
// side alone gives its own score, so an item found by one side only scores
// what that side says, and agreement raises it.
func (h Hybrid) Fuse(l, v, recency float64) float64 {
	if !(v > 0) {
		return l
	}
	v *= recency
	if h.VectorWeight != 1 {
		v = min(v*h.VectorWeight, 1)
	}
	return 1 - (1-l)*(1-v)
}

// Recency is the recency factor of an item ageSeconds old (0 for one newer
// than the query): 1 − RecencyWeight + RecencyWeight/(1 + age_days /
// RecencyDays), as Rank's score holds it.
func (p Params) Recency(ageSeconds float64) float64 {
	return 1 - p.RecencyWeight + p.RecencyWeight/(1+max(ageSeconds, 0)/(p.RecencyDays*86400))
}
