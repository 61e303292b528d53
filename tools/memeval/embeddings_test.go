package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
)

// TestEmbeddingsPlumbing runs memeval with the fake embeddings server on one
// LoCoMo conversation: items are embedded, and the report has memoryd
// hybrid, memoryd lexical and vector only beside the baselines. The fake's
// figures mean nothing (a hashed bag of words); the plumbing is the point.
func TestEmbeddingsPlumbing(t *testing.T) {
	locomoData(t)
	srv := embeddingtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err := run(ctx, []string{"-datasets", "locomo", "-limit", "1", "-fact-load", "0", "-embed-base-url", srv.URL, "-embed-model", "fake"}, &out, &errOut)
	if err != nil {
		t.Fatalf("memeval: %v\n%s", err, errOut.String())
	}
	t.Logf("%s", out.String())
	for _, want := range []string{"| memoryd hybrid |", "| memoryd lexical |", "| vector only |", "| FTS5-BM25 |", "embeddings fake at"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// The items in batches, the questions of the vector-only ranker in
	// one, and each of the 150 questions the hybrid enrich asked alone.
	if n := len(srv.Batches()); n < 150+2 {
		t.Errorf("the fake server answered %d requests: the questions were not embedded by enrich", n)
	}
}

// TestRunCVHybrid runs -cv with the fake embeddings server on one LoCoMo
// conversation: the offline hybrid ranking with the current constants
// gives exactly hybrid enrich's top 10 on every question (the
// cross-validation of the vector side measures the service's fusion), the
// hybrid variants are reported, and a second run from the saved candidates
// (-cv-cache, no embeddings server) prints the same.
func TestRunCVHybrid(t *testing.T) {
	data := locomoData(t)
	srv := embeddingtest.New(t)
	cache := filepath.Join(t.TempDir(), "cv.gob")
	run1 := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		args = append([]string{"-cv", "-cv-cache", cache, "-cv-variant", "hybrid", "-datasets", "locomo", "-limit", "1", "-fact-load", "0", "-data", data}, args...)
		if err := run(t.Context(), args, &out, &errOut); err != nil {
			t.Fatalf("memeval %v: %v\n%s", args, err, errOut.String())
		}
		return out.String()
	}
	out := run1("-embed-base-url", srv.URL, "-embed-model", "fake")
	var check []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "| locomo-dev | ") {
			check = strings.Fields(strings.ReplaceAll(line, "|", " "))
		}
	}
	// | set | questions | top 10 equal | first-hit rank equal |
	if len(check) != 4 || check[1] == "0" || check[2] != check[1] || check[3] != check[1] {
		t.Errorf("offline hybrid ranking against enrich's: %v, want every question equal\n%s", check, out)
	}
	for _, v := range cvHybridVariants() {
		if !strings.Contains(out, "| "+v.name+" | ") {
			t.Errorf("report lacks %q", v.name)
		}
	}
	if again := run1(); again != out {
		t.Errorf("-cv from the saved candidates differs:\n%s\nfirst run:\n%s", again, out)
	}
}

// locomoData returns the data directory holding LoCoMo's dev file, or
// skips t (short, or no such file).
func locomoData(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("ingests a LoCoMo conversation")
	}
	data := env("MEMEVAL_DATA", "/work/shared/data")
	if _, err := os.Stat(filepath.Join(data, "locomo-dev.json.gz")); err != nil {
		t.Skipf("no LoCoMo dev file: %v", err)
	}
	return data
}
