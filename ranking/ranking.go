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
	// RecalledAnswerWeight is the answer weight for a query that asks what
	// the reply said (Query.AsksReply; see Params): 0, AnswerWeight's.
	RecalledAnswerWeight = 0.0
	// VerboseReplyPower is how fast the answer weight falls as the user's
	// answers grow longer than their questions (0: not at all; see Params).
	VerboseReplyPower = 0.0
	// IDFPrior is the number of imaginary items without any query word that
	// document frequencies are smoothed with.
	IDFPrior = 20.0
	// RelevanceHalf is the BM25 sum at which relevance is 0.5.
	RelevanceHalf = 2.5
	// RecencyWeight is the share of the score that recency can take away.
	RecencyWeight = 0.05
	// RecencyDays is the age at which the recency prior is half spent.
	RecencyDays = 30.0
	// StemWeight is what another form of a lexeme than the query's word
	// counts (1: as much; see Params).
	StemWeight = 1.0
	// NeighbourPenalty is the share of its score an item loses to a
	// neighbour that scores higher (0: off; see Params).
	NeighbourPenalty = 0.0
	// NeighbourWindow is how close in time two items are neighbours.
	NeighbourWindow = 10 * time.Minute
	// CoveragePower is how much a match of few of the query's lexemes is
	// scaled down (0: off; see Params).
	CoveragePower = 0.0
	// SessionWeight is the share of its best neighbour's BM25 sum an item
	// gains (0: off; see Params).
	SessionWeight = 0.0
	// SessionWindow is how close in time two items are of one session.
	SessionWindow = 30 * time.Minute
	// LaterPenalty is the share of its score an item loses to an earlier
	// neighbour holding a query lexeme (0: off; see Params).
	LaterPenalty = 0.0
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
	// Inflected, when the caller tells word forms apart, counts for each of
	// Terms how many of its Question and Answer positions hold another form
	// of the lexeme than the query's word ("paying" for the query word
	// "pay"): each of those counts StemWeight rather than 1. Nil, or fewer
	// entries than Terms, means every position is the query's form.
	Inflected []TermCount
	// Adjacent, when the caller counts it, is how many times two different
	// query lexemes stand next to each other in the item (a phrase of the
	// query); each adds AdjacentWeight to the BM25 sum, at most two.
	Adjacent int
}

// TermCount is how often one query lexeme occurs in one item.
type TermCount struct {
	// Present says the item holds the lexeme. It can hold it without
	// positions (a stripped tsvector), so that both counts are 0: such an
	// item counts in the lexeme's document frequency and is a match, but
	// gains no relevance from it.
	Present bool
	// Question and Answer count the lexeme's positions in each field.
	Question, Answer int32
}

// Query is what the ranking is asked for.
type Query struct {
	// At is the time recency is measured against.
	At time.Time
	// Threshold drops items scoring under it (0..1).
	Threshold float64
	// AsksReply says the query asks what the other side of the
	// conversation said (a user asking the assistant about its earlier
	// words): the answer half weighs Params.RecalledAnswerWeight. Enrich
	// does not set it (measured in tools/memeval -cv, not kept).
	AsksReply bool
	// Limit caps the number of hits; under 1 gives none.
	Limit int
	// DF, when not nil, is the document frequency of each query lexeme
	// (in the order of Doc.Terms) among the collection's items: the items
	// holding it, all of them, whether docs lists them or not. A pruned
	// read (see Params.MaxScore) passes it, since its docs leave out items
	// holding only common lexemes; nil counts each lexeme's docs, which
	// must then be every item holding one.
	DF []int
}

// Hit is a ranked candidate: its index in the docs Rank was given, and its
// score in 0..1.
type Hit struct {
	Doc   int
	Score float64
}

// Params are the score's tuning constants (see the package documentation).
// DefaultParams holds the values Rank uses; other values serve to measure
// alternatives (tools/memeval -cv) before a default changes.
type Params struct {
	// K1 is the term-frequency saturation of BM25.
	K1 float64
	// BQuestion and BAnswer are how much each field's length normalises
	// its term frequency (0: not at all, 1: fully).
	BQuestion, BAnswer float64
	// AnswerWeight is the weight of an answer word against a question word.
	AnswerWeight float64
	// RecalledAnswerWeight, when above 0, replaces AnswerWeight for a
	// query that asks what the other side said (Query.AsksReply: "you
	// recommended a trail, which one?"): the words sought are then the
	// reply's. 0 turns it off (AnswerWeight applies, whatever its value).
	RecalledAnswerWeight float64
	// VerboseReplyPower lowers the answer weight for a user whose answers
	// are longer than their questions: the weight used is AnswerWeight ·
	// r^−VerboseReplyPower, r = AvgAnswerLen/AvgQuestionLen (at least 1).
	// An assistant's replies run several times its user's message and
	// repeat the question's words whatever they hold, where a peer's reply
	// is as long as the message and as telling; 0 turns it off.
	VerboseReplyPower float64
	// IDFPrior is the number of imaginary items without any query word that
	// document frequencies are smoothed with.
	IDFPrior float64
	// RelevanceHalf is the BM25 sum at which relevance is 0.5.
	RelevanceHalf float64
	// RecencyWeight is the share of the score that recency can take away.
	RecencyWeight float64
	// RecencyDays is the age at which the recency prior is half spent.
	RecencyDays float64
	// StemWeight is what a position counts when it holds another form of the
	// lexeme than the query's word (Doc.Inflected); 1: as much as the
	// query's form.
	StemWeight float64
	// AdjacentWeight is what each of at most two Doc.Adjacent adds to the
	// BM25 sum; 0 turns it off.
	AdjacentWeight float64
	// NeighbourPenalty is the share of its score an item loses when another
	// candidate created within NeighbourWindow of it (an adjacent turn of the
	// same exchange) scores higher; 0 turns it off.
	NeighbourPenalty float64
	// NeighbourWindow is how close in creation time two items must be to
	// count as neighbours (for NeighbourPenalty and LaterPenalty).
	NeighbourWindow time.Duration
	// CoveragePower makes the BM25 sum a soft AND: it is multiplied by
	// (m/T)^CoveragePower, m the query lexemes the item holds and T those
	// any candidate holds. An item holding one of a question's words many
	// times then ranks after one holding most of them; 0 turns it off.
	CoveragePower float64
	// SessionWeight adds to an item's BM25 sum that share of the highest
	// sum among the candidates created within SessionWindow of it (its
	// session): a session that matches the question as a whole lifts its
	// turns over a lone turn of another session; 0 turns it off.
	SessionWeight float64
	// SessionWindow is how close in creation time two items must be to
	// count as one session for SessionWeight.
	SessionWindow time.Duration
	// LaterPenalty is the share of its score an item loses when an earlier
	// candidate, created within NeighbourWindow before it, exists: the turn
	// that first brings up the question's words usually states the fact,
	// the turns after it refer back to it. 0 turns it off.
	LaterPenalty float64
}

// DefaultParams returns the constants Rank uses.
func DefaultParams() Params {
	return Params{
		K1: K1, BQuestion: B, BAnswer: B, AnswerWeight: AnswerWeight, RecalledAnswerWeight: RecalledAnswerWeight, VerboseReplyPower: VerboseReplyPower, IDFPrior: IDFPrior,
		RelevanceHalf: RelevanceHalf, RecencyWeight: RecencyWeight, RecencyDays: RecencyDays, StemWeight: StemWeight,
		NeighbourPenalty: NeighbourPenalty, NeighbourWindow: NeighbourWindow, CoveragePower: CoveragePower,
		SessionWeight: SessionWeight, SessionWindow: SessionWindow, LaterPenalty: LaterPenalty,
	}
}

// Rank scores docs (see the package documentation) with DefaultParams and
// returns those scoring at least q.Threshold, best first (ties: newest,
// then highest id), at most q.Limit. docs must be every one of the user's
// items holding a query lexeme: a lexeme's document frequency is the number
// of docs holding it. A doc holding none of the lexemes scores nothing and
// is dropped.
func Rank(coll Collection, docs []Doc, q Query) []Hit {
	return DefaultParams().Rank(coll, docs, q)
}

// Rank is the package's Rank with p's constants.
func (p Params) Rank(coll Collection, docs []Doc, q Query) []Hit {
	type hit struct {
		doc int
		f   float64
	}
	// hits[t] lists the docs holding term t; len(hits[t]) is its document
	// frequency.
	var hits [][]hit
	aw := p.AnswerWeight
	if q.AsksReply && p.RecalledAnswerWeight > 0 {
		aw = p.RecalledAnswerWeight
	}
	if p.VerboseReplyPower != 0 && coll.AvgAnswerLen > coll.AvgQuestionLen {
		aw *= math.Pow(coll.AvgAnswerLen/coll.AvgQuestionLen, -p.VerboseReplyPower)
	}
	for i := range docs {
		d := &docs[i]
		for t, n := range d.Terms {
			if !n.Present {
				continue
			}
			if t >= len(hits) {
				hits = append(hits, make([][]hit, t+1-len(hits))...)
			}
			tq, ta := float64(n.Question), float64(n.Answer)
			if t < len(d.Inflected) {
				in := d.Inflected[t]
				tq -= (1 - p.StemWeight) * float64(min(in.Question, n.Question))
				ta -= (1 - p.StemWeight) * float64(min(in.Answer, n.Answer))
			}
			f := tq/(1-p.BQuestion+p.BQuestion*float64(d.QuestionLen)/coll.AvgQuestionLen) +
				aw*ta/(1-p.BAnswer+p.BAnswer*float64(d.AnswerLen)/coll.AvgAnswerLen)
			hits[t] = append(hits[t], hit{i, f})
		}
	}
	sums := make([]float64, len(docs))
	matched := make([]bool, len(docs))
	n := float64(coll.Items)
	for t, hs := range hits {
		df := float64(len(hs))
		if t < len(q.DF) {
			df = float64(q.DF[t])
		}
		idf := p.idf(n, df)
		for _, h := range hs {
			sums[h.doc] += idf * h.f * (p.K1 + 1) / (h.f + p.K1)
			matched[h.doc] = true
		}
	}
	if p.CoveragePower != 0 {
		total := 0 // the query lexemes some doc holds
		for _, hs := range hits {
			if len(hs) > 0 {
				total++
			}
		}
		coverage(docs, total, sums, p.CoveragePower)
	}
	if p.SessionWeight != 0 {
		sums = p.session(docs, matched, sums)
	}
	scored := make([]Hit, 0, len(docs))
	for i := range docs {
		if !matched[i] {
			continue
		}
		s := sums[i]
		if p.AdjacentWeight != 0 {
			s += p.AdjacentWeight * float64(min(docs[i].Adjacent, 2))
		}
		age := max(q.At.Sub(docs[i].CreatedAt).Seconds(), 0)
		score := s / (s + p.RelevanceHalf) * (1 - p.RecencyWeight + p.RecencyWeight/(1+age/(p.RecencyDays*86400)))
		scored = append(scored, Hit{i, score})
	}
	if p.NeighbourPenalty > 0 {
		p.crowd(docs, scored)
	}
	if p.LaterPenalty > 0 {
		p.later(docs, scored)
	}
	kept := scored[:0]
	for _, h := range scored {
		if h.Score >= q.Threshold {
			kept = append(kept, h)
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

// idf is the inverse document frequency of a lexeme df of the n items
// hold.
func (p Params) idf(n, df float64) float64 {
	return math.Log(1 + (n+p.IDFPrior-df+0.5)/(df+0.5))
}

// MaxScore bounds the score of an item that holds, of the query's lexemes,
// only those marked in only (in the order of df, each lexeme's document
// frequency among coll's items, as in Query.DF): it scores less than the
// bound, whatever its counts, lengths and age, since a lexeme adds less
// than idf·(K1+1) to the BM25 sum and recency is at most 1. This is what
// makes a pruned read exact (MaxScore pruning): when the items holding a
// lexeme not marked, ranked with DF, give Limit hits scoring more than
// the bound (or the bound is under the threshold), no item holding only
// marked lexemes can be among the hits, and the hits are those of the
// full read. It reports false when p's constants make a hit's score
// depend on the other candidates (NeighbourPenalty, LaterPenalty,
// SessionWeight, CoveragePower), or let a lexeme's weighted count be
// negative (a negative answer or stem weight, a length normalisation
// over 1) or recency raise a score (RecencyWeight outside 0..1), which
// the bound does not hold for: then no pruned read is exact.
func (p Params) MaxScore(coll Collection, df []int, only []bool) (float64, bool) {
	if p.NeighbourPenalty != 0 || p.LaterPenalty != 0 || p.SessionWeight != 0 || p.CoveragePower != 0 {
		return 0, false
	}
	if !(p.K1 > 0 && p.RelevanceHalf > 0 && p.AnswerWeight >= 0 && p.RecalledAnswerWeight >= 0 && p.StemWeight >= 0 &&
		p.BQuestion >= 0 && p.BQuestion <= 1 && p.BAnswer >= 0 && p.BAnswer <= 1 && p.RecencyWeight >= 0 && p.RecencyWeight <= 1) {
		return 0, false
	}
	s := 2 * max(p.AdjacentWeight, 0) // Doc.Adjacent adds at most two
	for t, n := range df {
		if t < len(only) && only[t] && n > 0 {
			s += p.idf(float64(coll.Items), float64(n)) * (p.K1 + 1)
		}
	}
	return s / (s + p.RelevanceHalf), true
}

// crowd multiplies by 1 − NeighbourPenalty the score of every hit that has a
// neighbour (another hit created within NeighbourWindow of it) scoring more,
// or as much and ordered before it. Hits are visited in creation order, so
// each looks only at the few created near it.
func (p Params) crowd(docs []Doc, hits []Hit) {
	byTime := make([]int, len(hits))
	for i := range byTime {
		byTime[i] = i
	}
	before := func(x, y Hit) bool { // x ranks before y
		if x.Score != y.Score {
			return x.Score > y.Score
		}
		a, b := &docs[x.Doc], &docs[y.Doc]
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c > 0
		}
		return a.ID > b.ID
	}
	slices.SortFunc(byTime, func(x, y int) int {
		return docs[hits[x].Doc].CreatedAt.Compare(docs[hits[y].Doc].CreatedAt)
	})
	crowded := make([]bool, len(hits))
	for i, x := range byTime {
		tx := docs[hits[x].Doc].CreatedAt
		for _, y := range byTime[i+1:] {
			if docs[hits[y].Doc].CreatedAt.Sub(tx) > p.NeighbourWindow {
				break
			}
			if before(hits[x], hits[y]) {
				crowded[y] = true
			} else {
				crowded[x] = true
			}
		}
	}
	for i := range hits {
		if crowded[i] {
			hits[i].Score *= 1 - p.NeighbourPenalty
		}
	}
}

// coverage multiplies each sum by (m/total)^power, m the query lexemes its
// doc holds and total those any doc holds.
func coverage(docs []Doc, total int, sums []float64, power float64) {
	for i := range docs {
		if sums[i] == 0 {
			continue
		}
		m := 0
		for _, n := range docs[i].Terms {
			if n.Present {
				m++
			}
		}
		sums[i] *= math.Pow(float64(m)/float64(total), power)
	}
}

// session returns the sums with each matched doc's raised by SessionWeight
// times the highest sum of another matched doc created within
// SessionWindow of it.
func (p Params) session(docs []Doc, matched []bool, sums []float64) []float64 {
	var byTime []int
	for i := range docs {
		if matched[i] {
			byTime = append(byTime, i)
		}
	}
	slices.SortFunc(byTime, func(x, y int) int { return docs[x].CreatedAt.Compare(docs[y].CreatedAt) })
	best := make([]float64, len(docs))
	for k, x := range byTime {
		tx := docs[x].CreatedAt
		for _, y := range byTime[k+1:] {
			if docs[y].CreatedAt.Sub(tx) > p.SessionWindow {
				break
			}
			best[x], best[y] = max(best[x], sums[y]), max(best[y], sums[x])
		}
	}
	out := make([]float64, len(sums))
	for i := range sums {
		out[i] = sums[i] + p.SessionWeight*best[i]
	}
	return out
}

// later multiplies by 1 − LaterPenalty the score of every hit created after
// another hit, within NeighbourWindow of it (hits created at the same time
// are not later than each other).
func (p Params) later(docs []Doc, hits []Hit) {
	byTime := make([]int, len(hits))
	for i := range byTime {
		byTime[i] = i
	}
	at := func(i int) time.Time { return docs[hits[i].Doc].CreatedAt }
	slices.SortFunc(byTime, func(x, y int) int { return at(x).Compare(at(y)) })
	// prev is the creation time of the latest hit created before the
	// current one; set is false until there is one.
	var prev time.Time
	set := false
	for k, x := range byTime {
		if k > 0 && at(byTime[k-1]).Before(at(x)) {
			prev, set = at(byTime[k-1]), true
		}
		if set && at(x).Sub(prev) <= p.NeighbourWindow {
			hits[x].Score *= 1 - p.LaterPenalty
		}
	}
}
