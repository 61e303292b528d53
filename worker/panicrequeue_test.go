package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// heldPanics panics on its first batch (a burst's request) once let go
// (release), and on every request of the turn bad, extracting the others
// with its rules.
type heldPanics struct {
	*extractor.Rules
	batched, release chan struct{}
	once             sync.Once
	mu               sync.Mutex
	bad              string // an event id
}

func (h *heldPanics) ExtractBatch(ctx context.Context, in extractor.BatchInput) (extractor.BatchResult, error) {
	first := false
	h.once.Do(func() { first = true })
	if first {
		close(h.batched)
		<-h.release
		panic("batch extraction bug")
	}
	return h.Rules.ExtractBatch(ctx, in)
}

func (h *heldPanics) Extract(ctx context.Context, in extractor.Input) (extractor.Result, error) {
	h.mu.Lock()
	bad := in.Turn.EventID == h.bad
	h.mu.Unlock()
	if bad {
		panic("extraction bug of one turn")
	}
	return h.Rules.Extract(ctx, in)
}

// TestPanickingBurstGivesEachOtherTurnAJob: a burst's job that panics at
// its last attempt gives each other turn of its burst a job of its own
// (as the docs say), so that a turn that panics again fails alone: of a
// burst of 3 whose request panics, the job's own turn fails, the older of
// the 2 others, which panics on its own too, fails, and the newer is
// processed. Before, the 2 other turns got one job, which panicked on the
// older at its last attempt and failed the newer with it, unsent.
func TestPanickingBurstGivesEachOtherTurnAJob(t *testing.T) {
	e := setup(t)
	ids := e.publishBurst("c1")
	ext := &heldPanics{Rules: extractor.NewRules(), batched: make(chan struct{}), release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(ext.release) }) }
	t.Cleanup(release)
	e.startWorker(ext, func(c *worker.Config) {
		c.ExtractDebounce = 50 * time.Millisecond
		c.MaxAttempts = 1
	})
	waitClosed(t, ext.batched, "the burst's request")
	// The jobs of the burst's other turns end first, finding them claimed:
	// the panic leaves them to the jobs it gives them.
	// Whichever of the burst's jobs ran first claimed the 3 turns (own).
	var own string
	e.waitFor("the jobs of the burst's other turns completed", func() (bool, string) {
		var states []string
		done := 0
		for _, j := range e.extractJobs() {
			states = append(states, fmt.Sprintf("%d %s %s", j.ID, j.State, j.EncodedArgs))
			if j.State == rivertype.JobStateCompleted {
				done++
			} else {
				var args worker.ExtractArgs
				if err := json.Unmarshal(j.EncodedArgs, &args); err != nil || len(args.EventIDs) != 1 {
					return false, fmt.Sprintf("job %d args %s: %v", j.ID, j.EncodedArgs, err)
				}
				own = args.EventIDs[0]
			}
		}
		return done == 2, fmt.Sprintf("jobs %v", states)
	})
	others := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == own })
	ext.mu.Lock()
	ext.bad = others[0]
	ext.mu.Unlock()
	release()
	e.waitDone(3)
	want := map[string]string{own: store.StatusFailed, others[0]: store.StatusFailed, others[1]: store.StatusProcessed}
	for _, id := range ids {
		turn, err := e.store.GetTurn(e.ctx, "alice", id)
		if err != nil || turn.Status != want[id] {
			t.Errorf("turn %s (%q) = %s (%s), %v; want %s", id, turn.UserMessage, turn.Status, turn.LastError, err, want[id])
		}
		if turn.Status == store.StatusFailed && !strings.Contains(turn.LastError, "panicked") {
			t.Errorf("turn %s failed with %q; want its panic", id, turn.LastError)
		}
	}
}
