package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/ranking"
	"github.com/memoryd/memoryd/store"
)

// cvFolds is the number of cross-validation folds: LoCoMo's 5 dev
// conversations, one a fold, and LongMemEval's questions in 5 groups
// (question i in group i mod 5). Fold f holds out LoCoMo conversation f and
// LongMemEval group f together, so one choice of constants serves both sets,
// as the service's one set of constants does.
const cvFolds = 5

// cvQuestion is one question ready to be ranked offline: its candidates as
// enrich reads them (store.SearchContext with enricher.Keywords, no scope),
// converted once to the ranking's input.
type cvQuestion struct {
	set  int // index in the run's datasets
	fold int
	coll ranking.Collection
	docs []ranking.Doc
	// inflected are docs with Doc.Inflected filled: [stemAll] for every
	// lexeme, [stemGuarded] only for short lexemes and query words that are
	// their own lexeme (see inflectedCounts).
	inflected [2][]ranking.Doc
	events    []string // event id of each doc
	at        time.Time
	evidence  map[string]bool
	fts       int // FTS5-BM25's first-hit rank, 0 when none in the top 10
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
}

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
	adjacent := cvGrid(def, func(p *ranking.Params, v float64) { p.AdjacentWeight = v }, 0, 0.25, 0.5, 1, 2)
	answer := cvGrid(cvGrid(def, aw, 0.6, 0.4, 0.8, 1.0), ba, 0.5, 0.25, 0.75, 0.9)
	bm25f := cvGrid(cvGrid(answer, bq, 0.5, 0.25, 0.75), k1, 1.2, 0.9, 1.6, 2.0)
	neighbour := func(base []ranking.Params) []ranking.Params {
		out := append([]ranking.Params(nil), base...) // penalty 0 first
		on := cvGrid(cvGrid(base, win, 2, 10, 60), pen, 0.1, 0.2, 0.35)
		return append(out, on...)
	}
	return []cvVariant{
		{"current constants", def, stemNone},
		{"answer half: AnswerWeight × BAnswer", answer, stemNone},
		{"BM25F: K1 × BQuestion × BAnswer × AnswerWeight", bm25f, stemNone},
		{"neighbour penalty × window", neighbour(def), stemNone},
		{"BM25F + neighbour penalty", neighbour(bm25f), stemNone},
		{"stem weight, every lexeme", stem, stemAll},
		{"stem weight, short lexeme or uninflected query word", stem, stemGuarded},
		{"adjacent query words", adjacent, stemNone},
	}
}

// cvQuestions reads every question's candidates from memoryd's store, and
// FTS5-BM25's ranks from the baseline.
func cvQuestions(ctx context.Context, in *instance, sets []dataset, fts ranker) ([]cvQuestion, error) {
	st, err := in.app.Store(ctx)
	if err != nil {
		return nil, err
	}
	lexemes := map[string][]string{} // keyword: its english lexemes
	var out []cvQuestion
	for si, s := range sets {
		for hi, h := range s.haystacks {
			ranked, err := fts.rank(ctx, h, 10)
			if err != nil {
				return nil, fmt.Errorf("%s on %s %s: %w", fts.name(), s.name, h.name, err)
			}
			for qi, q := range h.questions {
				kws := enricher.Keywords(q.text)
				c, err := st.SearchContext(ctx, store.SearchQuery{UserID: in.userID(h), Keywords: kws})
				if err != nil {
					return nil, err
				}
				if err := readLexemes(ctx, st, kws, lexemes); err != nil {
					return nil, err
				}
				forms := [2][][]string{queryForms(c.Terms, kws, lexemes, false), queryForms(c.Terms, kws, lexemes, true)}
				cq := cvQuestion{set: si, fold: hi % cvFolds, coll: ranking.Collection(c.Stats), at: q.at, evidence: q.evidence,
					fts: firstHit(ranked[qi], q.evidence)}
				for _, m := range c.Matches {
					terms := make([]ranking.TermCount, len(m.Terms))
					for i, n := range m.Terms {
						terms[i] = ranking.TermCount(n)
					}
					d := ranking.Doc{ID: m.Item.ID, CreatedAt: m.Item.CreatedAt,
						QuestionLen: m.QuestionLen, AnswerLen: m.AnswerLen, Terms: terms,
						Adjacent: adjacentCount(c.Terms, forms[stemAll], m.Item.Question) + adjacentCount(c.Terms, forms[stemAll], m.Item.Answer)}
					cq.docs = append(cq.docs, d)
					for fi, f := range forms {
						d.Inflected = inflectedCounts(terms, f, m.Item.Question, m.Item.Answer)
						cq.inflected[fi] = append(cq.inflected[fi], d)
					}
					cq.events = append(cq.events, m.Item.EventID)
				}
				out = append(out, cq)
			}
		}
	}
	return out, nil
}

// cvRanks returns each question's first-hit rank (0: none in the top 10)
// under p.
func cvRanks(qs []cvQuestion, p ranking.Params, forms int) []int8 {
	out := make([]int8, len(qs))
	for i, q := range qs {
		docs := q.docs
		if forms != stemNone {
			docs = q.inflected[forms]
		}
		for r, h := range p.Rank(q.coll, docs, ranking.Query{At: q.at, Limit: 10}) {
			if q.evidence[q.events[h.Doc]] {
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
		sum += cvRecall(ranks, sel, 1) + cvRecall(ranks, sel, 5)
		n++
	}
	return sum / float64(max(n, 1))
}

// cvFoldResult is one variant's held-out figures on one fold of one set.
type cvFoldResult struct {
	chosen ranking.Params
	ranks  []int8 // of the held-out questions, under chosen
	sel    []int  // the held-out questions
}

// cvResult is a variant's cross-validation: per set, per fold.
type cvResult struct {
	variant cvVariant
	folds   [][cvFolds]cvFoldResult // [set][fold]
	final   ranking.Params          // chosen on every fold
}

// crossValidate runs leave-one-fold-out cross-validation of each variant:
// for each fold, the params of the variant's grid with the best objective on
// the other folds are chosen, and the held-out fold is ranked with them.
func crossValidate(qs []cvQuestion, nsets int, variants []cvVariant, progress func(string, ...any)) []cvResult {
	// sel[set][fold] are the question indexes of that set and fold.
	sel := make([][cvFolds][]int, nsets)
	for i, q := range qs {
		sel[q.set][q.fold] = append(sel[q.set][q.fold], i)
	}
	var out []cvResult
	for _, v := range variants {
		progress("cross-validating %q (%d constant sets)\n", v.name, len(v.grid))
		ranks := make([][]int8, len(v.grid))
		for gi, p := range v.grid {
			ranks[gi] = cvRanks(qs, p, v.forms)
		}
		best := func(hold int) int {
			train := make([][]int, nsets)
			for s := range nsets {
				for f := range cvFolds {
					if f != hold {
						train[s] = append(train[s], sel[s][f]...)
					}
				}
			}
			b, bo := 0, math.Inf(-1)
			for gi := range v.grid {
				if o := cvObjective(ranks[gi], train); o > bo+1e-12 {
					b, bo = gi, o
				}
			}
			return b
		}
		r := cvResult{variant: v, folds: make([][cvFolds]cvFoldResult, nsets), final: v.grid[best(-1)]}
		for f := range cvFolds {
			gi := best(f)
			for s := range nsets {
				r.folds[s][f] = cvFoldResult{chosen: v.grid[gi], ranks: ranks[gi], sel: sel[s][f]}
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
	add("stem", p.StemWeight, d.StemWeight)
	add("adjacent", p.AdjacentWeight, d.AdjacentWeight)
	add("penalty", p.NeighbourPenalty, d.NeighbourPenalty)
	if p.NeighbourPenalty > 0 {
		parts = append(parts, "window "+p.NeighbourWindow.String())
	}
	if len(parts) == 0 {
		return "defaults"
	}
	return strings.Join(parts, ", ")
}

// reportCV prints, per set, each variant's held-out recall per fold next to
// FTS5-BM25 on the same fold, then the mean, min and max over the folds
// and the pooled held-out recall.
func reportCV(w io.Writer, sets []dataset, qs []cvQuestion, results []cvResult) {
	fts := make([]int8, len(qs))
	for i, q := range qs {
		fts[i] = int8(q.fts)
	}
	fmt.Fprintf(w, "leave-one-fold-out cross-validation (%d folds: LoCoMo one conversation each, LongMemEval question i in fold i mod %d); constants chosen on the other folds by R@1 + R@5 (mean of the two sets), evaluated on the held-out fold\n", cvFolds, cvFolds)
	for si, s := range sets {
		fmt.Fprintf(w, "\n%s per fold (held out; R@1 / R@3 / R@5 / R@10)\n\n| variant | fold | questions | chosen on the other folds | held-out | FTS5-BM25 |\n|---|---|---|---|---|---|\n", s.name)
		for _, r := range results {
			for f := range cvFolds {
				fr := r.folds[si][f]
				if len(fr.sel) == 0 {
					continue
				}
				fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s |\n", r.variant.name, f+1, len(fr.sel), paramsDiff(fr.chosen), cvFigures(fr.ranks, fr.sel), cvFigures(fts, fr.sel))
			}
		}
		fmt.Fprintf(w, "\n%s summary: held-out R@k, mean over folds (min – max); pooled is every held-out question together; Δ is memoryd − FTS5-BM25 per fold\n\n| variant | R@1 mean (min – max) | R@5 mean (min – max) | R@1 pooled | R@3 pooled | R@5 pooled | R@10 pooled | ΔR@1 mean (min – max) | ΔR@5 mean (min – max) | chosen on all folds |\n|---|---|---|---|---|---|---|---|---|---|\n", s.name)
		for _, r := range results {
			fmt.Fprintf(w, "| %s |", r.variant.name)
			var pooled []int8
			var all []int
			var r1, r5, d1, d5 []float64
			for f := range cvFolds {
				fr := r.folds[si][f]
				if len(fr.sel) == 0 {
					continue
				}
				if pooled == nil {
					pooled = make([]int8, len(qs))
				}
				for _, i := range fr.sel {
					pooled[i] = fr.ranks[i]
				}
				all = append(all, fr.sel...)
				r1 = append(r1, cvRecall(fr.ranks, fr.sel, 1))
				r5 = append(r5, cvRecall(fr.ranks, fr.sel, 5))
				d1 = append(d1, cvRecall(fr.ranks, fr.sel, 1)-cvRecall(fts, fr.sel, 1))
				d5 = append(d5, cvRecall(fr.ranks, fr.sel, 5)-cvRecall(fts, fr.sel, 5))
			}
			fmt.Fprintf(w, " %s | %s |", spread(r1), spread(r5))
			for _, k := range ks {
				fmt.Fprintf(w, " %.3f |", cvRecall(pooled, all, k))
			}
			fmt.Fprintf(w, " %s | %s | %s |\n", spreadSigned(d1), spreadSigned(d5), paramsDiff(r.final))
		}
		var all []int
		var r1, r5 []float64
		for f := range cvFolds {
			sel := results[0].folds[si][f].sel
			if len(sel) == 0 {
				continue
			}
			all = append(all, sel...)
			r1 = append(r1, cvRecall(fts, sel, 1))
			r5 = append(r5, cvRecall(fts, sel, 5))
		}
		fmt.Fprintf(w, "| FTS5-BM25 | %s | %s |", spread(r1), spread(r5))
		for _, k := range ks {
			fmt.Fprintf(w, " %.3f |", cvRecall(fts, all, k))
		}
		fmt.Fprintf(w, " - | - | - |\n")
	}
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
			Question: max(n.Question-exact(question, forms[i]), 0),
			Answer:   max(n.Answer-exact(answer, forms[i]), 0)}
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
