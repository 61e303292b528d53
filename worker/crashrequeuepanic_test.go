package worker_test

import (
	"context"
	"testing"

	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// crashThenPanic answers as its rules, but a burst's request and the
// request of the turn crash are cut by a crash of the model server, and
// that of the turn bad panics.
type crashThenPanic struct {
	*extractor.Rules
	crash, bad string // event ids
}

func crashed() error {
	return &extractor.Error{Kind: extractor.KindTransient, Crashed: true, Reason: "connection reset; the server refuses connections since"}
}

func (c *crashThenPanic) ExtractBatch(context.Context, extractor.BatchInput) (extractor.BatchResult, error) {
	return extractor.BatchResult{}, crashed()
}

func (c *crashThenPanic) Extract(ctx context.Context, in extractor.Input) (extractor.Result, error) {
	switch in.Turn.EventID {
	case c.crash:
		return extractor.Result{}, crashed()
	case c.bad:
		panic("extraction bug of one turn")
	}
	return c.Rules.Extract(ctx, in)
}

// TestCrashLeftoverTurnPanicFailsAlone: the turns a burst's crash leaves
// unsent (its second crash failed the turn sent alone before them) get a
// job each, so that a turn of them that panics at its last attempt fails
// alone: of a burst of 3 whose request and first turn crash the server,
// the first fails for its crashes, the second, which panics, fails, and the
// third is processed. Before, the crash gave the 2 leftover turns one job,
// which panicked on the second at its last attempt and failed the third
// with it, unsent.
func TestCrashLeftoverTurnPanicFailsAlone(t *testing.T) {
	e := setup(t)
	turns, ids := poisonTurns("unused", "b", 3, -1, "c1")
	insertBurst(t, e, turns, ids)
	e.start(&crashThenPanic{Rules: extractor.NewRules(), crash: ids[0], bad: ids[1]}, func(c *worker.Config) {
		c.MaxAttempts = 2
	})
	e.waitDone(3)
	want := map[string]string{ids[0]: store.StatusFailed, ids[1]: store.StatusFailed, ids[2]: store.StatusProcessed}
	for _, id := range ids {
		turn, err := e.store.GetTurn(e.ctx, "u", id)
		if err != nil || turn.Status != want[id] {
			t.Errorf("turn %s = %s (%q), %v; want %s", id, turn.Status, turn.LastError, err, want[id])
		}
	}
}
