package store_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestPutOfNewContentReadsKeptVectorsByChunk: the read of the vectors a
// put of new content keeps (keptChunkVectors) looks up each matching
// old chunk's vectors by its index, so that its cost grows with the
// chunks, not with the chunks times the document's vectors. Its first
// version's plan scanned every vector of the document for each chunk
// (the chunk index a join filter): a 99 KB guide of 221 chunks with
// vectors of 4 models took 200 ms and 592,796 buffer reads, while the
// put held the document's row, and a document of 256 KiB with more
// chunks and models grew as their product.
func TestPutOfNewContentReadsKeptVectorsByChunk(t *testing.T) {
	ctx, s := setup(t)
	var b strings.Builder
	for i := range 200 {
		fmt.Fprintf(&b, "# Section %d\n\nThe fact number %d is written here.\n\n", i, i)
	}
	r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "big", Source: "big.md", Content: b.String()})
	models := []string{"a", "b", "c", "d"}
	for _, m := range models {
		if n, err := s.SaveChunkEmbeddings(ctx, m, r.Collection.ID, r.DocID, r.Hash, chunkVectorWrites(t, ctx, s, r, m)); err != nil || n != int64(r.Chunks) {
			t.Fatalf("saved %d of %d vectors of %s (%v)", n, r.Chunks, m, err)
		}
	}
	cut, err := chunkWith(r.Collection, "big.md", b.String()+"One more line.\n")
	if err != nil {
		t.Fatal(err)
	}
	paths, texts := make([]string, len(cut)), make([]string, len(cut))
	for i, ch := range cut {
		paths[i], texts[i] = strings.Join(ch.HeadingPath, "\x1f"), ch.Text
	}
	var plan []struct {
		Plan struct {
			Rows int   `json:"Actual Rows"`
			Hit  int64 `json:"Shared Hit Blocks"`
		}
	}
	var out []byte
	if err := s.Pool().QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+store.KeptChunkVectorsSQL,
		r.Collection.ID, r.DocID, paths, texts, r.Hash).Scan(&out); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &plan); err != nil || len(plan) != 1 {
		t.Fatalf("plan %s: %v", out, err)
	}
	kept, hit := plan[0].Plan.Rows, plan[0].Plan.Hit
	if want := len(models) * (r.Chunks - 1); kept < want {
		t.Fatalf("%d vectors kept, want %d or more", kept, want)
	}
	t.Logf("%d kept vectors of %d chunks: %d buffers read", kept, r.Chunks, hit)
	if limit := int64(20 * kept); hit > limit {
		t.Errorf("reading the %d kept vectors of %d chunks read %d buffers; want at most %d (20 a vector)", kept, r.Chunks, hit, limit)
	}
}
