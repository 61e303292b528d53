package main

import (
	"cmp"
	"context"
	"encoding/gob"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/ranking"
	"github.com/memoryd/memoryd/store"
)

// cvFolds is the number of cross-validation folds: LoCoMo's 5 dev
// conversations, one a fold, and LongMemEval's questions in 5 groups. Fold
// f holds out LoCoMo conversation f and LongMemEval group f together, so one
// choice of constants serves both sets, as the service's one set of
// constants does.
const cvFolds = 5

// cvRepeats is how many times the cross-validation is run with the
// LongMemEval questions dealt into groups anew: its 57 questions make folds
// of 11-12, where one question moves a fold's recall by 0.09, so one split
// says little of the spread. Repeat 0 puts question i in group i mod 5, the
// others deal a fixed shuffle; LoCoMo's folds are its conversations in every
// repeat (a set of cvFolds conversations or fewer is never reshuffled).
const cvRepeats = 10

// cvQuestion is one question ready to be ranked offline: its candidates as
// enrich reads them (store.SearchContext with enricher.Keywords, no scope),
// converted once to the ranking's input.
type cvQuestion struct {
	set   int   // index in the run's datasets
	folds []int // the question's fold in each repeat
	coll  ranking.Collection
	docs  []ranking.Doc
	// inflected are docs with Doc.Inflected filled: [stemAll] for every
	// lexeme, [stemGuarded] only for short lexemes and query words that are
	// their own lexeme (see inflectedCounts).
	inflected [2][]ranking.Doc
	events    []string // event id of each doc
	at        time.Time
	evidence  map[string]bool
	fts       int // FTS5-BM25's first-hit rank, 0 when none in the top 10
	// ranged says the question has a time range and keywords
	// (cvInput.Ranged): docs and events are then what enrich ranks today
	// (the candidates of the range widened past its end,
	// cvInput.RankedUntil, or every one when it holds none), and all,
	// allEvents every candidate of the user's memory, for the variants of
	// the range's use (cvTimeRanks).
	ranged       bool
	since, until time.Time
	// df is the document frequencies docs are ranked with
	// (ranking.Query.DF): a ranged question's cvInput.DF when docs are
	// the range's, else nil (every candidate is a doc, so counting them
	// gives the memory's).
	df        []int
	category  string
	all       []ranking.Doc
	allEvents []string
	// newest says enrich answers the question with the items it reads
	// for a time alone, spread over its range (cvInput.Newest), whose first-hit rank is newestRank
	// whatever the constants.
	newest     bool
	newestRank int
	// asksReply is asksReply of the question (ranking.Query.AsksReply).
	asksReply bool
	// vector is the question's vector side, when read with embeddings
	// (cvhybrid.go); rangeDocs, rangeEvents and rangeDF are a ranged
	// question's candidates in its ranked range (maybe none) and their
	// document frequencies, which a hybrid read ranks first.
	vector      *cvVector
	rangeDocs   []ranking.Doc
	rangeEvents []string
	rangeDF     []int
}

// cvVariant is one change measured by cross-validation: the constants it
// may choose from. Within a variant the first params are the current
// defaults (or as close as the grid gets), and ties go to the earlier ones.
type cvVariant struct {
	name string
	grid []ranking.Params
	// forms is which word forms the docs tell apart: stemNone (no
	// Doc.Inflected), stemAll or stemGuarded.
	forms int
	// fusions, when set, is the grid instead of grid's constants: grid
	// holds one Params per fusion (the ranking fused), and each ranks by
	// reciprocal-rank fusion with fusions[i].with (the first, with W 0, is
	// no fusion).
	fusions []cvFusion
	// noSetWorse restricts a fold's choice to the params that do at least
	// as well as the grid's first (the defaults) on each set's training
	// questions: a change that one set gains and the other loses is not
	// taken, however much the mean of the two rises.
	noSetWorse bool
	// oneSE keeps the defaults (or the earliest params of the grid) unless
	// a later entry gains more than one standard error over them on the
	// training questions: a fold chooses the first entry whose objective is
	// within one standard error of the best's (cvOneSE), so that a gain
	// the training questions cannot tell from noise changes nothing.
	oneSE bool
	// times, when set, is the grid instead of grid's constants: grid
	// holds one (default) Params per entry, and each ranks the ranged
	// questions as times[i] says (cvTimeRanks; the first is enrich's).
	times []cvTime
	// hybrids, when set, is the grid instead of grid's constants: grid
	// holds one (default) Params per entry, and each ranks with the
	// vector side as hybrids[i] says (cvHybridRanks; the first is
	// enrich's).
	hybrids []cvHybrid
}

// cvFusion fuses a ranking with another by reciprocal rank: an item's
// score is 1/(K+rank) under the first plus W/(K+rank) under with, over
// each ranking's top cvFusionDepth.
type cvFusion struct {
	with ranking.Params
	K, W float64
}

// cvFusionDepth is how many of each ranking's hits a fusion reads.
const cvFusionDepth = 50

// Which lexemes' inflected forms a variant's docs tell apart.
const (
	stemAll = iota
	stemGuarded
	stemNone
)

// stemGuardLen is the longest lexeme, in runes, that stemGuarded tells
// forms apart for whatever the query word: a short stem ("pay", "team")
// gathers unrelated words more often than a long one.
const stemGuardLen = 4

// cvGrid returns the product of the given values over the default params:
// each set function writes one value.
func cvGrid(base []ranking.Params, set func(p *ranking.Params, v float64), values ...float64) []ranking.Params {
	var out []ranking.Params
	for _, p := range base {
		for _, v := range values {
			q := p
			set(&q, v)
			out = append(out, q)
		}
	}
	return out
}

// cvVariants are the changes measured. Each value list starts with the
// current default.
func cvVariants() []cvVariant {
	def := []ranking.Params{ranking.DefaultParams()}
	aw := func(p *ranking.Params, v float64) { p.AnswerWeight = v }
	ba := func(p *ranking.Params, v float64) { p.BAnswer = v }
	bq := func(p *ranking.Params, v float64) { p.BQuestion = v }
	k1 := func(p *ranking.Params, v float64) { p.K1 = v }
	pen := func(p *ranking.Params, v float64) { p.NeighbourPenalty = v }
	win := func(p *ranking.Params, v float64) { p.NeighbourWindow = time.Duration(v * float64(time.Minute)) }
	stem := cvGrid(def, func(p *ranking.Params, v float64) { p.StemWeight = v }, 1, 0.75, 0.5, 0.25)
	verbose := cvGrid(cvGrid(def, aw, 0.6, 0.8, 1.0, 1.2), func(p *ranking.Params, v float64) { p.VerboseReplyPower = v }, 0, 0.25, 0.5, 0.75, 1)
	adjacent := cvGrid(def, func(p *ranking.Params, v float64) { p.AdjacentWeight = v }, 0, 0.25, 0.5, 1, 2)
	answer := cvGrid(cvGrid(def, aw, 0.6, 0.4, 0.8, 1.0), ba, 0.5, 0.25, 0.75, 0.9)
	bm25f := cvGrid(cvGrid(answer, bq, 0.5, 0.25, 0.75), k1, 1.2, 0.9, 1.6, 2.0)
	recalled := cvGrid(def, func(p *ranking.Params, v float64) { p.RecalledAnswerWeight = v }, 0, 0.8, 1.0, 1.25, 1.5, 2, 3)
	coverage := cvGrid(def, func(p *ranking.Params, v float64) { p.CoveragePower = v }, 0, 0.25, 0.5, 1, 2)
	session := append(append([]ranking.Params(nil), def...), cvGrid(cvGrid(def,
		func(p *ranking.Params, v float64) { p.SessionWindow = time.Duration(v * float64(time.Minute)) }, 10, 30, 120),
		func(p *ranking.Params, v float64) { p.SessionWeight = v }, 0.1, 0.25, 0.5)...)
	later := append(append([]ranking.Params(nil), def...), cvGrid(cvGrid(def, win, 2, 10, 60),
		func(p *ranking.Params, v float64) { p.LaterPenalty = v }, 0.02, 0.05, 0.1, 0.2)...)
	neighbour := func(base []ranking.Params) []ranking.Params {
		out := append([]ranking.Params(nil), base...) // penalty 0 first
		on := cvGrid(cvGrid(base, win, 2, 10, 60), pen, 0.1, 0.2, 0.35)
		return append(out, on...)
	}
	// A single-field BM25 (question and reply weighed alike, each field
	// normalised as FTS5's one column is, no recency): the ranking FTS5-BM25
	// approximates, whose errors differ from memoryd's on the dev sets.
	plain := ranking.DefaultParams()
	plain.AnswerWeight, plain.BQuestion, plain.BAnswer, plain.RecencyWeight = 1, 0.75, 0.75, 0
	fusions := []cvFusion{{with: plain}}
	for _, k := range []float64{10, 60} {
		for _, w := range []float64{0.5, 1} {
			fusions = append(fusions, cvFusion{with: plain, K: k, W: w})
		}
	}
	fused := make([]ranking.Params, len(fusions))
	for i := range fused {
		fused[i] = ranking.DefaultParams()
	}
	vs := []cvVariant{
		{name: "current constants", grid: def, forms: stemNone},
		{name: "answer half: AnswerWeight × BAnswer", grid: answer, forms: stemNone},
		{name: "BM25F: K1 × BQuestion × BAnswer × AnswerWeight", grid: bm25f, forms: stemNone},
		{name: "neighbour penalty × window", grid: neighbour(def), forms: stemNone},
		{name: "BM25F + neighbour penalty", grid: neighbour(bm25f), forms: stemNone},
		{name: "stem weight, every lexeme", grid: stem, forms: stemAll},
		{name: "stem weight, short lexeme or uninflected query word", grid: stem, forms: stemGuarded},
		{name: "adjacent query words", grid: adjacent, forms: stemNone},
		{name: "verbose replies: AnswerWeight × VerboseReplyPower", grid: verbose, forms: stemNone},
		{name: "query coverage (soft AND): CoveragePower", grid: coverage, forms: stemNone},
		{name: "session's best turn: SessionWeight × SessionWindow", grid: session, forms: stemNone},
		{name: "first mention: LaterPenalty × window", grid: later, forms: stemNone},
		{name: "fusion with a single-field BM25: K × W", grid: fused, fusions: fusions, forms: stemNone},
		{name: "questions about the reply: RecalledAnswerWeight", grid: recalled, forms: stemNone},
	}
	// The same grids again, choosing only what no set finds worse on the
	// training folds.
	vs = append(vs, cvTimeVariants()...)
	n := len(vs)
	for _, v := range vs[1:n] {
		v.name += ", no set worse"
		v.noSetWorse = true
		vs = append(vs, v)
	}
	for _, v := range vs[1:n] {
		v.name += ", one SE"
		v.oneSE = true
		vs = append(vs, v)
	}
	return vs
}

// cvVariantsNamed is cvVariants, and cvHybridVariants with hybrid, only
// the current constants and the variants whose name holds sub when sub is
// not empty.
func cvVariantsNamed(sub string, hybrid bool) []cvVariant {
	vs := cvVariants()
	if hybrid {
		vs = append(vs, cvHybridVariants()...)
	}
	if sub == "" {
		return vs
	}
	out := vs[:1]
	for _, v := range vs[1:] {
		if strings.Contains(v.name, sub) {
			out = append(out, v)
		}
	}
	return out
}

// cvInput is what cross-validation reads of one question: its candidates
// as enrich reads them (store.SearchContext with enricher.Keywords, no
// scope), with their text, and FTS5-BM25's top 10. It is all the CV needs,
// so that a run can be saved (-cv-cache) and measured again without
// Postgres or NATS.
type cvInput struct {
	Set      int
	Haystack string // its haystack's name; a set's inputs are in haystack order
	Question string
	Keywords []string
	Terms    []string // the search's lexemes, in the order of each match's Counts
	Coll     ranking.Collection
	At       time.Time
	Evidence map[string]bool
	FTS      []string // FTS5-BM25's top 10 event ids, best first
	Matches  []cvMatch
	// Newest, when not empty, is what enrich answered a question asking
	// for a time only ("what did we talk about last week?"): items spread
	// over the range, newest first, whatever the ranking's constants; Matches is then
	// empty.
	Newest []string
	// Ranged says the question has a time range (Since, Until) and
	// keywords: Matches are then every candidate of the user's memory,
	// not only the range's (cvQuestions picks what enrich ranks).
	Ranged       bool
	Since, Until time.Time
	// RankedUntil and DF are how enrich ranks a Ranged question: the
	// candidates created in [Since, RankedUntil) (the range widened past
	// its end, enricher.AfterMargin), with the document frequencies DF
	// (its ranged read's store.Candidates.DF: the whole memory's, or nil
	// for a phrase query, which counts them over the range's candidates).
	RankedUntil time.Time
	DF          []int
	Category    string
	// Vector is the question's vector side, when read with embeddings
	// (cvhybrid.go).
	Vector *cvVector
}

// cvMatch is one candidate of a cvInput.
type cvMatch struct {
	ID                     int64
	CreatedAt              time.Time
	QuestionLen, AnswerLen int
	Counts                 []ranking.TermCount
	Question, Answer       string
	EventID                string
}

// cvCache is a saved run: the sets' names, every question's input, and the
// english lexemes of every keyword.
type cvCache struct {
	Sets    []string
	Inputs  []cvInput
	Lexemes map[string][]string
	// Model is the embedding model the vector sides were read with ("":
	// none).
	Model string
}

// cvRead reads every question's candidates from memoryd's store as enrich
// reads them, and FTS5-BM25's ranks from the baseline. A question with a
// time expression (enricher.ParseTime) is searched with the keywords
// enrich's reply says it used (the expression's words left out): in its
// range (widened past its end, enricher.AfterMargin) first, the whole
// memory only when the range holds no match, as enrich does; one with no
// keyword left is answered by the items enrich reads for a time alone
// (spread over the range), or nothing.
func cvRead(ctx context.Context, in *instance, sets []dataset, fts ranker) (*cvCache, error) {
	st, err := in.app.Store(ctx)
	if err != nil {
		return nil, err
	}
	out := &cvCache{Lexemes: map[string][]string{}}
	if in.emb != nil {
		out.Model = in.emb.Model()
	}
	for si, s := range sets {
		out.Sets = append(out.Sets, s.name)
		for _, h := range s.haystacks {
			ranked, err := fts.rank(ctx, h, 10)
			if err != nil {
				return nil, fmt.Errorf("%s on %s %s: %w", fts.name(), s.name, h.name, err)
			}
			// With embeddings: the user's vectors, their items' event
			// ids, and hybrid enrich's answers.
			var (
				uv      store.UserVectors
				eventOf map[int64]string
				hybrid  [][]string
			)
			if in.emb != nil {
				if uv, err = st.UserVectors(ctx, in.userID(h), in.emb.Model()); err != nil {
					return nil, err
				}
				if eventOf, err = userEventIDs(ctx, st, in.userID(h)); err != nil {
					return nil, err
				}
				mem := &memorydRanker{in: in, facts: events.FactsRelevant}
				if hybrid, err = mem.rank(ctx, h, cvHybridLimit); err != nil {
					return nil, err
				}
			}
			for qi, q := range h.questions {
				kws := enricher.Keywords(q.text)
				var c store.Candidates
				var newest []string
				// searched: the candidates are read (or none are to be).
				searched := false
				var when enricher.TimeExpr
				ranged := false
				if w, timed := enricher.ParseTime(q.text, q.at); timed {
					r, err := in.enrich(ctx, h, q, events.FactsRelevant, evalShape(10))
					if err != nil {
						return nil, err
					}
					if kws = r.Keywords; len(kws) == 0 {
						for _, it := range r.Context {
							newest = append(newest, it.EventID)
						}
						searched = true
					} else {
						// Every candidate, the range's among them:
						// cvQuestions picks the range's.
						when, ranged = w, true
					}
				}
				if !searched {
					if c, err = st.SearchContext(ctx, store.SearchQuery{UserID: in.userID(h), Keywords: kws}); err != nil {
						return nil, err
					}
				}
				var rankedUntil time.Time
				var df []int
				if ranged {
					rankedUntil = enricher.AfterMargin(when)
					if df, err = rangedDF(ctx, st, store.SearchQuery{UserID: in.userID(h), Keywords: kws, Since: when.Since, Until: rankedUntil}, c); err != nil {
						return nil, fmt.Errorf("%s %s %q: %w", s.name, h.name, q.text, err)
					}
				}
				if err := readLexemes(ctx, st, kws, out.Lexemes); err != nil {
					return nil, err
				}
				ci := cvInput{Set: si, Haystack: h.name, Question: q.text, Keywords: kws, Terms: c.Terms,
					Coll: ranking.Collection(c.Stats), At: q.at, Evidence: q.evidence, FTS: ranked[qi], Newest: newest,
					Ranged: ranged, Since: when.Since, Until: when.Until, RankedUntil: rankedUntil, DF: df, Category: q.category}
				for _, m := range c.Matches {
					counts := make([]ranking.TermCount, len(m.Terms))
					for i, n := range m.Terms {
						counts[i] = ranking.TermCount(n)
					}
					ci.Matches = append(ci.Matches, cvMatch{ID: m.Item.ID, CreatedAt: m.Item.CreatedAt,
						QuestionLen: m.QuestionLen, AnswerLen: m.AnswerLen, Counts: counts,
						Question: m.Item.Question, Answer: m.Item.Answer, EventID: m.Item.EventID})
				}
				if in.emb != nil {
					if err := readVectors(ctx, in, uv, eventOf, in.userID(h), q, &ci, hybrid[qi]); err != nil {
						return nil, fmt.Errorf("%s %s: %w", s.name, h.name, err)
					}
				}
				out.Inputs = append(out.Inputs, ci)
			}
		}
	}
	return out, nil
}

// rangedDF reads q, the ranged read enrich ranks a question about a time
// with, and returns its document frequencies (store.Candidates.DF). It
// checks that its candidates are those of all, the question's unranged
// read, created in q's range, with the same terms, so that cvQuestions'
// pick from all is what enrich ranks.
func rangedDF(ctx context.Context, st *store.Store, q store.SearchQuery, all store.Candidates) ([]int, error) {
	c, err := st.SearchContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(c.Terms, all.Terms) {
		return nil, fmt.Errorf("ranged read's terms %q, unranged read's %q", c.Terms, all.Terms)
	}
	var want, got []int64
	for _, m := range all.Matches {
		if inRange(m.Item.CreatedAt, q.Since, q.Until) {
			want = append(want, m.Item.ID)
		}
	}
	for _, m := range c.Matches {
		got = append(got, m.Item.ID)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		return nil, fmt.Errorf("ranged read's candidates %v, the unranged read's in its range %v", got, want)
	}
	return c.DF, nil
}

// writeCVCache saves c to path (gob); readCVCache reads it back.
func writeCVCache(path string, c *cvCache) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := gob.NewEncoder(f).Encode(c); err != nil {
		f.Close()
		return fmt.Errorf("cv cache %s: %w", path, err)
	}
	return f.Close()
}

func readCVCache(path string) (*cvCache, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var c cvCache
	if err := gob.NewDecoder(f).Decode(&c); err != nil {
		return nil, fmt.Errorf("cv cache %s: %w", path, err)
	}
	for _, ci := range c.Inputs {
		// A closed range always reaches to a RankedUntil; a cache saved
		// before it was read has none, and would rank the range open.
		if ci.Ranged && !ci.Until.IsZero() && ci.RankedUntil.IsZero() {
			return nil, fmt.Errorf("cv cache %s predates the ranged read's margin and frequencies: remove it to read the candidates again", path)
		}
	}
	return &c, nil
}

// cvFoldsOf returns, for each input, its haystack's fold in each repeat
// (see cvRepeats).
func cvFoldsOf(inputs []cvInput) [][]int {
	// index[i] is input i's haystack's index in its set; n[set] the set's
	// haystacks.
	index := make([]int, len(inputs))
	n := map[int]int{}
	for i, ci := range inputs {
		if i == 0 || ci.Set != inputs[i-1].Set || ci.Haystack != inputs[i-1].Haystack {
			n[ci.Set]++
		}
		index[i] = n[ci.Set] - 1
	}
	perms := map[int][][]int{} // [set][repeat]
	for set, count := range n {
		for r := range cvRepeats {
			perm := make([]int, count)
			for i := range perm {
				perm[i] = i
			}
			if r > 0 && count > cvFolds {
				perm = rand.New(rand.NewPCG(uint64(r), uint64(set))).Perm(count)
			}
			perms[set] = append(perms[set], perm)
		}
	}
	out := make([][]int, len(inputs))
	for i, ci := range inputs {
		for r := range cvRepeats {
			out[i] = append(out[i], perms[ci.Set][r][index[i]]%cvFolds)
		}
	}
	return out
}

// cvQuestions converts each input once to the ranking's input.
func cvQuestions(c *cvCache) []cvQuestion {
	var out []cvQuestion
	folds := cvFoldsOf(c.Inputs)
	for i, ci := range c.Inputs {
		forms := [2][][]string{queryForms(ci.Terms, ci.Keywords, c.Lexemes, false), queryForms(ci.Terms, ci.Keywords, c.Lexemes, true)}
		cq := cvQuestion{set: ci.Set, folds: folds[i], coll: ci.Coll, at: ci.At, evidence: ci.Evidence, fts: firstHit(ci.FTS, ci.Evidence),
			newest: len(ci.Newest) > 0, newestRank: firstHit(ci.Newest, ci.Evidence), asksReply: asksReply(ci.Question), category: ci.Category,
			vector: ci.Vector}
		matches := ci.Matches
		if ci.Ranged {
			cq.ranged, cq.since, cq.until = true, ci.Since, ci.Until
			for _, m := range ci.Matches {
				cq.all = append(cq.all, cvDoc(m))
				cq.allEvents = append(cq.allEvents, m.EventID)
			}
			// What enrich ranks: the candidates of the range widened
			// past its end, with the whole memory's frequencies, or every
			// one when it holds none.
			var in []cvMatch
			for _, m := range ci.Matches {
				if inRange(m.CreatedAt, ci.Since, ci.RankedUntil) {
					in = append(in, m)
				}
			}
			if len(in) > 0 {
				matches, cq.df = in, ci.DF
			}
			for _, m := range in {
				cq.rangeDocs = append(cq.rangeDocs, cvDoc(m))
				cq.rangeEvents = append(cq.rangeEvents, m.EventID)
			}
			cq.rangeDF = ci.DF
		}
		for _, m := range matches {
			d := ranking.Doc{ID: m.ID, CreatedAt: m.CreatedAt, QuestionLen: m.QuestionLen, AnswerLen: m.AnswerLen, Terms: m.Counts,
				Adjacent: adjacentCount(ci.Terms, forms[stemAll], m.Question) + adjacentCount(ci.Terms, forms[stemAll], m.Answer)}
			cq.docs = append(cq.docs, d)
			for fi, f := range forms {
				d.Inflected = inflectedCounts(m.Counts, f, m.Question, m.Answer)
				cq.inflected[fi] = append(cq.inflected[fi], d)
			}
			cq.events = append(cq.events, m.EventID)
		}
		out = append(out, cq)
	}
	return out
}

// cvRanks returns each question's first-hit rank (0: none in the top 10)
// under p.
func cvRanks(qs []cvQuestion, p ranking.Params, forms int) []int8 {
	out := make([]int8, len(qs))
	for i, q := range qs {
		if q.newest {
			out[i] = int8(q.newestRank)
			continue
		}
		docs := q.docs
		if forms != stemNone {
			docs = q.inflected[forms]
		}
		for r, h := range p.Rank(q.coll, docs, ranking.Query{At: q.at, Limit: 10, AsksReply: q.asksReply, DF: q.df}) {
			if q.evidence[q.events[h.Doc]] {
				out[i] = int8(r + 1)
				break
			}
		}
	}
	return out
}

// cvFusedRanks is cvRanks for p fused with fu.with (cvFusion).
func cvFusedRanks(qs []cvQuestion, p ranking.Params, fu cvFusion) []int8 {
	out := make([]int8, len(qs))
	for i, q := range qs {
		if q.newest {
			out[i] = int8(q.newestRank)
			continue
		}
		query := ranking.Query{At: q.at, Limit: cvFusionDepth, AsksReply: q.asksReply, DF: q.df}
		score := map[int]float64{}
		for r, h := range p.Rank(q.coll, q.docs, query) {
			score[h.Doc] += 1 / (fu.K + float64(r+1))
		}
		for r, h := range fu.with.Rank(q.coll, q.docs, query) {
			score[h.Doc] += fu.W / (fu.K + float64(r+1))
		}
		order := make([]int, 0, len(score))
		for d := range score {
			order = append(order, d)
		}
		// Ties go to the first ranking's order (its lower doc index is
		// not an order), so break them by score under p first.
		first := map[int]int{}
		for r, h := range p.Rank(q.coll, q.docs, query) {
			first[h.Doc] = r
		}
		sort.Slice(order, func(a, b int) bool {
			if score[order[a]] != score[order[b]] {
				return score[order[a]] > score[order[b]]
			}
			ra, oka := first[order[a]]
			rb, okb := first[order[b]]
			if oka != okb {
				return oka
			}
			if ra != rb {
				return ra < rb
			}
			return order[a] < order[b]
		})
		for r, d := range order {
			if r == 10 {
				break
			}
			if q.evidence[q.events[d]] {
				out[i] = int8(r + 1)
				break
			}
		}
	}
	return out
}

// cvRecall is the share of the selected questions with a hit in the top k.
func cvRecall(ranks []int8, sel []int, k int) float64 {
	if len(sel) == 0 {
		return 0
	}
	n := 0
	for _, i := range sel {
		if ranks[i] > 0 && int(ranks[i]) <= k {
			n++
		}
	}
	return float64(n) / float64(len(sel))
}

// cvObjective is what a fold's constants are chosen by on its training
// questions: R@1 + R@5, averaged over the sets (each set counts the same,
// whatever its number of questions).
func cvObjective(ranks []int8, train [][]int) float64 {
	sum, n := 0.0, 0
	for _, sel := range train {
		if len(sel) == 0 {
			continue
		}
		sum += cvSetObjective(ranks, sel)
		n++
	}
	return sum / float64(max(n, 1))
}

// cvOneSE returns the first grid index whose objective on the training
// questions is within one standard error of best's: the standard error of
// the paired difference of the two (each question's R@1 + R@5 under best
// minus under the other), taken over the sets as cvObjective weighs them.
func cvOneSE(ranks [][]int8, best int, train [][]int) int {
	score := func(r int8) float64 {
		s := 0.0
		if r > 0 && r <= 1 {
			s++
		}
		if r > 0 && r <= 5 {
			s++
		}
		return s
	}
	for gi := range ranks {
		if gi == best {
			return gi
		}
		diff, variance, sets := 0.0, 0.0, 0
		for _, sel := range train {
			if len(sel) == 0 {
				continue
			}
			sets++
			ds := make([]float64, len(sel))
			for k, i := range sel {
				ds[k] = score(ranks[best][i]) - score(ranks[gi][i])
			}
			mean := 0.0
			for _, d := range ds {
				mean += d
			}
			mean /= float64(len(ds))
			diff += mean
			if len(ds) > 1 {
				ss := 0.0
				for _, d := range ds {
					ss += (d - mean) * (d - mean)
				}
				variance += ss / float64(len(ds)-1) / float64(len(ds))
			}
		}
		if sets == 0 {
			return gi
		}
		diff /= float64(sets)
		if se := math.Sqrt(variance) / float64(sets); diff <= se+1e-12 {
			return gi
		}
	}
	return best
}

// cvSetObjective is R@1 + R@5 of one set's selected questions.
func cvSetObjective(ranks []int8, sel []int) float64 {
	return cvRecall(ranks, sel, 1) + cvRecall(ranks, sel, 5)
}

// cvFoldResult is one variant's held-out figures on one fold of one set.
type cvFoldResult struct {
	chosen ranking.Params
	gi     int    // chosen's index in the variant's grid
	ranks  []int8 // of the held-out questions, under chosen
	sel    []int  // the held-out questions
}

// cvResult is a variant's cross-validation: per set, per fold of each
// repeat.
type cvResult struct {
	variant cvVariant
	folds   [][]cvFoldResult // [set][repeat*cvFolds + fold]
	final   ranking.Params   // chosen on every fold
	finalGI int              // final's index in the variant's grid
}

// describe names the variant's grid entry gi: the params that differ from
// the defaults, or the fusion.
func (v cvVariant) describe(gi int) string {
	if v.times != nil {
		return v.times[gi].String()
	}
	if v.hybrids != nil {
		return v.hybrids[gi].String()
	}
	if v.fusions != nil {
		if f := v.fusions[gi]; f.W != 0 {
			return fmt.Sprintf("fused K %g, W %g", f.K, f.W)
		}
		return "no fusion"
	}
	return paramsDiff(v.grid[gi])
}

// crossValidate runs leave-one-fold-out cross-validation of each variant,
// cvRepeats times: for each fold, the params of the variant's grid with the
// best objective on the other folds are chosen (among those no set finds
// worse than the defaults, with noSetWorse), and the held-out fold is
// ranked with them.
func crossValidate(qs []cvQuestion, nsets int, variants []cvVariant, progress func(string, ...any)) []cvResult {
	// sel[set][r*cvFolds+f] are the question indexes of that set and fold
	// in repeat r.
	sel := make([][]([]int), nsets)
	for s := range sel {
		sel[s] = make([][]int, cvRepeats*cvFolds)
	}
	for i, q := range qs {
		for r, f := range q.folds {
			sel[q.set][r*cvFolds+f] = append(sel[q.set][r*cvFolds+f], i)
		}
	}
	var out []cvResult
	for _, v := range variants {
		progress("cross-validating %q (%d constant sets)\n", v.name, len(v.grid))
		ranks := make([][]int8, len(v.grid))
		for gi, p := range v.grid {
			if v.times != nil {
				ranks[gi] = cvTimeRanks(qs, v.times[gi])
				continue
			}
			if v.hybrids != nil {
				ranks[gi] = cvHybridRanks(qs, v.hybrids[gi])
				continue
			}
			if v.fusions != nil && v.fusions[gi].W != 0 {
				ranks[gi] = cvFusedRanks(qs, p, v.fusions[gi])
				continue
			}
			ranks[gi] = cvRanks(qs, p, v.forms)
		}
		// best returns the grid index chosen on repeat r's folds other than
		// hold (-1: every fold).
		best := func(r, hold int) int {
			train := make([][]int, nsets)
			for s := range nsets {
				for f := range cvFolds {
					if f != hold {
						train[s] = append(train[s], sel[s][r*cvFolds+f]...)
					}
				}
			}
			b, bo := 0, math.Inf(-1)
		grid:
			for gi := range v.grid {
				if v.noSetWorse {
					for _, t := range train {
						if len(t) > 0 && cvSetObjective(ranks[gi], t) < cvSetObjective(ranks[0], t)-1e-12 {
							continue grid
						}
					}
				}
				if o := cvObjective(ranks[gi], train); o > bo+1e-12 {
					b, bo = gi, o
				}
			}
			if v.oneSE {
				return cvOneSE(ranks, b, train)
			}
			return b
		}
		fgi := best(0, -1)
		r := cvResult{variant: v, folds: make([][]cvFoldResult, nsets), final: v.grid[fgi], finalGI: fgi}
		for s := range nsets {
			r.folds[s] = make([]cvFoldResult, cvRepeats*cvFolds)
		}
		for rep := range cvRepeats {
			for f := range cvFolds {
				gi := best(rep, f)
				for s := range nsets {
					r.folds[s][rep*cvFolds+f] = cvFoldResult{chosen: v.grid[gi], gi: gi, ranks: ranks[gi], sel: sel[s][rep*cvFolds+f]}
				}
			}
		}
		out = append(out, r)
	}
	return out
}

// paramsDiff names the params that differ from the defaults ("defaults"
// when none does).
func paramsDiff(p ranking.Params) string {
	d := ranking.DefaultParams()
	var parts []string
	add := func(name string, v, dv float64) {
		if v != dv {
			parts = append(parts, fmt.Sprintf("%s %g", name, v))
		}
	}
	add("K1", p.K1, d.K1)
	add("BQ", p.BQuestion, d.BQuestion)
	add("BA", p.BAnswer, d.BAnswer)
	add("AW", p.AnswerWeight, d.AnswerWeight)
	add("recalled AW", p.RecalledAnswerWeight, d.RecalledAnswerWeight)
	add("verbose", p.VerboseReplyPower, d.VerboseReplyPower)
	add("stem", p.StemWeight, d.StemWeight)
	add("adjacent", p.AdjacentWeight, d.AdjacentWeight)
	add("penalty", p.NeighbourPenalty, d.NeighbourPenalty)
	add("coverage", p.CoveragePower, d.CoveragePower)
	add("session", p.SessionWeight, d.SessionWeight)
	if p.SessionWeight > 0 {
		parts = append(parts, "session window "+p.SessionWindow.String())
	}
	add("later", p.LaterPenalty, d.LaterPenalty)
	if p.NeighbourPenalty > 0 || p.LaterPenalty > 0 {
		parts = append(parts, "window "+p.NeighbourWindow.String())
	}
	if len(parts) == 0 {
		return "defaults"
	}
	return strings.Join(parts, ", ")
}

// reportCV prints, per set, each variant's held-out recall per fold of
// the first repeat next to FTS5-BM25 on the same fold, then over the folds
// of every repeat the mean, min and max, the pooled held-out recall (every
// question held out once per repeat; the mean over repeats), and how many
// folds fall below FTS5-BM25.
func reportCV(w io.Writer, sets []string, qs []cvQuestion, results []cvResult) {
	fts := make([]int8, len(qs))
	for i, q := range qs {
		fts[i] = int8(q.fts)
	}
	fmt.Fprintf(w, "leave-one-fold-out cross-validation (%d folds: LoCoMo one conversation each, LongMemEval question i in fold i mod %d, then %d more times dealt anew); constants chosen on the other folds by R@1 + R@5 (mean of the two sets), evaluated on the held-out fold\n", cvFolds, cvFolds, cvRepeats-1)
	for si, s := range sets {
		fmt.Fprintf(w, "\n%s per fold of the first repeat (held out; R@1 / R@3 / R@5 / R@10)\n\n| variant | fold | questions | chosen on the other folds | held-out | FTS5-BM25 |\n|---|---|---|---|---|---|\n", s)
		for _, r := range results {
			for f := range cvFolds {
				fr := r.folds[si][f]
				if len(fr.sel) == 0 {
					continue
				}
				fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s |\n", r.variant.name, f+1, len(fr.sel), r.variant.describe(fr.gi), cvFigures(fr.ranks, fr.sel), cvFigures(fts, fr.sel))
			}
		}
		fmt.Fprintf(w, "\n%s summary: held-out R@k, mean over the folds of %d repeats (min – max); pooled is every held-out question together, mean over repeats; Δ is memoryd − FTS5-BM25 per fold; below counts the folds (with questions) where memoryd's R@1 or R@5 is under FTS5-BM25's\n\n| variant | R@1 mean (min – max) | R@5 mean (min – max) | R@1 pooled | R@3 pooled | R@5 pooled | R@10 pooled | ΔR@1 mean (min – max) | ΔR@5 mean (min – max) | chosen on all folds | folds below FTS5 R@1 / R@5 |\n|---|---|---|---|---|---|---|---|---|---|---|\n", s, cvRepeats)
		for _, r := range results {
			fmt.Fprintf(w, "| %s |", r.variant.name)
			pooled := make([]float64, len(ks))
			var r1, r5, d1, d5 []float64
			below1, below5 := 0, 0
			for rep := range cvRepeats {
				held := make([]int8, len(qs))
				var all []int
				for f := range cvFolds {
					fr := r.folds[si][rep*cvFolds+f]
					if len(fr.sel) == 0 {
						continue
					}
					for _, i := range fr.sel {
						held[i] = fr.ranks[i]
					}
					all = append(all, fr.sel...)
					r1 = append(r1, cvRecall(fr.ranks, fr.sel, 1))
					r5 = append(r5, cvRecall(fr.ranks, fr.sel, 5))
					d1 = append(d1, cvRecall(fr.ranks, fr.sel, 1)-cvRecall(fts, fr.sel, 1))
					d5 = append(d5, cvRecall(fr.ranks, fr.sel, 5)-cvRecall(fts, fr.sel, 5))
					if d1[len(d1)-1] < -1e-12 {
						below1++
					}
					if d5[len(d5)-1] < -1e-12 {
						below5++
					}
				}
				for ki, k := range ks {
					pooled[ki] += cvRecall(held, all, k) / cvRepeats
				}
			}
			fmt.Fprintf(w, " %s | %s |", spread(r1), spread(r5))
			for ki := range ks {
				fmt.Fprintf(w, " %.3f |", pooled[ki])
			}
			fmt.Fprintf(w, " %s | %s | %s | %d / %d of %d |\n", spreadSigned(d1), spreadSigned(d5), r.variant.describe(r.finalGI), below1, below5, len(d1))
		}
		var all []int
		var r1, r5 []float64
		for k := range cvRepeats * cvFolds {
			sel := results[0].folds[si][k]
			if len(sel.sel) == 0 {
				continue
			}
			if k < cvFolds {
				all = append(all, sel.sel...)
			}
			r1 = append(r1, cvRecall(fts, sel.sel, 1))
			r5 = append(r5, cvRecall(fts, sel.sel, 5))
		}
		fmt.Fprintf(w, "| FTS5-BM25 | %s | %s |", spread(r1), spread(r5))
		for _, k := range ks {
			fmt.Fprintf(w, " %.3f |", cvRecall(fts, all, k))
		}
		fmt.Fprintf(w, " - | - | - | - |\n")
		reportPaired(w, s, si, qs, fts, results)
		reportVsLexical(w, s, si, qs, results)
		reportTimeCategories(w, s, si, qs, results)
	}
	if hasVectors(qs) {
		reportHybridCheck(w, sets, qs)
	}
}

// cvBootstraps is the number of bootstrap resamples of a set's questions.
const cvBootstraps = 10000

// reportPaired prints, per variant, what the set's questions can tell of
// memoryd's R@1 against FTS5-BM25's: each question's ΔR@1 (1 when only
// memoryd has the evidence first, −1 when only FTS5 does; its held-out
// mean over the repeats), their mean with a 95% paired bootstrap interval,
// the exact sign test of the questions won against those lost, and how
// many questions a 0.02 difference would need.
func reportPaired(w io.Writer, set string, si int, qs []cvQuestion, fts []int8, results []cvResult) {
	fmt.Fprintf(w, "\n%s paired ΔR@1 over questions (memoryd − FTS5-BM25, each question's held-out mean over the %d repeats): 95%% bootstrap interval (%d resamples of the questions), exact two-sided sign test of questions won against lost, questions needed for a ±0.02 interval and to find a true 0.02 with 80%% power at 5%%\n\n| variant | questions | won / lost | ΔR@1 mean | 95%% interval | sign test p | SD per question | for ±0.02 | for 0.02 at 80%% power |\n|---|---|---|---|---|---|---|---|---|\n", set, cvRepeats, cvBootstraps)
	for _, r := range results {
		d := map[int]float64{}
		for _, fr := range r.folds[si] {
			for _, i := range fr.sel {
				d[i] += (hit1(fr.ranks[i]) - hit1(fts[i])) / cvRepeats
			}
		}
		idx := slices.Sorted(maps.Keys(d))
		ds := make([]float64, len(idx))
		won, lost := 0, 0
		for k, i := range idx {
			ds[k] = d[i]
			if d[i] > 1e-12 {
				won++
			} else if d[i] < -1e-12 {
				lost++
			}
		}
		mean, lo, hi := bootstrapMean(ds, cvBootstraps, rand.New(rand.NewPCG(1, uint64(si))))
		sd := stddev(ds)
		fmt.Fprintf(w, "| %s | %d | %d / %d | %+.3f | %+.3f – %+.3f | %.2f | %.3f | %.0f | %.0f |\n", r.variant.name, len(ds), won, lost,
			mean, lo, hi, signTest(won, lost), sd, math.Ceil(math.Pow(1.96*sd/0.02, 2)), math.Ceil(math.Pow((1.96+0.8416)*sd/0.02, 2)))
	}
}

func hit1(rank int8) float64 {
	if rank == 1 {
		return 1
	}
	return 0
}

// bootstrapMean returns the mean of xs and the 2.5th and 97.5th
// percentiles of the means of n resamples of xs (with replacement).
func bootstrapMean(xs []float64, n int, rng *rand.Rand) (mean, lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	means := make([]float64, n)
	for b := range means {
		sum := 0.0
		for range xs {
			sum += xs[rng.IntN(len(xs))]
		}
		means[b] = sum / float64(len(xs))
	}
	slices.Sort(means)
	return mean, means[int(0.025*float64(n))], means[min(int(0.975*float64(n)), n-1)]
}

// signTest is the exact two-sided sign test's p-value of won successes
// against lost failures (ties left out): the chance, were each side as
// likely, of a split at least as uneven.
func signTest(won, lost int) float64 {
	n, k := won+lost, min(won, lost)
	if n == 0 {
		return 1
	}
	// P(X ≤ k) for X ~ Binomial(n, 1/2), doubled.
	tail, c := 0.0, 1.0 // c is C(n, i)
	for i := 0; i <= k; i++ {
		if i > 0 {
			c = c * float64(n-i+1) / float64(i)
		}
		tail += c
	}
	return min(1, 2*tail/math.Pow(2, float64(n)))
}

// stddev is the sample standard deviation of xs.
func stddev(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	mean, _, _ := stats(xs)
	ss := 0.0
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return math.Sqrt(ss / float64(len(xs)-1))
}

func cvFigures(ranks []int8, sel []int) string {
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%.3f", cvRecall(ranks, sel, k))
	}
	return strings.Join(parts, " / ")
}

// spread is "mean (min – max)" of xs.
func spread(xs []float64) string {
	mean, lo, hi := stats(xs)
	return fmt.Sprintf("%.3f (%.3f – %.3f)", mean, lo, hi)
}

func spreadSigned(xs []float64) string {
	mean, lo, hi := stats(xs)
	return fmt.Sprintf("%+.3f (%+.3f – %+.3f)", mean, lo, hi)
}

func stats(xs []float64) (mean, lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		mean += x
		lo, hi = min(lo, x), max(hi, x)
	}
	return mean / float64(len(xs)), lo, hi
}

// readLexemes adds to lexemes the english lexemes of each keyword not yet
// in it, as Postgres stems them (the store's own text search
// configuration).
func readLexemes(ctx context.Context, st *store.Store, kws []string, lexemes map[string][]string) error {
	var missing []string
	for _, k := range kws {
		if _, ok := lexemes[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	rows, err := st.Pool().Query(ctx, `SELECT k, tsvector_to_array(to_tsvector('english', k)) FROM unnest($1::text[]) k`, missing)
	if err != nil {
		return fmt.Errorf("keyword lexemes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var ls []string
		if err := rows.Scan(&k, &ls); err != nil {
			return fmt.Errorf("keyword lexemes: %w", err)
		}
		lexemes[k] = ls
	}
	return rows.Err()
}

// queryForms returns, for each of terms (a search's lexemes), the query
// words that are that lexeme's only lexeme: the forms an item's word must
// have to count fully. With guarded, a lexeme gets forms only when it is
// short (stemGuardLen runes at most) or one of its query words is the
// lexeme itself (not inflected); the others get none (every form counts).
func queryForms(terms, kws []string, lexemes map[string][]string, guarded bool) [][]string {
	out := make([][]string, len(terms))
	for i, t := range terms {
		var forms []string
		uninflected := false
		for _, k := range kws {
			if ls := lexemes[k]; len(ls) == 1 && ls[0] == t {
				forms = append(forms, k)
				uninflected = uninflected || k == t
			}
		}
		if guarded && utf8.RuneCountInString(t) > stemGuardLen && !uninflected {
			forms = nil
		}
		out[i] = forms
	}
	return out
}

// inflectedCounts returns Doc.Inflected for an item: for each term with
// forms, how many of its question and answer positions are not one of them
// (the positions minus the words that are one of the forms, at least 0).
func inflectedCounts(terms []ranking.TermCount, forms [][]string, question, answer string) []ranking.TermCount {
	out := make([]ranking.TermCount, len(terms))
	exact := func(text string, forms []string) int {
		n := 0
		for w := range textWords(text) {
			if slices.Contains(forms, w) {
				n++
			}
		}
		return n
	}
	for i, n := range terms {
		if i >= len(forms) || len(forms[i]) == 0 || !n.Present {
			continue
		}
		out[i] = ranking.TermCount{Present: true,
			Question: max(n.Question-int32(exact(question, forms[i])), 0),
			Answer:   max(n.Answer-int32(exact(answer, forms[i])), 0)}
	}
	return out
}

// textWords yields the lower-case words of s: runs of letters, digits and
// combining marks, as enricher.Keywords splits a message.
func textWords(s string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for _, w := range strings.FieldsFunc(s, func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.IsMark(r)
		}) {
			if !yield(strings.ToLower(w)) {
				return
			}
		}
	}
}

// adjacentCount counts the places in text where two words of different
// query lexemes follow each other. A word is of lexeme terms[i] when it is
// one of the query's forms of it or, 3 letters or more, starts with it
// (english stems are mostly a word's beginning).
func adjacentCount(terms []string, forms [][]string, text string) int {
	n, prev := 0, -1
	for w := range textWords(text) {
		cur := -1
		for i, t := range terms {
			if (i < len(forms) && slices.Contains(forms[i], w)) || (len(t) >= 3 && strings.HasPrefix(w, t)) {
				cur = i
				break
			}
		}
		if cur >= 0 && prev >= 0 && cur != prev {
			n++
		}
		prev = cur
	}
	return n
}

// inRange reports whether t is in [since, until), a zero bound open.
func inRange(t, since, until time.Time) bool {
	return (since.IsZero() || !t.Before(since)) && (until.IsZero() || t.Before(until))
}

// cvDoc is m as a ranking.Doc with its counts alone.
func cvDoc(m cvMatch) ranking.Doc {
	return ranking.Doc{ID: m.ID, CreatedAt: m.CreatedAt, QuestionLen: m.QuestionLen, AnswerLen: m.AnswerLen, Terms: m.Counts}
}

// cvTime is one way of using a question's time range (cvTimeRanks).
type cvTime struct {
	// filter ranks the range's candidates alone (every one when it holds
	// none), as enrich does; else out-of-range candidates rank with them,
	// their score times factor.
	filter bool
	factor float64
	// rangeDF ranks the range's candidates with the document frequencies
	// of the range (as enrich did before its ranged read returned the
	// memory's), not the memory's.
	rangeDF bool
	// margin widens the range after its end by this share of its length
	// (a range open at its start is not widened).
	margin float64
}

// cvEnrichTime is enrich's use of a question's range: its candidates
// alone, the range widened past its end by its length
// (enricher.AfterMargin), ranked with the memory's document frequencies;
// every candidate when it holds none. cvTimeRanks ranks it as cvRanks
// does, from what cvQuestions picked as enrich does, not by its own
// reckoning of the margin.
var cvEnrichTime = cvTime{filter: true, margin: 1}

func (t cvTime) String() string {
	var parts []string
	if t.filter {
		parts = append(parts, "filter")
	} else {
		parts = append(parts, fmt.Sprintf("out-of-range × %g", t.factor))
	}
	if t.rangeDF {
		parts = append(parts, "range DF")
	}
	if t.margin != 0 {
		parts = append(parts, fmt.Sprintf("margin %g × length", t.margin))
	}
	return strings.Join(parts, ", ")
}

// cvTimeRanks is cvRanks with the default constants, each ranged question
// ranked as t says.
func cvTimeRanks(qs []cvQuestion, t cvTime) []int8 {
	out := cvRanks(qs, ranking.DefaultParams(), stemNone)
	if t == cvEnrichTime {
		return out
	}
	p := ranking.DefaultParams()
	for i, q := range qs {
		if !q.ranged {
			continue
		}
		until := q.until
		if t.margin != 0 && !q.since.IsZero() {
			until = until.Add(time.Duration(t.margin * float64(q.until.Sub(q.since))))
		}
		in := make([]bool, len(q.all))
		var inDocs []ranking.Doc
		var inIdx []int
		for d, doc := range q.all {
			in[d] = inRange(doc.CreatedAt, q.since, until)
			if in[d] {
				inDocs = append(inDocs, doc)
				inIdx = append(inIdx, d)
			}
		}
		type scored struct {
			doc   int
			score float64
		}
		var hits []scored
		full := p.Rank(q.coll, q.all, ranking.Query{At: q.at, Limit: len(q.all)})
		if t.rangeDF && len(inDocs) > 0 {
			for _, h := range p.Rank(q.coll, inDocs, ranking.Query{At: q.at, Limit: len(inDocs)}) {
				hits = append(hits, scored{inIdx[h.Doc], h.Score})
			}
			if !t.filter {
				for _, h := range full {
					if !in[h.Doc] {
						hits = append(hits, scored{h.Doc, h.Score * t.factor})
					}
				}
			}
		} else {
			for _, h := range full {
				switch {
				case in[h.Doc]:
					hits = append(hits, scored{h.Doc, h.Score})
				case !t.filter || len(inDocs) == 0:
					f := t.factor
					if t.filter {
						f = 1
					}
					hits = append(hits, scored{h.Doc, h.Score * f})
				}
			}
		}
		if t.filter && len(inDocs) == 0 {
			hits = hits[:0]
			for _, h := range full {
				hits = append(hits, scored{h.Doc, h.Score})
			}
		}
		slices.SortStableFunc(hits, func(a, b scored) int {
			if c := cmp.Compare(b.score, a.score); c != 0 {
				return c
			}
			if in[a.doc] != in[b.doc] {
				if in[a.doc] {
					return -1
				}
				return 1
			}
			x, y := q.all[a.doc], q.all[b.doc]
			if c := y.CreatedAt.Compare(x.CreatedAt); c != 0 {
				return c
			}
			return cmp.Compare(y.ID, x.ID)
		})
		out[i] = 0
		for r, h := range hits {
			if r == 10 {
				break
			}
			if q.evidence[q.allEvents[h.doc]] {
				out[i] = int8(r + 1)
				break
			}
		}
	}
	return out
}

// cvTimeVariants are the ways of using a question's time range measured:
// each grid starts with enrich's (cvEnrichTime).
func cvTimeVariants() []cvVariant {
	current := cvEnrichTime
	margins := []float64{0.25, 0.5, 1, 2}
	factors := []float64{1e-6, 0.5, 0.7, 0.8, 0.9, 0.95, 1}
	filterMargin := []cvTime{current}
	for _, df := range []bool{true, false} {
		for _, m := range append([]float64{0}, margins...) {
			if t := (cvTime{filter: true, rangeDF: df, margin: m}); t != current {
				filterMargin = append(filterMargin, t)
			}
		}
	}
	rangeMargin := []cvTime{current}
	for _, m := range []float64{0, 0.25, 0.5, 2} {
		rangeMargin = append(rangeMargin, cvTime{filter: true, margin: m})
	}
	boost := []cvTime{current}
	for _, f := range factors {
		boost = append(boost, cvTime{factor: f})
	}
	boostMargin := []cvTime{current}
	for _, m := range append([]float64{0}, margins...) {
		for _, f := range factors {
			boostMargin = append(boostMargin, cvTime{factor: f, margin: m})
		}
	}
	var out []cvVariant
	for _, g := range []struct {
		name  string
		times []cvTime
	}{
		{"time range: margin after its end (memory's DF, as enrich ranks)", rangeMargin},
		{"time range: filter, margin after its end", filterMargin},
		{"time range: boost (out-of-range factor)", boost},
		{"time range: boost × margin", boostMargin},
	} {
		grid := make([]ranking.Params, len(g.times))
		for i := range grid {
			grid[i] = ranking.DefaultParams()
		}
		out = append(out, cvVariant{name: g.name, grid: grid, times: g.times, forms: stemNone})
	}
	return out
}

// reportTimeCategories prints, for the time variants, the pooled held-out
// R@1 / R@5 / R@10 (mean over repeats) of each question category, and of
// the ranged questions alone.
func reportTimeCategories(w io.Writer, set string, si int, qs []cvQuestion, results []cvResult) {
	groups := map[string][]int{}
	for i, q := range qs {
		if q.set != si {
			continue
		}
		groups[q.category] = append(groups[q.category], i)
		if q.ranged {
			groups["(ranged questions)"] = append(groups["(ranged questions)"], i)
		}
	}
	cats := slices.Sorted(maps.Keys(groups))
	fmt.Fprintf(w, "\n%s by category, pooled held-out R@1 / R@5 / R@10 (mean over repeats)\n\n| variant |", set)
	for _, c := range cats {
		fmt.Fprintf(w, " %s (%d) |", c, len(groups[c]))
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---|", len(cats)))
	for ri, r := range results {
		if ri != 0 && r.variant.times == nil {
			continue
		}
		held := make([][]int8, cvRepeats)
		for rep := range cvRepeats {
			held[rep] = make([]int8, len(qs))
			for f := range cvFolds {
				fr := r.folds[si][rep*cvFolds+f]
				for _, i := range fr.sel {
					held[rep][i] = fr.ranks[i]
				}
			}
		}
		fmt.Fprintf(w, "| %s |", r.variant.name)
		for _, c := range cats {
			var fig [3]float64
			for rep := range cvRepeats {
				for ki, k := range []int{1, 5, 10} {
					fig[ki] += cvRecall(held[rep], groups[c], k) / cvRepeats
				}
			}
			fmt.Fprintf(w, " %.3f / %.3f / %.3f |", fig[0], fig[1], fig[2])
		}
		fmt.Fprintln(w)
	}
}
