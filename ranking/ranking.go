package ranking

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Tuning constants of the score (see the package documentation).
const (
	// K1 is the term-frequency saturation of BM25.
	K1 = 1.2
	// B is how much a field's length normalises its term frequency (0: not
	// at all, 1: fully).
	B = 0.5
	// AnswerWeight is the weight of an answer word against a question word.
	AnswerWeight = 0.6
	// IDFPrior is the number of imaginary items without any query word that
	// document frequencies are smoothed with.
	IDFPrior = 20.0
	// RelevanceHalf is the BM25 sum at which relevance is 0.5.
	RelevanceHalf = 2.5
	// RecencyWeight is the share of the score that recency can take away.
	RecencyWeight = 0.05
	// RecencyDays is the age at which the recency prior is half spent.
	RecencyDays = 30.0
)

// Collection is what BM25F needs to know of all the user's items, matched
// or not.
type Collection struct {
	// Items is the number of the user's items.
	Items int
	// AvgQuestionLen and AvgAnswerLen are the mean field lengths, in
	// distinct lexemes, over the user's items; at least 1.
	AvgQuestionLen, AvgAnswerLen float64
}

// Doc is one candidate: an item the query matched.
type Doc struct {
	// ID and CreatedAt break ties between equal scores: newest, then highest
	// id, first. CreatedAt is also the item's age for recency.
	ID        int64
	CreatedAt time.Time
	// QuestionLen and AnswerLen are the fields' lengths in distinct lexemes.
	QuestionLen, AnswerLen int
	// Terms counts each query lexeme in the item, in the query's order; a
	// doc may list fewer terms than the query (the rest are absent).
	Terms []TermCount
}

// TermCount is how often one query lexeme occurs in one item.
type TermCount struct {
	// Present says the item holds the lexeme. It can hold it without
	// positions (a stripped tsvector), so that both counts are 0: such an
	// item counts in the lexeme's document frequency and is a match, but
	// gains no relevance from it.
	Present bool
	// Question and Answer count the lexeme's positions in each field.
	Question, Answer int
}

// Query is what the ranking is asked for.
type Query struct {
	// At is the time recency is measured against.
	At time.Time
	// Threshold drops items scoring under it (0..1).
	Threshold float64
	// Limit caps the number of hits; under 1 gives none.
	Limit int
}

// Hit is a ranked candidate: its index in the docs Rank was given, and its
// score in 0..1.
type Hit struct {
	Doc   int
	Score float64
}

// Rank scores docs (see the package documentation) and returns those
// scoring at least q.Threshold, best first (ties: newest, then highest id),
// at most q.Limit. docs must be every one of the user's items holding a
// query lexeme: a lexeme's document frequency is the number of docs holding
// it. A doc holding none of the lexemes scores nothing and is dropped.
func Rank(coll Collection, docs []Doc, q Query) []Hit {
	type hit struct {
		doc int
		f   float64
	}
	// hits[t] lists the docs holding term t; len(hits[t]) is its document
	// frequency.
	var hits [][]hit
	for i := range docs {
		d := &docs[i]
		for t, n := range d.Terms {
			if !n.Present {
				continue
			}
			if t >= len(hits) {
				hits = append(hits, make([][]hit, t+1-len(hits))...)
			}
			f := float64(n.Question)/(1-B+B*float64(d.QuestionLen)/coll.AvgQuestionLen) +
				AnswerWeight*float64(n.Answer)/(1-B+B*float64(d.AnswerLen)/coll.AvgAnswerLen)
			hits[t] = append(hits[t], hit{i, f})
		}
	}
	sums := make([]float64, len(docs))
	matched := make([]bool, len(docs))
	n := float64(coll.Items)
	for _, hs := range hits {
		df := float64(len(hs))
		idf := math.Log(1 + (n+IDFPrior-df+0.5)/(df+0.5))
		for _, h := range hs {
			sums[h.doc] += idf * h.f * (K1 + 1) / (h.f + K1)
			matched[h.doc] = true
		}
	}
	kept := make([]Hit, 0, len(docs))
	for i := range docs {
		if !matched[i] {
			continue
		}
		s := sums[i]
		age := max(q.At.Sub(docs[i].CreatedAt).Seconds(), 0)
		score := s / (s + RelevanceHalf) * (1 - RecencyWeight + RecencyWeight/(1+age/(RecencyDays*86400)))
		if score >= q.Threshold {
			kept = append(kept, Hit{i, score})
		}
	}
	slices.SortFunc(kept, func(x, y Hit) int {
		if c := cmp.Compare(y.Score, x.Score); c != 0 {
			return c
		}
		a, b := &docs[x.Doc], &docs[y.Doc]
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	return kept[:max(min(len(kept), q.Limit), 0)]
}
