package ranking_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/memoryd/memoryd/ranking"
)

// TestParamsRank checks the constants Params adds to the score: per-field
// length normalisation, the weight of another form of a lexeme than the
// query's word, and the neighbour penalty.
func TestParamsRank(t *testing.T) {
	t.Parallel()
	coll := ranking.Collection{Items: 10, AvgQuestionLen: 3, AvgAnswerLen: 5}
	all := ranking.Query{At: at, Limit: 100}
	def := ranking.DefaultParams()
	with := func(f func(p *ranking.Params)) ranking.Params {
		p := def
		f(&p)
		return p
	}
	half := with(func(p *ranking.Params) { p.StemWeight = 0.5 })
	crowd := with(func(p *ranking.Params) { p.NeighbourPenalty, p.NeighbourWindow = 0.5, 10*time.Minute })
	inflected := func(d ranking.Doc, in ...ranking.TermCount) ranking.Doc {
		d.Inflected = in
		return d
	}
	adjacent := func(d ranking.Doc, n int) ranking.Doc {
		d.Adjacent = n
		return d
	}
	// plus is the score of a fresh doc scoring sc, with add more in its
	// BM25 sum: sc = s/(s+h) gives s = h·sc/(1−sc).
	plus := func(sc, add float64) float64 {
		s := ranking.RelevanceHalf*sc/(1-sc) + add
		return s / (s + ranking.RelevanceHalf)
	}
	longAnswer := func(id int64) ranking.Doc {
		return ranking.Doc{ID: id, CreatedAt: at, QuestionLen: 3, AnswerLen: 50, Terms: []ranking.TermCount{a(1)}}
	}
	fa := ranking.AnswerWeight
	tests := []struct {
		name   string
		p      ranking.Params
		docs   []ranking.Doc
		q      ranking.Query
		want   []int64
		scores []float64
	}{
		{"defaults: an inflected form counts fully", def,
			[]ranking.Doc{inflected(doc(1, 0, q(1)), q(1)), doc(2, day, q(1))}, all, []int64{1, 2},
			[]float64{score(10, 0, []float64{2}, []float64{1}), score(10, day, []float64{2}, []float64{1})}},
		{"stem weight: an inflected form counts half", half,
			[]ranking.Doc{inflected(doc(1, 0, q(1)), q(1)), doc(2, day, q(1))}, all, []int64{2, 1},
			[]float64{score(10, day, []float64{2}, []float64{1}), score(10, 0, []float64{2}, []float64{0.5})}},
		{"stem weight: one of two question positions inflected, and the answer's", half,
			[]ranking.Doc{inflected(doc(1, 0, ranking.TermCount{Present: true, Question: 2, Answer: 1}),
				ranking.TermCount{Present: true, Question: 1, Answer: 1})}, all, []int64{1},
			[]float64{score(10, 0, []float64{1}, []float64{1.5 + 0.5*fa})}},
		{"stem weight: more inflected positions than positions counts none", half,
			[]ranking.Doc{inflected(doc(1, 0, q(1)), q(3))}, all, []int64{1},
			[]float64{score(10, 0, []float64{1}, []float64{0.5})}},
		{"stem weight: Inflected shorter than Terms", half,
			[]ranking.Doc{inflected(doc(1, 0, q(1), q(1)), q(1))}, all, []int64{1},
			[]float64{score(10, 0, []float64{1, 1}, []float64{0.5, 1})}},
		{"adjacent weight off by default", def,
			[]ranking.Doc{adjacent(doc(1, day, q(1), q(1)), 1), doc(2, 0, q(1), q(1))}, all, []int64{2, 1}, nil},
		{"adjacent weight: each adjacency adds to the sum, at most two", with(func(p *ranking.Params) { p.AdjacentWeight = 0.5 }),
			[]ranking.Doc{adjacent(doc(1, 0, q(1), q(1)), 3), adjacent(doc(2, 0, q(1), q(1)), 1), doc(3, 0, q(1), q(1))}, all, []int64{1, 2, 3},
			[]float64{plus(score(10, 0, []float64{3, 3}, []float64{1, 1}), 1), plus(score(10, 0, []float64{3, 3}, []float64{1, 1}), 0.5),
				score(10, 0, []float64{3, 3}, []float64{1, 1})}},
		{"BAnswer 0: a long answer counts as much as a short one",
			with(func(p *ranking.Params) { p.BAnswer = 0 }),
			[]ranking.Doc{longAnswer(1), doc(2, 0, a(1))}, all, []int64{2, 1},
			[]float64{score(10, 0, []float64{2}, []float64{fa}), score(10, 0, []float64{2}, []float64{fa})}},
		{"BQuestion does not touch the answer", with(func(p *ranking.Params) { p.BQuestion = 0 }),
			[]ranking.Doc{longAnswer(1), doc(2, 0, a(1))}, all, []int64{2, 1},
			[]float64{score(10, 0, []float64{2}, []float64{fa}), score(10, 0, []float64{2}, []float64{fa / (1 - ranking.B + ranking.B*10)})}},
		{"verbose replies: answers 5/3 the questions' length weigh 3/5 as much", with(func(p *ranking.Params) { p.VerboseReplyPower = 1 }),
			[]ranking.Doc{doc(1, 0, a(1))}, all, []int64{1},
			[]float64{score(10, 0, []float64{1}, []float64{fa * 3 / 5})}},
		{"verbose replies: off by default", def,
			[]ranking.Doc{doc(1, 0, a(1))}, all, []int64{1},
			[]float64{score(10, 0, []float64{1}, []float64{fa})}},
		{"neighbours off by default", def,
			[]ranking.Doc{doc(1, 0, q(2)), doc(2, time.Minute, q(1)), doc(3, 5*day, a(1))}, all, []int64{1, 2, 3}, nil},
		{"neighbour penalty: the weaker of two adjacent turns yields", crowd,
			[]ranking.Doc{doc(1, 0, q(2)), doc(2, time.Minute, q(1)), doc(3, 5*day, a(1))}, all, []int64{1, 3, 2},
			[]float64{score(10, 0, []float64{3}, []float64{2}), score(10, 5*day, []float64{3}, []float64{fa}),
				0.5 * score(10, time.Minute, []float64{3}, []float64{1})}},
		{"neighbour penalty: outside the window no one yields", crowd,
			[]ranking.Doc{doc(1, 0, q(2)), doc(2, 10*time.Minute+time.Second, q(1)), doc(3, 5*day, a(1))}, all, []int64{1, 2, 3}, nil},
		{"neighbour penalty: a chain of three, only the best keeps its score", crowd,
			[]ranking.Doc{doc(1, 0, q(1)), doc(2, 8*time.Minute, q(2)), doc(3, 16*time.Minute, q(1))}, all, []int64{2, 1, 3},
			[]float64{score(10, 8*time.Minute, []float64{3}, []float64{2}), 0.5 * score(10, 0, []float64{3}, []float64{1}),
				0.5 * score(10, 16*time.Minute, []float64{3}, []float64{1})}},
		{"neighbour penalty: equal scores, the one ranked first keeps its score", crowd,
			[]ranking.Doc{doc(1, 0, q(1)), doc(2, 0, q(1))}, all, []int64{2, 1},
			[]float64{score(10, 0, []float64{2}, []float64{1}), 0.5 * score(10, 0, []float64{2}, []float64{1})}},
		{"neighbour penalty: the threshold applies to the penalised score", crowd,
			[]ranking.Doc{doc(1, 0, q(2)), doc(2, time.Minute, q(1))},
			ranking.Query{At: at, Limit: 10, Threshold: 0.6 * score(10, time.Minute, []float64{2}, []float64{1})}, []int64{1}, nil},
	}
	// Answers shorter than the questions keep the answer weight.
	verbose := with(func(p *ranking.Params) { p.VerboseReplyPower = 1 })
	short := ranking.Collection{Items: 10, AvgQuestionLen: 5, AvgAnswerLen: 3}
	d := []ranking.Doc{doc(1, 0, a(1))}
	if got, want := verbose.Rank(short, d, all), def.Rank(short, d, all); !slices.Equal(got, want) {
		t.Errorf("verbose replies with short answers: %+v, want %+v", got, want)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits := tt.p.Rank(coll, tt.docs, tt.q)
			ids := make([]int64, len(hits))
			for i, h := range hits {
				ids[i] = tt.docs[h.Doc].ID
			}
			if !slices.Equal(ids, tt.want) {
				t.Fatalf("ranked %v (%+v), want %v", ids, hits, tt.want)
			}
			for i, want := range tt.scores {
				if math.Abs(hits[i].Score-want) > 1e-12 {
					t.Fatalf("hit %d scores %.15f, want %.15f", i, hits[i].Score, want)
				}
			}
		})
	}
}

// TestDefaultParamsAreRank checks that Rank is DefaultParams' ranking and
// that DefaultParams holds the documented constants, with the measured
// but unused changes off (see docs/quality.md).
func TestDefaultParamsAreRank(t *testing.T) {
	t.Parallel()
	p := ranking.DefaultParams()
	want := ranking.Params{K1: ranking.K1, BQuestion: ranking.B, BAnswer: ranking.B, AnswerWeight: ranking.AnswerWeight,
		IDFPrior: ranking.IDFPrior, RelevanceHalf: ranking.RelevanceHalf, RecencyWeight: ranking.RecencyWeight,
		RecencyDays: ranking.RecencyDays, VerboseReplyPower: 0, StemWeight: 1, AdjacentWeight: 0, NeighbourPenalty: 0, NeighbourWindow: ranking.NeighbourWindow,
		CoveragePower: 0, SessionWeight: 0, SessionWindow: ranking.SessionWindow, LaterPenalty: 0}
	if p != want {
		t.Fatalf("DefaultParams() = %+v, want %+v", p, want)
	}
	coll := ranking.Collection{Items: 2000, AvgQuestionLen: 10, AvgAnswerLen: 100}
	docs := benchDocs(300)
	for _, limit := range []int{1, 10, 300} {
		q := ranking.Query{At: at, Limit: limit, Threshold: 0.2}
		if a, b := ranking.Rank(coll, docs, q), p.Rank(coll, docs, q); !slices.Equal(a, b) {
			t.Fatalf("limit %d: Rank %v, DefaultParams().Rank %v", limit, a, b)
		}
	}
}

// TestParamsRankSessions checks the changes that look past one doc's own
// counts: the coverage of the query's lexemes, the session's best match,
// and the penalty for a turn after an earlier matching one.
func TestParamsRankSessions(t *testing.T) {
	t.Parallel()
	coll := ranking.Collection{Items: 10, AvgQuestionLen: 3, AvgAnswerLen: 5}
	all := ranking.Query{At: at, Limit: 100}
	with := func(f func(p *ranking.Params)) ranking.Params {
		p := ranking.DefaultParams()
		f(&p)
		return p
	}
	// sum is the BM25 sum of a doc with the given terms' document
	// frequencies and field-weighted frequencies; fresh is the score of a
	// doc created at the query's time with that sum.
	sum := func(dfs, fs []float64) float64 {
		s := 0.0
		for i, df := range dfs {
			idf := math.Log(1 + (10+ranking.IDFPrior-df+0.5)/(df+0.5))
			s += idf * fs[i] * (ranking.K1 + 1) / (fs[i] + ranking.K1)
		}
		return s
	}
	fresh := func(s float64) float64 { return s / (s + ranking.RelevanceHalf) }
	coverage := with(func(p *ranking.Params) { p.CoveragePower = 1 })
	session := with(func(p *ranking.Params) { p.SessionWeight, p.SessionWindow = 0.5, 30*time.Minute })
	later := with(func(p *ranking.Params) { p.LaterPenalty, p.NeighbourWindow = 0.1, 10*time.Minute })
	// commonSecond: doc 1 holds the rarer lexeme three times, doc 2 both
	// lexemes once, and by a hair less in its sum (the second is in 4 docs).
	commonSecond := []ranking.Doc{doc(1, 0, q(3), absent), doc(2, 0, q(1), a(1)),
		doc(3, 5*day, absent, a(1)), doc(4, 5*day, absent, a(1)), doc(5, 5*day, absent, a(1))}
	tests := []struct {
		name   string
		p      ranking.Params
		docs   []ranking.Doc
		want   []int64
		scores []float64 // of the first hits in order
	}{
		{"coverage: off by default", ranking.DefaultParams(),
			commonSecond, []int64{1, 2, 5, 4, 3},
			[]float64{fresh(sum([]float64{2}, []float64{3})), fresh(sum([]float64{2, 4}, []float64{1, ranking.AnswerWeight}))}},
		{"coverage: one of two lexemes counts half its sum", coverage,
			commonSecond, []int64{2, 1, 5, 4, 3},
			[]float64{fresh(sum([]float64{2, 4}, []float64{1, ranking.AnswerWeight})), fresh(sum([]float64{2}, []float64{3}) / 2)}},
		{"coverage: a lexeme no candidate holds does not count", coverage,
			[]ranking.Doc{doc(1, 0, q(1), absent, absent), doc(2, 0, absent, q(1))}, []int64{2, 1},
			[]float64{fresh(sum([]float64{1}, []float64{1}) / 2), fresh(sum([]float64{1}, []float64{1}) / 2)}},
		{"session: off by default", ranking.DefaultParams(),
			[]ranking.Doc{doc(1, 0, q(1)), doc(2, 0, q(2)), doc(3, 0, q(1))}, []int64{2, 3, 1}, nil},
		{"session: a turn gains a share of its session's best other turn", session,
			[]ranking.Doc{doc(1, 0, q(1)), doc(2, -20*time.Minute, q(1)), doc(3, 2*day, q(2))}, []int64{2, 1, 3},
			[]float64{fresh(1.5 * sum([]float64{3}, []float64{1})), fresh(1.5 * sum([]float64{3}, []float64{1}))}},
		{"session: turns further apart than the window are not one session", session,
			[]ranking.Doc{doc(1, 0, q(1)), doc(2, -31*time.Minute, q(2))}, []int64{2, 1},
			[]float64{fresh(sum([]float64{2}, []float64{2})), fresh(sum([]float64{2}, []float64{1}))}},
		{"session: the best of several, not their sum", session,
			[]ranking.Doc{doc(1, 0, q(1)), doc(2, -time.Minute, q(2)), doc(3, -2*time.Minute, q(1))}, []int64{2, 3, 1},
			[]float64{fresh(sum([]float64{3}, []float64{2}) + 0.5*sum([]float64{3}, []float64{1})),
				fresh(sum([]float64{3}, []float64{1}) + 0.5*sum([]float64{3}, []float64{2})),
				fresh(sum([]float64{3}, []float64{1}) + 0.5*sum([]float64{3}, []float64{2}))}},
		{"later: off by default", ranking.DefaultParams(),
			[]ranking.Doc{doc(1, 0, q(1)), doc(2, 5*time.Minute, q(1))}, []int64{1, 2}, nil},
		{"later: of two equal turns the earlier ranks first", later,
			[]ranking.Doc{doc(1, -5*time.Minute, q(1)), doc(2, 0, q(1))}, []int64{2, 1},
			[]float64{fresh(sum([]float64{2}, []float64{1})), 0.9 * fresh(sum([]float64{2}, []float64{1}))}},
		{"later: turns at the same time are not later than each other", later,
			[]ranking.Doc{doc(1, 0, q(1)), doc(2, 0, q(1))}, []int64{2, 1},
			[]float64{fresh(sum([]float64{2}, []float64{1})), fresh(sum([]float64{2}, []float64{1}))}},
		{"later: a turn at the same time as a later one is later too", later,
			[]ranking.Doc{doc(1, 0, q(1)), doc(2, 0, q(1)), doc(3, 2*time.Minute, q(1))}, []int64{3, 2, 1},
			[]float64{score(10, 2*time.Minute, []float64{3}, []float64{1}), 0.9 * fresh(sum([]float64{3}, []float64{1})),
				0.9 * fresh(sum([]float64{3}, []float64{1}))}},
		{"later: outside the window no penalty", later,
			[]ranking.Doc{doc(1, -11*time.Minute, q(1)), doc(2, 0, q(1))}, []int64{1, 2},
			[]float64{fresh(sum([]float64{2}, []float64{1})), fresh(sum([]float64{2}, []float64{1}))}},
		{"later: a much better later turn still ranks first", later,
			[]ranking.Doc{doc(1, -5*time.Minute, q(3)), doc(2, 0, q(1))}, []int64{1, 2},
			[]float64{0.9 * fresh(sum([]float64{2}, []float64{3}))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits := tt.p.Rank(coll, tt.docs, all)
			ids := make([]int64, len(hits))
			for i, h := range hits {
				ids[i] = tt.docs[h.Doc].ID
			}
			if !slices.Equal(ids, tt.want) {
				t.Fatalf("ranked %v (%+v), want %v", ids, hits, tt.want)
			}
			for i, want := range tt.scores {
				if math.Abs(hits[i].Score-want) > 1e-12 {
					t.Fatalf("hit %d scores %.15f, want %.15f", i, hits[i].Score, want)
				}
			}
		})
	}
}

// TestParamsRecalledAnswerWeight: a query asking what the reply said
// weighs the answer half by RecalledAnswerWeight, only then; by default
// the two weights are equal, so it changes nothing.
func TestParamsRecalledAnswerWeight(t *testing.T) {
	t.Parallel()
	coll := ranking.Collection{Items: 10, AvgQuestionLen: 3, AvgAnswerLen: 5}
	docs := []ranking.Doc{{ID: 1, CreatedAt: at, QuestionLen: 3, AnswerLen: 5, Terms: []ranking.TermCount{{Present: true, Answer: 1}}}}
	score := func(p ranking.Params, asks bool) float64 {
		hits := p.Rank(coll, docs, ranking.Query{At: at, Limit: 1, AsksReply: asks})
		if len(hits) != 1 {
			t.Fatalf("%d hits", len(hits))
		}
		return hits[0].Score
	}
	def := ranking.DefaultParams()
	if a, b := score(def, false), score(def, true); a != b {
		t.Fatalf("defaults: %v without AsksReply, %v with; want equal", a, b)
	}
	up := def
	up.RecalledAnswerWeight = 1.2
	if a, b, c := score(up, false), score(up, true), score(def, false); a != c || !(b > a) {
		t.Fatalf("RecalledAnswerWeight 1.2: %v without AsksReply (defaults %v), %v with; want the defaults' without and more with", a, c, b)
	}
}
