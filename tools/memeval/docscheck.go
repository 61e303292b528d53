package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/memoryd/memoryd/chunker"
	"github.com/memoryd/memoryd/enricher"
)

// The knowledge-base retrieval check (issue 19, -docs): the documents of
// testdata/docs are put into memoryd, each question is asked through
// enrich with the collection named (so the chunks come back ranked exactly
// as enrich ranks them), and recall at 1, 5 and 10 is reported next to a
// plain FTS5 BM25 over the very same chunks. A question is a hit at k when
// one of the top k chunks lies in its expected section: the chunk is of
// the question's document and its heading path holds the section (a
// section spans its subsections). Nothing is tuned on these questions.

// docsK is the depth the check asks for.
const docsK = 10

// docsCollection is the collection the check puts the documents into.
const docsCollection = "kb"

// docChunk is a chunk of the check's corpus as memoryd or the baseline
// returns it: enough to tell whether it lies in a question's section.
type docChunk struct {
	Source   string
	Headings []string
	Index    int
	Text     string
}

// inSection reports whether c lies in q's expected section.
func (c docChunk) inSection(q docQuestion) bool {
	return c.Source == q.Source && slices.Contains(c.Headings, q.Section)
}

// docText is one document of the corpus, read.
type docText struct {
	Source string
	Text   string
}

// readDocSet reads the corpus's documents (go mod download when missing).
func readDocSet(docs []docSource) ([]docText, error) {
	out := make([]docText, 0, len(docs))
	for _, d := range docs {
		text, err := readDoc(d)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.Source, err)
		}
		out = append(out, docText{Source: d.Source, Text: text})
	}
	return out, nil
}

// chunkDocSet cuts every document with the chunker's defaults, as memoryd
// does for a collection created without a chunk size.
func chunkDocSet(docs []docText) ([]docChunk, error) {
	var out []docChunk
	for _, d := range docs {
		cs, err := chunker.Split(d.Text, chunker.Config{})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.Source, err)
		}
		for i, c := range cs {
			out = append(out, docChunk{Source: d.Source, Headings: c.Headings, Index: i, Text: c.Text})
		}
	}
	return out, nil
}

// docsRecall is one ranker's result: hits[k] counts the questions with a
// hit in the top k, for k in 1, 5, 10.
type docsRecall struct {
	name string
	n    int
	hits map[int]int
}

func scoreDocs(name string, qs []docQuestion, ranked [][]docChunk) docsRecall {
	r := docsRecall{name: name, n: len(qs), hits: map[int]int{}}
	for qi, q := range qs {
		for _, k := range []int{1, 5, 10} {
			if slices.ContainsFunc(ranked[qi][:min(k, len(ranked[qi]))], func(c docChunk) bool { return c.inSection(q) }) {
				r.hits[k]++
			}
		}
	}
	return r
}

func (r docsRecall) at(k int) float64 { return float64(r.hits[k]) / float64(max(r.n, 1)) }

// reportDocs prints the recall table.
func reportDocs(w io.Writer, chunks, docs int, rs []docsRecall) {
	fmt.Fprintf(w, "Knowledge-base retrieval check: %d questions over %d chunks of %d documents (chunker defaults)\n\n", rs[0].n, chunks, docs)
	fmt.Fprintln(w, "| ranker | R@1 | R@5 | R@10 |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %.3f | %.3f | %.3f |\n", r.name, r.at(1), r.at(5), r.at(10))
	}
}

// ftsRankChunks is the FTS5-BM25 baseline (baseline.go's approach) over
// chunks: one row per chunk, its heading path and its text in one column
// (memoryd ranks both, the heading path as a field of its own), queried
// with the enrich keywords ORed, best k first.
func ftsRankChunks(ctx context.Context, db *sql.DB, chunks []docChunk, qs []docQuestion, k int) ([][]docChunk, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `DROP TABLE IF EXISTS chunks; CREATE VIRTUAL TABLE chunks USING fts5(body)`); err != nil {
		return nil, err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS chunks`)
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	for i, c := range chunks {
		if _, err := tx.ExecContext(ctx, `INSERT INTO chunks(rowid, body) VALUES (?, ?)`, i+1, strings.Join(c.Headings, "\n")+"\n"+c.Text); err != nil {
			tx.Rollback()
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	out := make([][]docChunk, len(qs))
	for qi, q := range qs {
		fq := ftsQuery(enricher.Keywords(q.Question))
		if fq == "" {
			continue
		}
		rows, err := conn.QueryContext(ctx, `SELECT rowid FROM chunks WHERE chunks MATCH ? ORDER BY bm25(chunks), rowid LIMIT ?`, fq, k)
		if err != nil {
			return nil, fmt.Errorf("fts5 %q: %w", fq, err)
		}
		for rows.Next() {
			var id int
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, err
			}
			out[qi] = append(out[qi], chunks[id-1])
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
