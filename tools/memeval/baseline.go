package main

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"sort"
	"strings"

	_ "modernc.org/sqlite" // pure-Go SQLite with FTS5

	"github.com/memoryd/memoryd/enricher"
)

// A ranker returns, for one haystack, the event ids of the top k units for
// each question (best first).
type ranker interface {
	name() string
	rank(ctx context.Context, h haystack, k int) ([][]string, error)
}

// fts5BM25 is the standard keyword baseline: SQLite FTS5 (default unicode61
// tokenizer, no stemming) over the unit text, queried with the enrich
// keywords OR-joined, ranked by bm25(). Each haystack gets its own table, so
// the collection statistics are the user's own.
type fts5BM25 struct{ db *sql.DB }

func newFTS5() (*fts5BM25, error) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1) // one in-memory database
	if _, err := db.Exec(`CREATE VIRTUAL TABLE probe USING fts5(body); DROP TABLE probe`); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite has no fts5: %w", err)
	}
	return &fts5BM25{db: db}, nil
}

func (f *fts5BM25) name() string { return "FTS5-BM25" }

// ftsQuery ORs the keywords, each a quoted FTS5 string (so no keyword is
// read as an operator).
func ftsQuery(keywords []string) string {
	parts := make([]string, 0, len(keywords))
	for _, k := range keywords {
		parts = append(parts, `"`+strings.ReplaceAll(k, `"`, `""`)+`"`)
	}
	return strings.Join(parts, " OR ")
}

func (f *fts5BM25) rank(ctx context.Context, h haystack, k int) ([][]string, error) {
	conn, err := f.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `DROP TABLE IF EXISTS units; CREATE VIRTUAL TABLE units USING fts5(body)`); err != nil {
		return nil, err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS units`)
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	for i, u := range h.units {
		if _, err := tx.ExecContext(ctx, `INSERT INTO units(rowid, body) VALUES (?, ?)`, i+1, u.text()); err != nil {
			tx.Rollback()
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	out := make([][]string, len(h.questions))
	for qi, q := range h.questions {
		fq := ftsQuery(enricher.Keywords(q.text))
		if fq == "" {
			continue
		}
		rows, err := conn.QueryContext(ctx, `SELECT rowid FROM units WHERE units MATCH ? ORDER BY bm25(units), rowid LIMIT ?`, fq, k)
		if err != nil {
			return nil, fmt.Errorf("fts5 %q: %w", fq, err)
		}
		for rows.Next() {
			var id int
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, err
			}
			out[qi] = append(out[qi], h.units[id-1].eventID)
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// setCosine scores a unit by the distinct words it shares with the question
// over sqrt(|distinct words of the question| · |distinct words of the unit|):
// cosine similarity of binary word sets, with no term weighting and no stop
// word removal (this reproduces the reference numbers in the data README).
// Units sharing no word are not ranked; ties keep the publication order.
type setCosine struct{}

func (setCosine) name() string { return "set-cosine" }

func (setCosine) rank(_ context.Context, h haystack, k int) ([][]string, error) {
	docs := make([]map[string]bool, len(h.units))
	for i, u := range h.units {
		d := map[string]bool{}
		for _, w := range enricher.Words(u.text()) {
			d[w] = true
		}
		docs[i] = d
	}
	out := make([][]string, len(h.questions))
	for qi, q := range h.questions {
		var kws []string
		seen := map[string]bool{}
		for _, w := range enricher.Words(q.text) {
			if !seen[w] {
				seen[w] = true
				kws = append(kws, w)
			}
		}
		if len(kws) == 0 {
			continue
		}
		type scored struct {
			i     int
			score float64
		}
		var hits []scored
		for i, d := range docs {
			shared := 0
			for _, w := range kws {
				if d[w] {
					shared++
				}
			}
			if shared > 0 {
				hits = append(hits, scored{i, float64(shared) / math.Sqrt(float64(len(kws)*len(d)))})
			}
		}
		sort.SliceStable(hits, func(a, b int) bool { return hits[a].score > hits[b].score })
		for _, s := range hits[:min(k, len(hits))] {
			out[qi] = append(out[qi], h.units[s.i].eventID)
		}
	}
	return out, nil
}
