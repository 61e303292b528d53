package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/memoryd/memoryd/chunker"
	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/internal/app"
	"github.com/memoryd/memoryd/store"
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

// docsUser is the user whose private collection holds the check's corpus.
const docsUser = "kb-reader"

// indexDocs puts the documents into memoryd's store (the store API and
// chunker memory.docs.put uses, chunked in the put's transaction with the
// collection's defaults)
// and returns how many chunks memoryd holds.
func (in *instance) indexDocs(ctx context.Context, docs []docText) (int, error) {
	url, err := withSearchPath(in.baseURL, in.schema)
	if err != nil {
		return 0, err
	}
	s, err := store.Open(ctx, store.Config{URL: url, MaxConns: 2, Logger: in.logger})
	if err != nil {
		return 0, err
	}
	defer s.Close()
	n := 0
	for _, d := range docs {
		r, err := s.PutDocument(ctx, store.DocumentPut{Owner: store.Owner{User: docsUser}, Collection: docsCollection,
			Source: d.Source, Content: d.Text, Chunk: enricher.ChunkDocument})
		if err != nil {
			return 0, fmt.Errorf("put %s: %w", d.Source, err)
		}
		n += r.Chunks
	}
	return n, nil
}

// enrichDocs asks each question through memory.enrich (of client) with
// the collection named, threshold 0 and room for docsK chunks: the chunks
// come back in enrich's order.
func (in *instance) enrichDocs(ctx context.Context, client *events.Client, qs []docQuestion) ([][]docChunk, error) {
	out := make([][]docChunk, len(qs))
	k, zero, budget := docsK, 0.0, events.MaxMaxTokens
	for i, q := range qs {
		r, err := client.Enrich(ctx, events.EnrichRequest{UserID: docsUser, Message: q.Question, Collections: []string{docsCollection},
			DocsMaxResults: &k, DocsThreshold: &zero, MaxTokens: &budget})
		if err != nil {
			return nil, fmt.Errorf("enrich %s: %w", q.ID, err)
		}
		if r.Degraded {
			return nil, fmt.Errorf("enrich %s: degraded: %s", q.ID, r.Reason)
		}
		for _, d := range r.Documents {
			out[i] = append(out[i], docChunk{Source: d.Source, Headings: d.HeadingPath, Index: d.ChunkIndex, Text: d.Text})
		}
	}
	return out, nil
}

// docsCheck runs the check on a running memoryd: the corpus indexed in it
// and in FTS5, each question ranked by both.
func docsCheck(ctx context.Context, in *instance, docs []docText, qs []docQuestion, progress func(string, ...any)) (rs []docsRecall, chunks int, err error) {
	local, err := chunkDocSet(docs)
	if err != nil {
		return nil, 0, err
	}
	progress("putting %d documents (%d chunks)\n", len(docs), len(local))
	if chunks, err = in.indexDocs(ctx, docs); err != nil {
		return nil, 0, err
	}
	if chunks != len(local) {
		return nil, 0, fmt.Errorf("memoryd holds %d chunks, the chunker cut %d: not the same chunks", chunks, len(local))
	}
	lexClient, label := in.client, "memoryd lexical (enrich)"
	if in.emb != nil {
		// The documents were put through a store of their own, without
		// the worker's chunk hook: a backfill enqueues their embed jobs,
		// which the instance's worker runs.
		progress("embedding the chunks\n")
		if _, err := in.app.EmbedBackfill(ctx, app.EmbedOptions{Work: true}); err != nil {
			return nil, 0, fmt.Errorf("embedding chunks: %w", err)
		}
		if err := in.app.WaitEmbedded(ctx, "", store.EmbeddingMark{}, nil); err != nil {
			return nil, 0, fmt.Errorf("embedding chunks: %w", err)
		}
		if lexClient, err = in.startLexical(ctx, in.logger); err != nil {
			return nil, 0, err
		}
		label = "memoryd lexical (enrich, no embedder)"
	}
	progress("asking %d questions\n", len(qs))
	mem, err := in.enrichDocs(ctx, lexClient, qs)
	if err != nil {
		return nil, 0, err
	}
	rs = append(rs, scoreDocs(label, qs, mem))
	if in.emb != nil {
		hyb, err := in.enrichDocs(ctx, in.client, qs)
		if err != nil {
			return nil, 0, err
		}
		rs = append(rs, scoreDocs("memoryd hybrid (enrich)", qs, hyb))
	}
	fts, err := newFTS5()
	if err != nil {
		return nil, 0, err
	}
	defer fts.db.Close()
	base, err := ftsRankChunks(ctx, fts.db, local, qs, docsK)
	if err != nil {
		return nil, 0, err
	}
	return append(rs, scoreDocs("FTS5-BM25", qs, base)), chunks, nil
}

// runDocs is memeval -docs.
func runDocs(ctx context.Context, o options, in *instance, stdout io.Writer, progress func(string, ...any)) error {
	srcs, qs, err := loadDocSet(filepath.Join("memeval", "testdata", "docs"))
	if errors.Is(err, os.ErrNotExist) {
		srcs, qs, err = loadDocSet(filepath.Join("testdata", "docs"))
	}
	if err != nil {
		return err
	}
	if o.limit > 0 && len(qs) > o.limit {
		qs = qs[:o.limit]
	}
	docs, err := readDocSet(srcs)
	if err != nil {
		return err
	}
	rs, chunks, err := docsCheck(ctx, in, docs, qs, progress)
	if err != nil {
		return err
	}
	reportDocs(stdout, chunks, len(docs), rs)
	if o.embedBaseURL != "" {
		fmt.Fprintf(stdout, "\nHybrid: chunks embedded with %s at %s; the same enrich with and without the embedder.\n", o.embedStored, app.RedactURL(o.embedBaseURL))
	}
	return nil
}
