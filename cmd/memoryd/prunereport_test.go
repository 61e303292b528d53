package main

import (
	"strings"
	"testing"

	"github.com/memoryd/memoryd/worker"
)

// TestPruneReportCountsInTheRightNumber: prune's report says "1 turn" and
// "1 item vector", not "1 turns" and "1 item vectors".
func TestPruneReportCountsInTheRightNumber(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		rep  worker.PruneReport
		want []string
	}{
		{worker.PruneReport{TurnTextsClearedForSize: 1, TurnTextBytesForSize: 10, VectorsRemoved: 1, ChunkVectorsRemoved: 1},
			[]string{"cleared the text of 1 more turn (10 bytes) for size", "deleted 1 item vector and 1 chunk vector of embedding models"}},
		{worker.PruneReport{TurnTextsClearedForSize: 2, TurnTextBytesForSize: 10, VectorsRemoved: 2, ChunkVectorsRemoved: 0},
			[]string{"cleared the text of 2 more turns (10 bytes) for size", "deleted 2 item vectors and 0 chunk vectors of embedding models"}},
	} {
		var out strings.Builder
		printPrune(&cli{stdout: &out}, tt.rep)
		for _, w := range tt.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("report:\n%s\nwant it to say %q", out.String(), w)
			}
		}
	}
}
