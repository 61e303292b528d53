package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/memoryd/memoryd/ranking"
)

// dropWords returns a copy of c whose questions search without the keywords
// in words: each question's lexemes that only those keywords gave are
// taken out of its candidates, and a candidate left without any query
// lexeme is no longer one. It is exact for enrich's ranking as long as
// fewer words do not bring other candidates (they cannot: the search ORs
// the keywords). A question all of whose keywords are in words is kept as
// it was (enrich would search with the whole message), as is one answered
// with its time range's newest items. It also returns how many questions
// changed.
func dropWords(c *cvCache, words []string) (*cvCache, int) {
	out := *c
	out.Inputs = slices.Clone(c.Inputs)
	changed := 0
	for i := range out.Inputs {
		ci := &out.Inputs[i]
		kept := slices.DeleteFunc(slices.Clone(ci.Keywords), func(k string) bool { return slices.Contains(words, k) })
		if len(kept) == len(ci.Keywords) || len(kept) == 0 || len(ci.Newest) > 0 {
			continue
		}
		changed++
		lexemes := map[string]bool{}
		for _, k := range kept {
			for _, l := range c.Lexemes[k] {
				lexemes[l] = true
			}
		}
		var matches []cvMatch
		for _, m := range ci.Matches {
			counts := slices.Clone(m.Counts)
			holds := false
			for t := range counts {
				if t < len(ci.Terms) && !lexemes[ci.Terms[t]] {
					counts[t] = ranking.TermCount{}
				}
				holds = holds || counts[t].Present
			}
			if holds {
				m.Counts = counts
				matches = append(matches, m)
			}
		}
		ci.Keywords, ci.Matches = kept, matches
	}
	return &out, changed
}

// reportDrop prints, per set, enrich's recall with the current constants
// searching with and without words, next to FTS5-BM25 (which keeps the
// keywords it was run with), and the questions each change won and lost.
func reportDrop(w io.Writer, c *cvCache, words []string) {
	dropped, changed := dropWords(c, words)
	before := cvRanks(cvQuestions(c), ranking.DefaultParams(), stemNone)
	after := cvRanks(cvQuestions(dropped), ranking.DefaultParams(), stemNone)
	fmt.Fprintf(w, "keywords dropped: %s (%d questions search with fewer keywords)\n\n", strings.Join(words, " "), changed)
	fmt.Fprintln(w, "| set | questions | R@1 with / without | R@5 with / without | FTS5-BM25 R@1 / R@5 | R@1 won / lost | R@5 won / lost |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	in := func(r int8, k int) bool { return r > 0 && int(r) <= k }
	for si, name := range c.Sets {
		var sel []int
		fts := make([]int8, len(c.Inputs))
		won, lost := [2]int{}, [2]int{}
		for i, ci := range c.Inputs {
			if ci.Set != si {
				continue
			}
			sel = append(sel, i)
			fts[i] = int8(firstHit(ci.FTS, ci.Evidence))
			for j, k := range []int{1, 5} {
				switch {
				case in(after[i], k) && !in(before[i], k):
					won[j]++
				case !in(after[i], k) && in(before[i], k):
					lost[j]++
				}
			}
		}
		fmt.Fprintf(w, "| %s | %d | %.3f / %.3f | %.3f / %.3f | %.3f / %.3f | %d / %d | %d / %d |\n", name, len(sel),
			cvRecall(before, sel, 1), cvRecall(after, sel, 1), cvRecall(before, sel, 5), cvRecall(after, sel, 5),
			cvRecall(fts, sel, 1), cvRecall(fts, sel, 5), won[0], lost[0], won[1], lost[1])
	}
}
