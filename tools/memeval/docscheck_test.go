package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
)

func TestChunkInSection(t *testing.T) {
	q := docQuestion{Source: "a.md", Section: "TLS"}
	tests := []struct {
		name string
		c    docChunk
		want bool
	}{
		{"the section", docChunk{Source: "a.md", Headings: []string{"Usage", "TLS"}}, true},
		{"a subsection of it", docChunk{Source: "a.md", Headings: []string{"Usage", "TLS", "Client certificates"}}, true},
		{"another section", docChunk{Source: "a.md", Headings: []string{"Usage", "Auth"}}, false},
		{"same heading, another document", docChunk{Source: "b.md", Headings: []string{"TLS"}}, false},
		{"no heading", docChunk{Source: "a.md"}, false},
	}
	for _, tt := range tests {
		if got := tt.c.inSection(q); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	qs := []docQuestion{q, q}
	r := scoreDocs("x", qs, [][]docChunk{
		{{Source: "b.md", Headings: []string{"TLS"}}, {Source: "a.md", Headings: []string{"TLS"}}},
		{},
	})
	if r.hits[1] != 0 || r.hits[5] != 1 || r.hits[10] != 1 || r.at(5) != 0.5 {
		t.Errorf("recall %v", r.hits)
	}
}

// TestDocsCheckRuns: memeval -docs on the first questions puts the
// corpus into memoryd through the store, asks each question through
// enrich, and reports recall for memoryd and the baseline; memoryd finds
// some of the expected sections (lexical search over their own words).
func TestDocsCheckRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("puts 8 documents into memoryd")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"-docs", "-limit", "8"}, &out, &errOut); err != nil {
		t.Fatalf("memeval -docs: %v\n%s", err, errOut.String())
	}
	t.Logf("%s", out.String())
	for _, name := range []string{"memoryd lexical \\(enrich\\)", "FTS5-BM25"} {
		m := regexp.MustCompile(`\| ` + name + ` \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \|`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("no row for %s", name)
		}
		var prev float64
		for _, s := range m[1:] {
			v, _ := strconv.ParseFloat(s, 64)
			if v < prev || v > 1 {
				t.Errorf("%s: recall %s not rising within 0..1", name, m[0])
			}
			prev = v
		}
		if prev == 0 {
			t.Errorf("%s found no expected section in the top 10 of 8 questions", name)
		}
	}
	if !regexp.MustCompile(`8 questions over \d+ chunks of 8 documents`).MatchString(out.String()) {
		t.Errorf("header: %s", out.String())
	}
}

// TestDocsCheckHybridRuns: memeval -docs with the fake embeddings server
// embeds the chunks (a backfill run by the instance's worker) and reports a
// hybrid row beside the lexical one (the same enrich without an embedder)
// and FTS5. The fake's figures mean nothing; the plumbing is the point.
func TestDocsCheckHybridRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("puts 8 documents into memoryd and embeds their chunks")
	}
	srv := embeddingtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"-docs", "-limit", "8", "-embed-base-url", srv.URL, "-embed-model", "fake"}, &out, &errOut); err != nil {
		t.Fatalf("memeval -docs: %v\n%s", err, errOut.String())
	}
	t.Logf("%s", out.String())
	for _, want := range []string{"| memoryd hybrid (enrich) |", "| memoryd lexical (enrich, no embedder) |", "| FTS5-BM25 |", "chunks embedded with fake at"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// The chunks in batches, then each of the 8 questions embedded once
	// by the hybrid enrich.
	if n := len(srv.Batches()); n < 8+1 {
		t.Errorf("the fake server answered %d requests: the chunks or the questions were not embedded", n)
	}
}

// TestDocsCheckEmbedDimensions: -embed-dimensions N asks the server for
// vectors of N dimensions, as memoryd's --embed-dimensions does, and the
// report names the model as memoryd stores it (model?dimensions=N).
// Before, memeval had no such flag: a model that shortens its vectors
// (text-embedding-3-*) was evaluated at its full size only.
func TestDocsCheckEmbedDimensions(t *testing.T) {
	if testing.Short() {
		t.Skip("puts documents into memoryd and embeds their chunks")
	}
	srv := embeddingtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"-docs", "-limit", "2", "-embed-base-url", srv.URL, "-embed-model", "fake", "-embed-dimensions", "16"}, &out, &errOut); err != nil {
		t.Fatalf("memeval -docs -embed-dimensions 16: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "chunks embedded with fake?dimensions=16 at") {
		t.Errorf("report:\n%s\nwant the model named fake?dimensions=16", out.String())
	}
	ds := srv.Dimensions()
	if len(ds) == 0 {
		t.Fatal("nothing embedded")
	}
	for i, d := range ds {
		if d != 16 {
			t.Errorf("request %d asked for %d dimensions, want 16", i+1, d)
		}
	}
}
