package store_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestRangedRecallReadsTermsByLexeme: a question about a time with words
// ("what did I say about Tokyo in May?") reads the range's candidates from
// context_terms by the query's lexemes. Written as a semi-join of the
// terms to the range's ids, the planner was free to start from the range
// and probe context_terms' primary key (user, lexeme, item) by item, a
// condition that is not a prefix of it: each of the range's items then
// scanned all the user's terms. It chose that plan whenever it expected
// the range to be small, as on a database not yet analyzed: a search walk
// on four real conversations (250 items, 83,000 terms) saw 0.9-4 s per
// enrich of a month with one keyword, every such enrich degraded at the
// 250 ms timeout. Every scan of context_terms must use the lexeme.
func TestRangedRecallReadsTermsByLexeme(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := storetest.Schema(t)
	s := storetest.Open(t, url)
	day := time.Date(2023, 5, 1, 10, 0, 0, 0, time.UTC)
	var items []store.ContextWrite
	for i := range 300 {
		var q, a strings.Builder
		for w := range 30 {
			fmt.Fprintf(&q, "word%dx%d ", i, w)
			fmt.Fprintf(&a, "reply%dx%d ", i, w)
		}
		if i%50 == 0 {
			q.WriteString("tokyo")
		}
		items = append(items, store.ContextWrite{UserID: "alice", Question: q.String(), Answer: a.String(),
			CreatedAt: day.Add(time.Duration(i) * time.Hour), EventID: fmt.Sprintf("e%d", i)})
	}
	if _, err := s.InsertContext(ctx, items); err != nil {
		t.Fatal(err)
	}

	conn, plans := explainConn(t, url, "SET auto_explain.log_nested_statements = on",
		"SET auto_explain.log_analyze = on", "SET auto_explain.log_timing = off")
	var c store.Candidates
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var err error
		_, c, err = s.WithTx(tx).Recall(ctx, store.RecallQuery{MaxFacts: 1, SearchQuery: store.SearchQuery{
			UserID: "alice", Keywords: []string{"tokyo"}, Since: day, Until: day.AddDate(0, 1, 0)}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(c.Matches) != 6 {
		t.Errorf("%d matches, want the 6 items saying tokyo", len(c.Matches))
	}
	// A scan node of context_terms and its conditions, up to the next node.
	scan := regexp.MustCompile(`(?s)Scan[^\n]* on context_terms[^\n]*\n(.*?)(?:->|$)`)
	// Its index (or a bitmap's recheck) condition names the lexeme.
	indexedByLexeme := regexp.MustCompile(`(?:Index|Recheck) Cond: [^\n]*lexeme`)
	// How many times the scan ran.
	loops := regexp.MustCompile(`on context_terms[^\n]*loops=(\d+)\)`)
	candLoops := regexp.MustCompile(`CTE Scan on cand [^\n]*loops=(\d+)\)`)
	found := false
	for _, p := range plans() {
		if !strings.Contains(p, "context_terms") || !strings.Contains(p, "created_at") {
			continue
		}
		for _, m := range scan.FindAllStringSubmatch(p, -1) {
			found = true
			if !indexedByLexeme.MatchString(m[1]) {
				t.Errorf("context_terms is read without the query's lexemes as an index condition:\n%s", p)
			}
		}
		for _, m := range candLoops.FindAllStringSubmatch(p, -1) {
			if m[1] != "1" {
				t.Errorf("the candidates are read %s times, once per item of the range:\n%s", m[1], p)
			}
		}
		for _, m := range loops.FindAllStringSubmatch(p, -1) {
			if m[1] != "1" {
				t.Errorf("context_terms is read %s times, once per item of the range:\n%s", m[1], p)
			}
		}
	}
	if !found {
		t.Fatalf("no plan reading context_terms among %d notices", len(plans()))
	}
}
