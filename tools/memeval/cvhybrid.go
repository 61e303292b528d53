package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/ranking"
	"github.com/memoryd/memoryd/store"
)

// Cross-validation of hybrid retrieval's vector side (with -embed-local or
// -embed-base-url). cvRead records, per question, the vector side's
// searches as enrich runs them (enricher.QueryVector, enricher.
// SearchVectors: the 50 most similar items with their cosines, the
// similarity's mean and spread over the user's items, the items searched),
// and hybrid enrich's own top 10; the offline ranking (cvHybridRanked)
// scores, picks and fuses them as the enricher does (hybrid.go: pick,
// fuse), with any ranking.Hybrid constants or by reciprocal rank, and its
// top 10 with the current constants is checked against enrich's.

// cvVector is a question's vector side: its searches and what hybrid
// enrich answered.
type cvVector struct {
	// None says enrich embeds nothing for the question (a time alone):
	// it is ranked lexically.
	None bool
	// Full is the search of all the user's items (the unranged read's);
	// Ranged, for a Ranged question, the search of its ranked range
	// [Since, RankedUntil).
	Full, Ranged cvVectorSearch
	// Enrich are hybrid enrich's top 10 event ids (evalShape(10)).
	Enrich []string
}

// cvVectorSearch is enricher.VectorSearch with each hit's event id.
type cvVectorSearch struct {
	Hits          []cvVectorHit
	N, Population int
	Mean, Std     float64
}

type cvVectorHit struct {
	ID        int64
	CreatedAt time.Time
	Cos       float64
	EventID   string
}

// cvHybrid is one way of ranking with the vector side: fused with
// ranking.Hybrid constants (enrich's way), by reciprocal rank (rrf), or
// by the vector alone.
type cvHybrid struct {
	h          ranking.Hybrid
	vectorOnly bool
	// rrf, when W is above 0, ranks by reciprocal-rank fusion of the
	// lexical ranking and the vector side's hits by similarity: those
	// scoring above 0 under h when gated, all 50 otherwise.
	rrf   cvFusion
	gated bool
}

func (c cvHybrid) String() string {
	switch {
	case c.vectorOnly:
		return "vector only"
	case c.rrf.W > 0:
		g := "all 50 hits"
		if c.gated {
			g = "hits scoring > 0"
		}
		return fmt.Sprintf("RRF K %g, W %g, %s", c.rrf.K, c.rrf.W, g)
	}
	d := ranking.DefaultHybrid()
	var parts []string
	if c.h.VectorHalf != d.VectorHalf {
		parts = append(parts, fmt.Sprintf("VectorHalf %g", c.h.VectorHalf))
	}
	if c.h.NoiseScale != d.NoiseScale {
		parts = append(parts, fmt.Sprintf("offset × %g", c.h.NoiseScale))
	}
	if c.h.VectorWeight != d.VectorWeight {
		parts = append(parts, fmt.Sprintf("weight %g", c.h.VectorWeight))
	}
	if len(parts) == 0 {
		return "current hybrid"
	}
	return strings.Join(parts, ", ")
}

// cvHybridLimit is the max_results of the hybrid reads (evalShape(10)):
// the vector side picks the items that can make a fused top 10.
const cvHybridLimit = 10

// readVectors records q's vector side in ci (its Keywords, Ranged, Since
// and RankedUntil set): enrich's query vector searched over the user's
// vectors uv as enrich's reads search them, and hybrid enrich's answer
// top (its event ids).
func readVectors(ctx context.Context, in *instance, uv store.UserVectors, events map[int64]string, user string, q question, ci *cvInput, top []string) error {
	qv, err := enricher.QueryVector(ctx, in.emb, q.text, q.at)
	if err != nil {
		return fmt.Errorf("query vector of %q: %w", q.text, err)
	}
	v := &cvVector{None: qv == nil, Enrich: top}
	if qv != nil {
		search := func(sq store.SearchQuery) (cvVectorSearch, error) {
			r, err := enricher.SearchVectors(uv, qv, sq)
			if err != nil {
				return cvVectorSearch{}, err
			}
			out := cvVectorSearch{N: r.N, Population: r.Population, Mean: r.Mean, Std: r.Std}
			for _, h := range r.Hits {
				out.Hits = append(out.Hits, cvVectorHit{ID: h.ID, CreatedAt: h.CreatedAt, Cos: h.Cos, EventID: events[h.ID]})
			}
			return out, nil
		}
		if v.Full, err = search(store.SearchQuery{UserID: user}); err != nil {
			return err
		}
		if ci.Ranged {
			if v.Ranged, err = search(store.SearchQuery{UserID: user, Since: ci.Since, Until: ci.RankedUntil}); err != nil {
				return err
			}
		}
	}
	ci.Vector = v
	return nil
}

// userEventIDs maps each of the user's items to its event id.
func userEventIDs(ctx context.Context, st *store.Store, user string) (map[int64]string, error) {
	out := map[int64]string{}
	for after := (store.ContextCursor{}); ; {
		page, err := st.ListContext(ctx, user, after, 1000)
		if err != nil {
			return nil, err
		}
		for _, it := range page {
			out[it.ID] = it.EventID
		}
		if len(page) < 1000 {
			return out, nil
		}
		last := page[len(page)-1]
		after = store.ContextCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
}

// cvHybridRanked returns q's top limit event ids ranked as hy says.
// A question enrich answers without a vector (Newest, Vector.None) keeps
// its lexical ranking, as enrich does.
func cvHybridRanked(q *cvQuestion, hy cvHybrid, limit int) []string {
	v := q.vector
	if hy.vectorOnly {
		if v == nil || v.None {
			return nil
		}
		var out []string
		for _, h := range v.Full.Hits[:min(len(v.Full.Hits), limit)] {
			out = append(out, h.EventID)
		}
		return out
	}
	if q.ranged && !v.None {
		// enrich's ranged read first, the whole memory when it ranks
		// nothing (enricher's relevant).
		if out := cvFuse(q, q.rangeDocs, q.rangeEvents, q.rangeDF, &v.Ranged, hy, limit); len(out) > 0 {
			return out
		}
		return cvFuse(q, q.all, q.allEvents, nil, &v.Full, hy, limit)
	}
	if v.None {
		return cvFuse(q, q.docs, q.events, q.df, nil, hy, limit)
	}
	return cvFuse(q, q.docs, q.events, q.df, &v.Full, hy, limit)
}

// cvFuse ranks docs (their event ids events, document frequencies df)
// with the vector search s (nil: none) as hy says: enricher's pick and
// fuse, or a reciprocal-rank fusion.
func cvFuse(q *cvQuestion, docs []ranking.Doc, events []string, df []int, s *cvVectorSearch, hy cvHybrid, limit int) []string {
	p := ranking.DefaultParams()
	lexHits := p.Rank(q.coll, docs, ranking.Query{At: q.at, Limit: len(docs), AsksReply: q.asksReply, DF: df})
	type cand struct {
		id      int64
		created time.Time
		event   string
		l, v    float64
		lexRank int // 1-based; 0 none
		vecRank int
	}
	byID := map[int64]*cand{}
	var cands []*cand
	add := func(id int64, created time.Time, event string) *cand {
		if c := byID[id]; c != nil {
			return c
		}
		c := &cand{id: id, created: created, event: event}
		byID[id] = c
		cands = append(cands, c)
		return c
	}
	for r, h := range lexHits {
		c := add(docs[h.Doc].ID, docs[h.Doc].CreatedAt, events[h.Doc])
		c.l, c.lexRank = h.Score, r+1
	}
	// The vector side's scores (pick): hits best first, down to the first
	// at 0; the items that can make a fused top limit join the
	// candidates, the others count only when the keywords found them.
	var picks []cvVectorHit
	vec := map[int64]float64{}
	if s != nil {
		floor := 0.0
		for _, h := range s.Hits {
			v := hy.h.VectorScore(h.Cos, s.Mean, s.Std, s.Population, s.N)
			if v <= 0 {
				break
			}
			vec[h.ID] = v
			if v > floor {
				picks = append(picks, h)
				if len(picks) == limit {
					floor = v * (1 - p.RecencyWeight)
				}
			}
		}
	}
	type scored struct {
		c     *cand
		score float64
	}
	var kept []scored
	if hy.rrf.W > 0 {
		// Ranks of the vector list: the gated hits (those the vector side
		// scores above 0) or all of them.
		if s != nil {
			for r, h := range s.Hits {
				if hy.gated && vec[h.ID] <= 0 {
					break
				}
				add(h.ID, h.CreatedAt, h.EventID).vecRank = r + 1
			}
		}
		for _, c := range cands {
			score := 0.0
			if c.lexRank > 0 && c.lexRank <= cvFusionDepth {
				score += 1 / (hy.rrf.K + float64(c.lexRank))
			}
			if c.vecRank > 0 {
				score += hy.rrf.W / (hy.rrf.K + float64(c.vecRank))
			}
			if score > 0 {
				kept = append(kept, scored{c, score})
			}
		}
	} else {
		for _, h := range picks {
			add(h.ID, h.CreatedAt, h.EventID)
		}
		for _, c := range cands {
			f := c.l
			if v := vec[c.id]; v > 0 {
				f = hy.h.Fuse(c.l, v, p.Recency(q.at.Sub(c.created).Seconds()))
			}
			if f > 0 {
				kept = append(kept, scored{c, f})
			}
		}
	}
	// As fuse: best first, then newest, then highest id.
	slices.SortFunc(kept, func(x, y scored) int {
		if c := cmp.Compare(y.score, x.score); c != 0 {
			return c
		}
		if c := y.c.created.Compare(x.c.created); c != 0 {
			return c
		}
		return cmp.Compare(y.c.id, x.c.id)
	})
	out := make([]string, 0, min(len(kept), limit))
	for _, k := range kept[:min(len(kept), limit)] {
		out = append(out, k.c.event)
	}
	return out
}

// cvHybridRanks returns each question's first-hit rank (0: none in the
// top 10) ranked as hy says.
func cvHybridRanks(qs []cvQuestion, hy cvHybrid) []int8 {
	out := make([]int8, len(qs))
	for i := range qs {
		q := &qs[i]
		if q.newest {
			out[i] = int8(q.newestRank)
			continue
		}
		out[i] = int8(firstHit(cvHybridRanked(q, hy, 10), q.evidence))
	}
	return out
}

// hasVectors says whether the questions were read with embeddings.
func hasVectors(qs []cvQuestion) bool {
	return slices.ContainsFunc(qs, func(q cvQuestion) bool { return q.vector != nil })
}

// cvHybridVariants are the vector side's constants measured, each grid
// starting with the current ones; with them the vector alone and the
// current constants (grids of one).
func cvHybridVariants() []cvVariant {
	def := ranking.DefaultHybrid()
	one := func(set func(h *ranking.Hybrid, v float64), values ...float64) []cvHybrid {
		var out []cvHybrid
		for _, v := range values {
			h := def
			set(&h, v)
			out = append(out, cvHybrid{h: h})
		}
		return out
	}
	half := func(h *ranking.Hybrid, v float64) { h.VectorHalf = v }
	noise := func(h *ranking.Hybrid, v float64) { h.NoiseScale = v }
	weight := func(h *ranking.Hybrid, v float64) { h.VectorWeight = v }
	halves := []float64{2, 0.5, 1, 3, 4}
	noises := []float64{1, 0.5, 0.75, 1.25, 0}
	weights := []float64{1, 0.5, 0.75, 1.5}
	var joint []cvHybrid
	for _, a := range halves {
		for _, b := range noises {
			for _, c := range weights {
				joint = append(joint, cvHybrid{h: ranking.Hybrid{VectorHalf: a, NoiseScale: b, VectorWeight: c}})
			}
		}
	}
	rrf := []cvHybrid{{h: def}}
	for _, gated := range []bool{true, false} {
		for _, k := range []float64{10, 60} {
			for _, w := range []float64{0.5, 1} {
				rrf = append(rrf, cvHybrid{h: def, rrf: cvFusion{K: k, W: w}, gated: gated})
			}
		}
	}
	vs := []cvVariant{
		{name: "hybrid off: vector only", hybrids: []cvHybrid{{vectorOnly: true}}},
		{name: "hybrid: current constants", hybrids: []cvHybrid{{h: def}}},
		{name: "hybrid: VectorHalf", hybrids: one(half, halves...)},
		{name: "hybrid: chance offset × noiseMax(n)", hybrids: one(noise, noises...)},
		{name: "hybrid: vector weight", hybrids: one(weight, weights...)},
		{name: "hybrid: VectorHalf × offset × weight", hybrids: joint},
		{name: "hybrid: RRF of lexical and vector ranks, K × W", hybrids: rrf},
		{name: "hybrid: VectorHalf × offset × weight, no set worse", hybrids: joint, noSetWorse: true},
	}
	for i := range vs {
		vs[i].forms = stemNone
		vs[i].grid = make([]ranking.Params, len(vs[i].hybrids))
		for j := range vs[i].grid {
			vs[i].grid[j] = ranking.DefaultParams()
		}
	}
	return vs
}

// reportHybridCheck prints, per set, on how many questions the offline
// hybrid ranking with the current constants gives exactly hybrid enrich's
// top 10, and its first hit's rank.
func reportHybridCheck(w io.Writer, sets []string, qs []cvQuestion) {
	fmt.Fprintf(w, "\nhybrid reproduction: the offline ranking with the current constants against hybrid enrich's reply (top 10 event ids, in order; first-hit rank)\n\n| set | questions | top 10 equal | first-hit rank equal |\n|---|---|---|---|\n")
	for si, s := range sets {
		n, same, sameRank := 0, 0, 0
		for i := range qs {
			q := &qs[i]
			if q.set != si || q.vector == nil {
				continue
			}
			n++
			var got []string
			if q.newest {
				got = q.vector.Enrich // not ranked: what enrich answered
			} else {
				got = cvHybridRanked(q, cvHybrid{h: ranking.DefaultHybrid()}, 10)
			}
			if slices.Equal(got, q.vector.Enrich) {
				same++
			}
			if q.newest || firstHit(got, q.evidence) == firstHit(q.vector.Enrich, q.evidence) {
				sameRank++
			}
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d |\n", s, n, same, sameRank)
	}
}

// reportVsLexical prints, per set, each hybrid variant's held-out R@1 and
// R@5 against enrich's lexical ranking (results[0], the current
// constants) per fold, and the paired per-question ΔR@1 against it.
func reportVsLexical(w io.Writer, set string, si int, qs []cvQuestion, results []cvResult) {
	lex := results[0].folds[si][0].ranks // the current constants: one grid entry, the same ranks in every fold
	var hy []cvResult
	for _, r := range results {
		if r.variant.hybrids != nil {
			hy = append(hy, r)
		}
	}
	if len(hy) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s against lexical enrich (current constants, no embeddings): Δ held-out R@1 and R@5 per fold, mean over the folds of %d repeats (min – max), and the folds where the variant is below lexical\n\n| variant | ΔR@1 mean (min – max) | ΔR@5 mean (min – max) | ΔR@10 mean (min – max) | folds below lexical R@1 / R@5 |\n|---|---|---|---|---|\n", set, cvRepeats)
	for _, r := range hy {
		var d1, d5, d10 []float64
		below1, below5 := 0, 0
		for _, fr := range r.folds[si] {
			if len(fr.sel) == 0 {
				continue
			}
			d1 = append(d1, cvRecall(fr.ranks, fr.sel, 1)-cvRecall(lex, fr.sel, 1))
			d5 = append(d5, cvRecall(fr.ranks, fr.sel, 5)-cvRecall(lex, fr.sel, 5))
			d10 = append(d10, cvRecall(fr.ranks, fr.sel, 10)-cvRecall(lex, fr.sel, 10))
			if d1[len(d1)-1] < -1e-12 {
				below1++
			}
			if d5[len(d5)-1] < -1e-12 {
				below5++
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %d / %d of %d |\n", r.variant.name, spreadSigned(d1), spreadSigned(d5), spreadSigned(d10), below1, below5, len(d1))
	}
	reportPairedVs(w, set, si, qs, lex, "lexical", hy)
	// Which constants the folds chose, over every fold of every repeat.
	fmt.Fprintf(w, "\n%s hybrid constants chosen by the folds (of %d: %d repeats × %d folds)\n\n| variant | chosen (folds) |\n|---|---|\n", set, cvRepeats*cvFolds, cvRepeats, cvFolds)
	for _, r := range hy {
		if len(r.variant.hybrids) < 2 {
			continue
		}
		count := map[int]int{}
		for _, fr := range r.folds[si] {
			count[fr.gi]++
		}
		gis := make([]int, 0, len(count))
		for gi := range count {
			gis = append(gis, gi)
		}
		slices.SortFunc(gis, func(a, b int) int {
			if c := cmp.Compare(count[b], count[a]); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		var parts []string
		for _, gi := range gis {
			parts = append(parts, fmt.Sprintf("%s (%d)", r.variant.describe(gi), count[gi]))
		}
		fmt.Fprintf(w, "| %s | %s |\n", r.variant.name, strings.Join(parts, "; "))
	}
}

// reportPairedVs is reportPaired against base's ranks (named name)
// instead of FTS5-BM25's.
func reportPairedVs(w io.Writer, set string, si int, qs []cvQuestion, base []int8, name string, results []cvResult) {
	fmt.Fprintf(w, "\n%s paired ΔR@1 over questions (variant − %s, each question's held-out mean over the %d repeats): 95%% bootstrap interval (%d resamples of the questions), exact two-sided sign test of questions won against lost\n\n| variant | questions | won / lost | ΔR@1 mean | 95%% interval | sign test p |\n|---|---|---|---|---|---|\n", set, name, cvRepeats, cvBootstraps)
	for _, r := range results {
		d := map[int]float64{}
		for _, fr := range r.folds[si] {
			for _, i := range fr.sel {
				d[i] += (hit1(fr.ranks[i]) - hit1(base[i])) / cvRepeats
			}
		}
		ds := make([]float64, 0, len(d))
		won, lost := 0, 0
		for _, i := range slices.Sorted(maps.Keys(d)) {
			ds = append(ds, d[i])
			if d[i] > 1e-12 {
				won++
			} else if d[i] < -1e-12 {
				lost++
			}
		}
		mean, lo, hi := bootstrapMean(ds, cvBootstraps, rand.New(rand.NewPCG(1, uint64(si))))
		fmt.Fprintf(w, "| %s | %d | %d / %d | %+.3f | %+.3f – %+.3f | %.2g |\n", r.variant.name, len(ds), won, lost, mean, lo, hi, signTest(won, lost))
	}
}
