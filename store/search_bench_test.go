package store_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/store"
)

// BenchmarkReadAndRank is the Go side of a search without Postgres:
// candidate rows as the driver hands them over, read and decoded by the
// store, then ranked as enrich ranks them. It is what to compare when
// changing how candidates are read (allocations, arenas) or ranked.
func BenchmarkReadAndRank(b *testing.B) {
	terms, rows := benchRows()
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	raw := make([][5][]byte, len(rows))
	for i, r := range rows {
		raw[i] = [5][]byte{r.question, r.answer, r.eventID, r.convID, r.vector}
	}
	cands := make([]store.Candidate, len(rows))
	for i, r := range rows {
		cands[i] = store.Candidate{Item: store.ContextItem{ID: r.id, CreatedAt: r.createdAt}, QuestionLen: int(r.qlen), AnswerLen: int(r.alen)}
	}
	b.ReportAllocs()
	for b.Loop() {
		c := store.Candidates{Terms: terms, Stats: store.ItemStats{Items: 120, AvgQuestionLen: 8, AvgAnswerLen: 15}}
		c.Matches = store.ReadCandidates(cands, raw, terms, "u")
		if items := enricher.Rank(c, at, 0.3, 5); len(items) != 5 {
			b.Fatalf("%d items", len(items))
		}
	}
}

// benchRow is a candidate row as Postgres sends it.
type benchRow struct {
	id                                        int64
	createdAt                                 time.Time
	qlen, alen                                float64
	question, answer, eventID, convID, vector []byte
}

// benchRows are a search's candidates as Postgres sends them: 60 items of
// about 8 question and 15 answer lexemes over a vocabulary of 200, the
// query's 4 terms among them; the same on every run.
func benchRows() (terms []string, rows []benchRow) {
	rng := rand.New(rand.NewPCG(1, 2))
	terms = []string{"w003", "w010", "w042", "w120"}
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	for i := range 60 {
		var lex []string
		seen := map[int]bool{}
		for range 23 {
			w := rng.IntN(200)
			if i%4 == 0 || rng.IntN(3) == 0 { // every candidate holds a term
				w = []int{3, 10, 42, 120}[rng.IntN(4)]
			}
			if seen[w] {
				continue
			}
			seen[w] = true
			lex = append(lex, fmt.Sprintf("w%03d", w))
		}
		slices.Sort(lex)
		var v strings.Builder
		pos := 1
		for k, l := range lex {
			if k > 0 {
				v.WriteByte(' ')
			}
			fmt.Fprintf(&v, "'%s':", l)
			for p := range 1 + rng.IntN(3) {
				if p > 0 {
					v.WriteByte(',')
				}
				fmt.Fprintf(&v, "%d%s", pos, []string{"A", "B", "B"}[rng.IntN(3)])
				pos += 1 + rng.IntN(5)
			}
		}
		rows = append(rows, benchRow{
			id: int64(i + 1), createdAt: at.Add(-time.Duration(rng.IntN(400*24)) * time.Hour),
			qlen: float64(6 + rng.IntN(5)), alen: float64(12 + rng.IntN(6)),
			question: []byte(strings.Repeat("question words ", 4+rng.IntN(4))),
			answer:   []byte(strings.Repeat("answer words here ", 5+rng.IntN(8))),
			eventID:  []byte(fmt.Sprintf("evt-%08d", i)), convID: []byte("conversation-1"),
			vector: []byte(v.String()),
		})
	}
	return terms, rows
}
