package worker

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestTakenOverJobsAttemptsLeft pins the attempts a takeover gives the
// replacement of an embed, chunk embed or document chunking job of a
// dead process (0: ended on its last attempt, not replaced), beside those
// outcome gives the job's own failed run, which it follows: an embed job
// enqueued without memoryd's source (by an older memoryd, or River's
// client as the takeover tests insert them) runs the worker's attempts
// within its own, as an extraction job does (jobAttempts), and its
// replacement had all of its own left (8 of 10 where the worker runs 5).
// A document chunking job, which River retries as it is, keeps River's
// count.
func TestTakenOverJobsAttemptsLeft(t *testing.T) {
	b := retryBudget{maxAttempts: 5}
	sourced, _ := json.Marshal(map[string]any{metaSource: sourceSweep})
	taken, _ := json.Marshal(map[string]any{metaSource: sourceTakeOver, metaReplaces: 7})
	args := map[string]any{
		EmbedJobKind:         EmbedArgs{UserID: "ann", ContextIDs: []int64{1}, Model: "m"},
		ChunkEmbedJobKind:    ChunkEmbedArgs{Model: "m"},
		IndexDocumentJobKind: IndexDocumentArgs{CollectionID: 1, DocID: "d", Hash: "h"},
	}
	for _, c := range []struct {
		kind              string
		meta              json.RawMessage
		attempt, max      int
		want              int
		sameAsItsOwnFails bool
	}{
		{EmbedJobKind, sourced, 1, 10, 9, true},
		{EmbedJobKind, sourced, 10, 10, 0, true},
		{EmbedJobKind, taken, 2, 3, 1, true},
		{EmbedJobKind, nil, 1, 3, 2, true},
		{EmbedJobKind, nil, 3, 3, 0, true},
		{EmbedJobKind, nil, 2, 10, 3, true}, // 8 before: the replacement ran past the job's own last attempt
		{EmbedJobKind, nil, 5, 10, 0, true}, // 5 before
		{ChunkEmbedJobKind, sourced, 2, 10, 8, true},
		{ChunkEmbedJobKind, nil, 2, 10, 3, true}, // 8 before
		{IndexDocumentJobKind, nil, 1, 3, 2, false},
		{IndexDocumentJobKind, nil, 3, 3, 0, false},
		{IndexDocumentJobKind, nil, 2, 25, 23, false},
	} {
		t.Run(fmt.Sprintf("%s %s attempt %d of %d", c.kind, c.meta, c.attempt, c.max), func(t *testing.T) {
			raw, err := json.Marshal(args[c.kind])
			if err != nil {
				t.Fatal(err)
			}
			j := store.TakenJob{ID: 7, Kind: c.kind, Args: raw, Queue: "q", Attempt: c.attempt, MaxAttempts: c.max, Metadata: c.meta}
			p, err := asIsReplacement(j, b.takenAttemptsLeft(j))
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			if p != nil {
				got = p.InsertOpts.MaxAttempts
			}
			if got != c.want {
				t.Errorf("replacement with %d attempts, want %d", got, c.want)
			}
			if c.sameAsItsOwnFails {
				row := takenRow(j)
				if own := outcome(errProcessStopped, row, false, b); own.final != (c.want == 0) || b.attemptsLeft(row) != c.want {
					t.Errorf("the job's own failed run: final %v, %d attempts left; the takeover's: %d", own.final, b.attemptsLeft(row), c.want)
				}
			}
		})
	}
}
