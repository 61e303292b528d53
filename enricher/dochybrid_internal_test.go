package enricher

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestFuseChunks: the fused chunk ranking on constructed candidates:
// lexical-only chunks keep their lexical score, vector-only chunks score
// their vector score, a chunk both find scores 1 − (1 − l)(1 − v), the
// threshold and limit apply to the fused score, and a chunk below the
// lexical top limit still counts when the vector side picked it.
func TestFuseChunks(t *testing.T) {
	hit := func(doc string) store.ChunkHit {
		return store.ChunkHit{Collection: "kb", DocumentID: doc, Source: doc, HeadingPath: []string{}}
	}
	// Lexical candidates: "a" holds the term 5 times, "b" 4, ... "e" once.
	lexical := store.ChunkCandidates{Terms: []string{"t"}, Stats: store.ItemStats{Items: 100, AvgQuestionLen: 2, AvgAnswerLen: 20}}
	for i, d := range []string{"a", "b", "c", "d", "e"} {
		n := int32(5 - i)
		lexical.Matches = append(lexical.Matches, store.ChunkCandidate{Hit: hit(d), HeadingLen: 2, TextLen: 20,
			Terms: []store.TermCount{{Present: true, Answer: n}}})
	}
	l := map[string]float64{}
	for _, h := range RankChunks(lexical, 0, 10) {
		l[h.DocumentID] = h.Score
	}
	if !(l["a"] > l["b"] && l["b"] > l["e"] && l["e"] > 0) {
		t.Fatalf("lexical scores %v", l)
	}
	vec := func(doc string, v float64) store.VectorChunk { return store.VectorChunk{Hit: hit(doc), Score: v} }
	tests := []struct {
		name      string
		vector    []store.VectorChunk
		threshold float64
		limit     int
		want      []string
		scores    map[string]float64
	}{
		{"no vector side: lexical", nil, 0, 2, []string{"a", "b"}, map[string]float64{"a": l["a"], "b": l["b"]}},
		{"vector only chunk", []store.VectorChunk{vec("x", 0.9)}, 0, 2, []string{"x", "a"}, map[string]float64{"x": 0.9, "a": l["a"]}},
		{"both sides", []store.VectorChunk{vec("b", 0.5)}, 0, 2, []string{"b", "a"},
			map[string]float64{"b": 1 - (1-l["b"])*(1-0.5), "a": l["a"]}},
		{"picked below the lexical top limit", []store.VectorChunk{vec("e", 0.6)}, 0, 1, []string{"e"},
			map[string]float64{"e": 1 - (1-l["e"])*(1-0.6)}},
		{"threshold on the fused score", []store.VectorChunk{vec("x", 0.2), vec("y", 0.95)}, 0.9, 5, []string{"y"}, map[string]float64{"y": 0.95}},
		{"limit", []store.VectorChunk{vec("x", 0.99), vec("y", 0.98)}, 0, 2, []string{"x", "y"}, map[string]float64{"x": 0.99, "y": 0.98}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fuseChunks(tt.threshold, tt.limit)(store.HybridChunkCandidates{ChunkCandidates: lexical, Vector: tt.vector})
			var docs []string
			for _, h := range got {
				docs = append(docs, h.DocumentID)
				if want := tt.scores[h.DocumentID]; math.Abs(h.Score-want) > 1e-9 {
					t.Errorf("%s scored %v, want %v", h.DocumentID, h.Score, want)
				}
			}
			if !slices.Equal(docs, tt.want) {
				t.Errorf("got %v, want %v", docs, tt.want)
			}
		})
	}
	if got := fuseChunks(0, 3)(store.HybridChunkCandidates{Vector: []store.VectorChunk{vec("x", 0)}}); got == nil || len(got) != 0 {
		t.Errorf("nothing scoring: %v, want an empty non-nil slice", fmt.Sprint(got))
	}
}
