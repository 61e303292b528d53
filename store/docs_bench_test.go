package store_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// benchCorpus reads about want bytes of real text from the module cache:
// every *.md file, then *.go files (sorted by path, so every run reads the
// same) until want is reached, skipping files that are not UTF-8 text.
func benchCorpus(b *testing.B, want int) map[string]string {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		b.Skipf("go env GOMODCACHE: %v", err)
	}
	root := strings.TrimSpace(string(out))
	var md, code []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil || d.IsDir() || strings.Contains(p, "/cache/"):
		case strings.HasSuffix(p, ".md"):
			md = append(md, p)
		case strings.HasSuffix(p, ".go"):
			code = append(code, p)
		}
		return nil
	})
	slices.Sort(md)
	slices.Sort(code)
	paths := append(md, code...)
	docs := map[string]string{}
	n := 0
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil || !utf8.Valid(data) || strings.IndexByte(string(data), 0) >= 0 || len(data) == 0 {
			continue
		}
		docs[strings.TrimPrefix(p, root+"/")] = string(data)
		if n += len(data); n >= want {
			break
		}
	}
	if n < want {
		b.Skipf("the module cache holds only %d bytes of Markdown and Go", n)
	}
	return docs
}

// BenchmarkPutDocuments10MB puts about 10 MB of real text (the module
// cache's Markdown, about 1.4 MB here, then Go source), each file a document chunked in its put as the
// docs endpoint does for documents up to 256 KiB, into one collection, and
// reports MB/s and chunks/s. Each iteration uses a fresh collection.
func BenchmarkPutDocuments10MB(b *testing.B) {
	docs := benchCorpus(b, 10<<20)
	ids := slices.Sorted(func(yield func(string) bool) {
		for k := range docs {
			if !yield(k) {
				return
			}
		}
	})
	bytes := 0
	for _, d := range docs {
		bytes += len(d)
	}
	s := storetest.New(b)
	ctx := context.Background()
	var chunks int
	var took time.Duration
	i := 0
	for b.Loop() {
		i++
		col := "bench" + strings.Repeat("x", i%2) + time.Now().Format("150405.000000")
		col = strings.NewReplacer(".", "_").Replace(col)
		start := time.Now()
		for _, id := range ids {
			r, err := s.PutDocument(ctx, store.DocumentPut{Owner: store.Owner{User: "bench"}, Collection: col, DocID: id, Content: docs[id], Chunk: chunkWith})
			if err != nil {
				b.Fatal(err)
			}
			chunks += r.Chunks
		}
		took += time.Since(start)
	}
	sec := took.Seconds()
	b.ReportMetric(float64(bytes)*float64(i)/sec/1e6, "MB/s")
	b.ReportMetric(float64(chunks)/sec, "chunks/s")
	b.ReportMetric(float64(len(ids)), "docs")
	b.ReportMetric(float64(chunks)/float64(i), "chunks")
}
