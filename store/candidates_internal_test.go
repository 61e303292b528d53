package store

import (
	"fmt"
	"testing"
)

// candidateRow is one candidate row's bytes for a candidateReader.
type candidateRow struct {
	id, vector []byte
	counted    bool
}

// candidateRows returns n candidate rows for terms query lexemes, and the
// lexemes. Candidate i holds term i%terms (question count i%7+1, answer
// count i%5), every other one as stored counts, the rest as a tsvector.
func candidateRows(n, terms int) ([]candidateRow, []string) {
	lexemes := make([]string, terms)
	for t := range lexemes {
		lexemes[t] = fmt.Sprintf("lexeme%d", t)
	}
	rows := make([]candidateRow, n)
	for i := range rows {
		t := i % terms
		q, a := i%7+1, i%5
		rows[i].id = fmt.Appendf(nil, "e%d", i)
		if i%2 == 0 {
			// Stored counts in the array's text form, which reads as its
			// binary one does (TestReadStoredCounts).
			rows[i].vector, rows[i].counted = fmt.Appendf(nil, "{%d}", int64(t+1)<<32|int64(q)<<16|int64(a)), true
			continue
		}
		vec := fmt.Appendf(nil, "'lexeme%d':", t)
		for p := range q {
			vec = fmt.Appendf(vec, "%dA,", p+1)
		}
		for p := range a {
			vec = fmt.Appendf(vec, "%d,", 100+p)
		}
		rows[i].vector = append(vec[:len(vec)-1], " 'other':3"...)
	}
	return rows, lexemes
}

// readCandidates feeds rows to a candidateReader, half of them before the
// statistics row when early, and returns what it decodes.
func readCandidates(rows []candidateRow, lexemes []string, early bool) []Candidate {
	var cr candidateReader
	if !early {
		cr.setTerms(lexemes)
	}
	for i, r := range rows {
		if early && i == len(rows)/2 {
			cr.setTerms(lexemes)
		}
		cr.add(Candidate{Item: ContextItem{ID: int64(i)}}, []byte("question"), []byte("answer"), r.id, nil, r.vector, r.counted)
	}
	return cr.decode("u")
}

// TestCandidateReaderCounts: each candidate gets its own term counts, in
// the chunks counts are cut from and across them, whether its row came
// before or after the query's lexemes, and a candidate's counts cannot be
// appended to over the next one's.
func TestCandidateReaderCounts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n, terms int
		early    bool
	}{{0, 3, false}, {1, 1, false}, {firstCandidateChunk + 1, 3, false}, {5000, 7, false}, {5000, 7, true}, {9000, 2, true}} {
		t.Run(fmt.Sprintf("n=%d,terms=%d,early=%v", tc.n, tc.terms, tc.early), func(t *testing.T) {
			rows, lexemes := candidateRows(tc.n, tc.terms)
			got := readCandidates(rows, lexemes, tc.early)
			if len(got) != tc.n {
				t.Fatalf("%d candidates decoded, want %d", len(got), tc.n)
			}
			for i, c := range got {
				if len(c.Terms) != tc.terms || cap(c.Terms) != tc.terms {
					t.Fatalf("candidate %d: %d terms (cap %d), want %d", i, len(c.Terms), cap(c.Terms), tc.terms)
				}
				if c.Item.ID != int64(i) || c.Item.EventID != fmt.Sprintf("e%d", i) {
					t.Fatalf("candidate %d: id %d, event %q", i, c.Item.ID, c.Item.EventID)
				}
				for term, n := range c.Terms {
					want := TermCount{}
					if term == i%tc.terms {
						want = TermCount{Present: true, Question: int32(i%7 + 1), Answer: int32(i % 5)}
					}
					if n != want {
						t.Fatalf("candidate %d, term %d: %+v, want %+v", i, term, n, want)
					}
				}
			}
		})
	}
}

// BenchmarkCandidateReader: the Go side of a heavy user's recall, 3,600
// counted candidates of 30 query lexemes (a pruned read of new messages
// for a user of 6,972 LongMemEval-S items brought 3,609 at p50).
func BenchmarkCandidateReader(b *testing.B) {
	b.ReportAllocs()
	rows, lexemes := candidateRows(3600, 30)
	for b.Loop() {
		if got := readCandidates(rows, lexemes, false); len(got) != 3600 {
			b.Fatalf("%d candidates", len(got))
		}
	}
}
