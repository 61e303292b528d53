package worker

import (
	"fmt"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestChunkEmbedParamsPack: documents' chunks are packed, in order, into
// jobs of the job size (the last fewer): a large document is cut across
// jobs, small ones share one.
func TestChunkEmbedParamsPack(t *testing.T) {
	doc := func(id string, chunks int) store.DocChunksRef {
		return store.DocChunksRef{CollectionID: 7, DocID: id, Hash: "h" + id, Chunks: chunks}
	}
	tests := []struct {
		name    string
		docs    []store.DocChunksRef
		jobSize int
		want    []string // each job's ranges
	}{
		{"one small", []store.DocChunksRef{doc("a", 3)}, 32, []string{"a0-3"}},
		{"small ones share", []store.DocChunksRef{doc("a", 1), doc("b", 1), doc("c", 2)}, 32, []string{"a0-1 b0-1 c0-2"}},
		{"large cut, rest shared", []store.DocChunksRef{doc("a", 3), doc("b", 40), doc("c", 1), doc("d", 1)}, 32, []string{"a0-3 b0-29", "b29-40 c0-1 d0-1"}},
		{"exact fit", []store.DocChunksRef{doc("a", 2), doc("b", 2)}, 2, []string{"a0-2", "b0-2"}},
		{"no chunks", []store.DocChunksRef{doc("a", 0), doc("b", 1)}, 4, []string{"b0-1"}},
		{"job size under 1", []store.DocChunksRef{doc("a", 2)}, 0, []string{"a0-1", "a1-2"}},
		{"none", nil, 32, nil},
		{"collections apart", []store.DocChunksRef{doc("a", 1), {CollectionID: 8, DocID: "b", Hash: "hb", Chunks: 1}, doc("c", 1)}, 32, []string{"a0-1", "b0-1", "c0-1"}},
	}
	for _, tt := range tests {
		var got []string
		for _, p := range chunkEmbedParams(tt.docs, "m", tt.jobSize, nil) {
			a := p.Args.(ChunkEmbedArgs)
			s := ""
			for i, r := range a.ranges() {
				if i > 0 {
					s += " "
				}
				if r.Hash != "h"+r.DocID || r.CollectionID != a.CollectionID {
					t.Errorf("%s: range %+v lost its document", tt.name, r)
				}
				s += fmt.Sprintf("%s%d-%d", r.DocID, r.From, r.To)
			}
			if a.Model != "m" || a.chunks() > max(tt.jobSize, 1) {
				t.Errorf("%s: job %+v: model %q, %d chunks", tt.name, a, a.Model, a.chunks())
			}
			got = append(got, s)
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: jobs %q, want %q", tt.name, got, tt.want)
		}
	}
}
