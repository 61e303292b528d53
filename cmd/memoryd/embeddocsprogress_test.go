package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestEmbedBackfillReportsDocumentProgress: a backfill of a knowledge base
// put before embedding was on (documents only, no context items) prints
// progress of the chunks it embeds, as operations.md says the backfill
// "prints progress until every item that existed when it started has a
// vector" and documents are "embedded the same way". Its only progress line
// was `embedding model=m1 embedded=0 items=0`, at the start, whatever the
// chunks: an audit's backfill of 2,507 chunks ran 10 s, and a real model's
// of a 17,000-chunk collection minutes, saying nothing of them.
func TestEmbedBackfillReportsDocumentProgress(t *testing.T) {
	t.Parallel()
	dbURL := storetest.Migrated(t) // a migrated schema of the pool
	s := storetest.Unmigrated(t, dbURL)
	ctx := context.Background()
	var doc strings.Builder
	doc.WriteString("# Handbook\n")
	for i := range 40 {
		fmt.Fprintf(&doc, "\n## Section %d\n\nSection %d explains how the pipeline number %d is rolled back after a failed deploy.\n", i, i, i)
	}
	put, err := s.PutDocument(ctx, store.DocumentPut{Owner: store.Owner{User: "alice"}, Collection: "kb", Source: "handbook.md",
		Content: doc.String(), Chunk: enricher.ChunkDocument})
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := s.CountChunkEmbeddings(ctx, "alice", "m1")
	if err != nil || chunks.Items < 2 || chunks.Embedded != 0 {
		t.Fatalf("put %+v: %+v chunks (%v), want several without a vector", put, chunks, err)
	}
	srv := embeddingtest.New(t)
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	out, errOut, code := runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--user", "alice", "--embed-base-url", srv.URL, "--embed-model", "m1")
	if code != 0 || !strings.Contains(out, "1 document with chunks without a m1 vector to embed") {
		t.Fatalf("embed exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if n, err := s.CountChunkEmbeddings(ctx, "alice", "m1"); err != nil || n.Embedded != chunks.Items {
		t.Fatalf("after the backfill: %+v (%v), want all %d chunks embedded", n, err, chunks.Items)
	}
	// The progress lines (JSON logs, msg "embedding") must count the
	// chunks: the work this backfill does.
	var lines []string
	counted := false
	for _, l := range strings.Split(errOut, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) != nil || rec["msg"] != "embedding" {
			continue
		}
		lines = append(lines, l)
		if v, ok := rec["chunks"].(float64); ok && int64(v) == chunks.Items {
			counted = true
		}
	}
	if !counted {
		t.Errorf("no progress line counts the %d chunks the backfill embeds; its progress lines:\n%s", chunks.Items, strings.Join(lines, "\n"))
	}
}
