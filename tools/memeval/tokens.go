package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/memoryd/memoryd/events"
)

// tokenRun is one configuration of the token measurement on one dataset:
// every question asked with one facts selection and one request shape,
// under one fact load.
type tokenRun struct {
	set     string
	load    string // what facts the users hold
	facts   string // events.FactsRelevant or events.FactsAll
	shape   string
	hits    []hitRow    // per question; rank over the reply's items, which are exactly the injected ones
	replies []replyStat // per question
}

// measureTokens asks every question of sets with each facts selection
// (relevant, all) and each request shape (the evaluation's, memoryd's
// defaults), recording the facts each user holds (load names them) and the injected tokens and facts and where the first
// evidence item was.
func measureTokens(ctx context.Context, in *instance, sets []dataset, load string, k int) ([]tokenRun, error) {
	var out []tokenRun
	for _, s := range sets {
		counts, err := in.factCounts(ctx, s.haystacks)
		if err != nil {
			return nil, err
		}
		load := loadLabel(load, counts)
		for _, facts := range []string{events.FactsRelevant, events.FactsAll} {
			for _, shape := range []enrichShape{evalShape(k), defaultShape()} {
				m := &memorydRanker{in: in, facts: facts, shape: &shape}
				run := tokenRun{set: s.name, load: load, facts: facts, shape: shape.name}
				for _, h := range s.haystacks {
					ranked, err := m.rank(ctx, h, k)
					if err != nil {
						return nil, fmt.Errorf("memoryd (facts %s, %s) on %s %s: %w", facts, shape.name, s.name, h.name, err)
					}
					for qi, q := range h.questions {
						run.hits = append(run.hits, hitRow{category: q.category, rank: firstHit(ranked[qi], q.evidence)})
					}
				}
				run.replies = m.replies
				out = append(out, run)
			}
		}
	}
	return out, nil
}

// percentile is the nearest-rank p-quantile of xs (0 < p <= 1): the
// smallest value with at least p·n values at or below it; 0 for no values.
func percentile(xs []int, p float64) int {
	if len(xs) == 0 {
		return 0
	}
	s := append([]int(nil), xs...)
	sort.Ints(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// loadLabel describes a fact load by its name and the facts per user.
func loadLabel(name string, counts []int) string {
	return fmt.Sprintf("%s (facts/user p50 %d, max %d)", name, percentile(counts, 0.5), percentile(counts, 1))
}

// reportTokens prints the token table: per dataset, fact load, facts
// selection and request shape, the injected facts and tokens per question
// and the recall of the same replies.
func reportTokens(w io.Writer, runs []tokenRun) {
	fmt.Fprintf(w, "\nenrich injected tokens per question (the reply's `tokens`: its injection, inline format, at 4 UTF-8 bytes a token, a CJK character one; of them, the facts block's), with the recall of the same replies\n\n")
	fmt.Fprintf(w, "| set | fact load | facts | request | questions | facts injected p50 / max | their tokens p50 / max | tokens p50 | p90 | max | R@1 | R@3 | R@10 | evidence injected |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		tokens := make([]int, len(r.replies))
		facts := make([]int, len(r.replies))
		factTokens := make([]int, len(r.replies))
		for i, s := range r.replies {
			tokens[i], facts[i], factTokens[i] = s.tokens, s.facts, s.factTokens
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %d | %d / %d | %d / %d | %d | %d | %d | %.3f | %.3f | %.3f | %.3f |\n",
			r.set, r.load, r.facts, r.shape, len(r.hits), percentile(facts, 0.5), percentile(facts, 1),
			percentile(factTokens, 0.5), percentile(factTokens, 1),
			percentile(tokens, 0.5), percentile(tokens, 0.9), percentile(tokens, 1),
			recall(r.hits, 1), recall(r.hits, 3), recall(r.hits, 10), recall(r.hits, events.MaxMaxResults))
	}
}
