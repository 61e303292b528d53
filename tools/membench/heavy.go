package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/store"
)

// The heavy-user measurement (--heavy): one user holding the LongMemEval-S
// haystack sessions (nine in ten of them, about 13,000 real turn pairs,
// written through the store as extraction writes them), and the cost of
// enrich's keyword read of that user: the recall statement and the ranking,
// in process, with no NATS in between. Each query is read twice in turn:
// in full, and as enrich reads it (enricher.PrunedRead: pruned with
// store.Prune, for each --heavy-shares and enrich's fewest items, then the
// rest of the candidates when the pruned read cannot tell). The hits of the
// two must be the same; a difference is counted (it would be a bug).
// Queries are the dataset's questions and user messages of the sessions
// not seeded (a frontend's new messages: longer, and with more common
// words).

// heavyQueries is a set of messages the heavy user's enrich is asked.
type heavyQueries struct {
	name     string
	messages []string
}

// heavyRow is one query set and share's figures (the second of two rounds).
type heavyRow struct {
	set                  string
	share                float64
	queries              int
	full, pruned         latencies
	candFull, candPruned []int
	fallbacks, differing int
	rowsFull, rowsPruned int
	items                int64
	threshold            float64
	limit                int
}

func (b *bench) heavyPhase(ctx context.Context) error {
	o, e := b.o, b.env
	shares, err := parseFloats("heavy-shares", o.heavyShares)
	if err != nil {
		return err
	}
	lme, err := loadLongMemEval(o.data, o)
	if err != nil {
		return err
	}
	var items []store.ContextWrite
	msgs := heavyQueries{name: "new messages"}
	for si, s := range lme.sessions {
		if si%10 == 0 {
			if len(msgs.messages) < 300 {
				msgs.messages = append(msgs.messages, s.pairs[0][0])
			}
			continue
		}
		for k, p := range s.pairs {
			items = append(items, store.ContextWrite{UserID: "heavy", Question: p[0], Answer: p[1],
				CreatedAt: s.date.Add(time.Duration(k) * time.Minute), EventID: fmt.Sprintf("s%d-%d", si, k), ConversationID: fmt.Sprint("s", si)})
		}
	}
	if o.quick {
		items = items[:min(len(items), 3000)]
	}
	schema := o.schema
	var url string
	if schema == "" {
		schema = "bench_" + b.id + "_heavy"
		if url, err = e.newSchema(ctx, schema); err != nil {
			return err
		}
	} else {
		url = e.schemaURL(schema)
		logf("reusing seeded schema %s", schema)
	}
	if o.keep {
		e.keep = schema
	}
	s, err := store.Open(ctx, store.Config{URL: url, MaxConns: 2, Logger: quietLogger()})
	if err != nil {
		return err
	}
	defer s.Close()
	n, err := s.CountContext(ctx, "heavy")
	if err != nil {
		return err
	}
	if n == 0 {
		logf("writing %d LongMemEval turn pairs as one user into schema %s", len(items), schema)
		for i := 0; i < len(items); i += 200 {
			if _, err := s.InsertContext(ctx, items[i:min(i+200, len(items))]); err != nil {
				return err
			}
		}
		// As autovacuum would have by then: index-only scans need the
		// visibility map.
		for _, t := range []string{"context", "context_terms"} {
			if _, err := e.admin.Exec(ctx, "VACUUM ANALYZE "+schema+"."+t); err != nil {
				return err
			}
		}
		if n, err = s.CountContext(ctx, "heavy"); err != nil {
			return err
		}
	}
	sets := []heavyQueries{{name: "questions", messages: lme.questions}, msgs}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var rows []heavyRow
	for _, set := range sets {
		for _, share := range shares {
			var row heavyRow
			for round := range 2 {
				row = heavyRow{set: set.name, share: share, queries: len(set.messages), items: n,
					threshold: 0.3, limit: 3} // enrich's defaults (events.DefaultThreshold, DefaultMaxResults)
				if err := heavyRound(ctx, s, set.messages, at, &row); err != nil {
					return err
				}
				logf("%s, share %.2f, round %d: full p50 %s, pruned p50 %s, %d fallbacks, %d differing", set.name, share, round+1,
					ms(row.full.pct(0.5)), ms(row.pruned.pct(0.5)), row.fallbacks, row.differing)
			}
			rows = append(rows, row)
		}
	}
	fmt.Println(heavyTable(rows, enricher.ReadPrune()))
	return nil
}

// heavyRound reads every message in full and pruned, in turn, and counts.
func heavyRound(ctx context.Context, s *store.Store, messages []string, at time.Time, row *heavyRow) error {
	minItems := enricher.ReadPrune().MinItems
	recall := func(ctx context.Context, q store.SearchQuery) ([]store.Fact, store.Candidates, error) {
		return s.Recall(ctx, store.RecallQuery{SearchQuery: q, MaxFacts: 20})
	}
	read := func(q store.SearchQuery) (store.Candidates, []store.ContextItem, error) {
		_, c, err := recall(ctx, q)
		if err != nil {
			return store.Candidates{}, nil, err
		}
		return c, enricher.Rank(c, at, row.threshold, row.limit), nil
	}
	for _, m := range messages {
		q := store.SearchQuery{UserID: "heavy", Keywords: enricher.Keywords(m)}
		t0 := time.Now()
		cf, hf, err := read(q)
		if err != nil {
			return err
		}
		t1 := time.Now()
		_, cp, hp, rest, err := enricher.PrunedRead(ctx, recall, q, store.Prune{Share: row.share, MinItems: minItems}, at, row.threshold, row.limit)
		if err != nil {
			return err
		}
		if rest {
			row.fallbacks++
		}
		rows := len(cp.Matches)
		t2 := time.Now()
		row.full = append(row.full, t1.Sub(t0))
		row.pruned = append(row.pruned, t2.Sub(t1))
		row.candFull = append(row.candFull, len(cf.Matches))
		row.candPruned = append(row.candPruned, rows)
		row.rowsFull += len(cf.Matches)
		row.rowsPruned += rows
		if !slices.EqualFunc(hf, hp, func(a, b store.ContextItem) bool { return a.ID == b.ID && a.Score == b.Score }) {
			row.differing++
		}
	}
	return nil
}

func heavyTable(rows []heavyRow, enrich store.Prune) string {
	var b strings.Builder
	if len(rows) > 0 {
		fmt.Fprintf(&b, "One user of %d LongMemEval items; enrich's keyword read (recall + ranking, in process), top %d at threshold %.1f; second of two rounds; load average %s\n\n",
			rows[0].items, rows[0].limit, rows[0].threshold, loadAvg())
	}
	b.WriteString("| queries | share | full p50 / p90 / p99 | pruned p50 / p90 / p99 | candidates read, p50 full / pruned | rows read, pruned / full | rest read after a pruned one | hits differing |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		share := strconv.FormatFloat(r.share, 'f', 2, 64)
		if r.share == enrich.Share {
			share += " (enrich's)"
		}
		fmt.Fprintf(&b, "| %s (%d) | %s | %s / %s / %s | %s / %s / %s | %d / %d | %.2f | %d | %d |\n", r.set, r.queries, share,
			ms(r.full.pct(0.5)), ms(r.full.pct(0.9)), ms(r.full.pct(0.99)), ms(r.pruned.pct(0.5)), ms(r.pruned.pct(0.9)), ms(r.pruned.pct(0.99)),
			median(r.candFull), median(r.candPruned), float64(r.rowsPruned)/float64(max(r.rowsFull, 1)), r.fallbacks, r.differing)
	}
	return b.String()
}

func median(v []int) int {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

func parseFloats(flagName, s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0 && v < 1) {
			return nil, fmt.Errorf("--%s: %q is not a share between 0 and 1", flagName, f)
		}
		out = append(out, v)
	}
	return out, nil
}
