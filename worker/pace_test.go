package worker_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/worker"
)

// fullPressure is a Pacer that always asks for the slowest pace, and counts
// how often it was asked.
type fullPressure struct{ asked atomic.Int64 }

func (p *fullPressure) Pressure() float64 { p.asked.Add(1); return 1 }

// TestPressureHoldsBackButNeverStalls: under full pressure that never
// lets up (enrich slow for good), ingest and extraction are held back
// (the pacer is consulted before every batch and job, which then run one
// at a time) but every turn is still recorded and extracted: a wait for a
// turn is bounded by MaxPause.
func TestPressureHoldsBackButNeverStalls(t *testing.T) {
	e := setup(t)
	p := &fullPressure{}
	e.start(extractor.NewRules(), func(c *worker.Config) {
		c.Pacer, c.MaxPause = p, 20*time.Millisecond
		c.JobSize = 1
	})
	const n = 12
	for i := range n {
		e.publish(events.Turn{ID: fmt.Sprintf("p%d", i), UserID: "alice", UserMessage: fmt.Sprintf("note %d about the garden", i), AssistantResponse: "ok"})
	}
	st := e.waitDone(n)
	if st.TurnsProcessed != n {
		t.Fatalf("stats = %+v, want %d processed", st, n)
	}
	// One ask per batch (at least one) and per job (n, JobSize 1).
	if got := p.asked.Load(); got < n+1 {
		t.Fatalf("the pacer was asked %d times, want at least %d (every batch and every job)", got, n+1)
	}
}
