package worker_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// reconcileOnFailure is an Observer that runs a reconcile (as the
// periodic one may, at any moment) as each extraction run that will be
// retried ends, before River sees its end: the moment a burst's turns
// are released.
type reconcileOnFailure struct {
	t        testing.TB
	ctx      context.Context
	w        atomic.Pointer[worker.Worker]
	requeued atomic.Int64
	// calls is armed once a reconcile gave a turn a job.
	calls *turnCalls
}

func (r *reconcileOnFailure) TurnRejected(string)     {}
func (r *reconcileOnFailure) Pruned(int64)            {}
func (r *reconcileOnFailure) Redacted(string, string) {}
func (r *reconcileOnFailure) Extracted(_ time.Duration, _ int, outcome string) {
	w := r.w.Load()
	if outcome != "retry" || w == nil {
		return
	}
	n, err := worker.Reconcile(r.ctx, w)
	if err != nil {
		r.t.Errorf("reconcile: %v", err)
	}
	if n > 0 {
		r.requeued.Add(int64(n))
		r.calls.arm()
	}
}

// turnCalls counts the model's one-turn requests by turn, and holds one
// back, once armed, until a second request for the same turn comes (two
// jobs extracting the turn side by side), or for at most a minute.
type turnCalls struct {
	mu    sync.Mutex
	cond  *sync.Cond
	calls map[int]int
	armed bool
}

func newTurnCalls() *turnCalls {
	c := &turnCalls{calls: map[int]int{}}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *turnCalls) call(turn int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[turn]++
	n := c.calls[turn]
	c.cond.Broadcast()
	if c.armed && n == 1 {
		stop := time.AfterFunc(time.Minute, func() {
			c.mu.Lock()
			c.armed = false
			c.cond.Broadcast()
			c.mu.Unlock()
		})
		defer stop.Stop()
		for c.armed && c.calls[turn] < 2 {
			c.cond.Wait()
		}
	}
	return n
}

func (c *turnCalls) arm() {
	c.mu.Lock()
	c.armed = true
	c.mu.Unlock()
}

func (c *turnCalls) get() map[int]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int]int, len(c.calls))
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

var catsRe = regexp.MustCompile(`I have (\d+) cats`)

// TestBurstSplitExtractsEachTurnOnce: a conversation's burst whose
// request gets invalid replies at two attempts has its turns sent one a
// request, each once, with a reconcile run after every failed run: each
// turn costs one model call of its own and keeps one context item. The
// jobs of the burst's other turns ended when they found them claimed.
// Before, a reconcile after the burst's failed attempt found those turns
// released and named by no job and gave each a job, which extracted them
// beside the burst's next run, which claimed and extracted them too (two
// calls a turn); and at the split the burst's job went on to extract
// every turn itself, leaving a turn that failed to the reconciler again.
func TestBurstSplitExtractsEachTurnOnce(t *testing.T) {
	e := setup(t)
	srv := extractortest.NewServer(t)
	var batchCalls atomic.Int64
	calls := newTurnCalls()
	// Once a reconcile gave a turn a job, a one-turn request waits for a
	// second one for the same turn: the burst's job extracting it too.
	obs := &reconcileOnFailure{t: t, ctx: e.ctx, calls: calls}
	srv.SetHandler(func(req openai.ChatCompletionRequest) extractortest.Reply {
		text, _, ok := extractor.PromptTurn(req.Messages[len(req.Messages)-1].Content)
		if !ok { // the burst's request
			if batchCalls.Add(1) == 1 {
				// The jobs of the burst's other turns run now, find
				// their turns claimed, and end.
				e.exec(`UPDATE river_job SET state = 'available', scheduled_at = now() WHERE kind = $1 AND state = 'scheduled'`, worker.ExtractJobKind)
				e.waitFor("the other turns' jobs ended", func() (bool, string) {
					var n int
					err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND state = 'completed'`, worker.ExtractJobKind).Scan(&n)
					return err == nil && n == 2, fmt.Sprint(n, err)
				})
			}
			return extractortest.Content("I am sorry, I can only answer in prose.")
		}
		m := catsRe.FindStringSubmatch(text)
		if m == nil {
			t.Errorf("a one-turn request of no turn of the burst: %q", text)
			return extractortest.Content(`{"facts":{}}`)
		}
		turn, _ := strconv.Atoi(m[1])
		n := calls.call(turn)
		// A model that words its answer otherwise at each call.
		return extractortest.Content(fmt.Sprintf(`{"facts":{"name":"Alice"},"context":[{"q":"How many cats do I have?","a":"%d cats (call %d)"}]}`, turn, n))
	})
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	turns, ids := poisonTurns("", "b", 3, -1, "c1")
	insertBurst(t, e, turns, ids)
	w, _ := e.startWorker(llm, func(c *worker.Config) {
		c.MaxAttempts = 5
		c.Observer = obs
	})
	obs.w.Store(w)
	st := e.waitDone(3)
	if st.TurnsProcessed != 3 {
		t.Errorf("stats %+v, want the burst's 3 turns processed", st)
	}
	if n := obs.requeued.Load(); n != 0 {
		t.Errorf("reconciles gave %d of the burst's turns a job of their own; want none (each had one)", n)
	}
	if b := batchCalls.Load(); b != 4 {
		t.Errorf("%d calls for the burst's request, want 4 (two attempts, two calls each)", b)
	}
	for turn, n := range calls.get() {
		if n != 1 {
			t.Errorf("turn b%d: %d one-turn requests, want 1", turn, n)
		}
	}
	if got := len(calls.get()); got != 3 {
		t.Errorf("%d turns got a one-turn request, want 3", got)
	}
	rows, err := e.store.Pool().Query(e.ctx, `SELECT event_id, count(*) FROM context WHERE user_id = 'u' GROUP BY event_id ORDER BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	items := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		items[id] = n
	}
	for _, id := range ids {
		if items[id] != 1 {
			t.Errorf("turn %s: %d context items, want 1", id, items[id])
		}
	}
}

// TestBurstTakenByAnotherTurnsJobSplits: a conversation's burst whose
// request got invalid replies from its job, then taken by the job of
// another of its turns (its first job waiting out its backoff), is sent
// one a request at that job's first attempt: the burst's attempts are its
// turns', whichever job made them. Before, each job kept its own count
// and last digest, so the second job's attempt failed the burst again and
// its turns waited for yet another attempt (and the last failed every
// turn for good).
func TestBurstTakenByAnotherTurnsJobSplits(t *testing.T) {
	e := setup(t)
	// Otherwise at each call: no repeat to go by.
	llm, batchCalls, turnCalls := burstOfThree(t, e, extractor.LLMConfig{}, func(n int64) string {
		return fmt.Sprintf("I am sorry, I can only answer in prose (%d).", n)
	})
	var once sync.Once
	obs := &onOutcome{f: func(outcome string) {
		if outcome == "retry" {
			// The first job waits an hour for its retry; b1's job, due
			// now, takes the burst.
			once.Do(func() {
				e.exec(`UPDATE river_job SET state = 'available', scheduled_at = now() WHERE kind = $1 AND args->'event_ids' ? 'b1'`, worker.ExtractJobKind)
			})
		}
	}}
	e.start(llm, func(c *worker.Config) {
		c.MaxAttempts = 5
		c.JobRetryBase = time.Hour
		c.Observer = obs
	})
	var st store.UserStats
	e.waitFor("the burst's turns processed, or b1's job failed it", func() (bool, string) {
		var err error
		if st, err = e.store.Stats(e.ctx, "u"); err != nil {
			return false, err.Error()
		}
		var retryable int
		if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND state = 'retryable' AND args->'event_ids' ? 'b1'`,
			worker.ExtractJobKind).Scan(&retryable); err != nil {
			return false, err.Error()
		}
		return st.TurnsProcessed == 3 || retryable > 0, fmt.Sprintf("%+v, b1's job retryable: %d", st, retryable)
	})
	if st.TurnsProcessed != 3 {
		t.Fatalf("stats %+v: b1's job failed the burst at its first attempt instead of sending its turns one a request", st)
	}
	if b, o := batchCalls.Load(), turnCalls.Load(); b != 4 || o != 3 {
		t.Errorf("calls: %d for the burst, %d for its turns; want 4 (an attempt of each job), 3", b, o)
	}
}

// TestBurstInvalidAtItsLastAttemptSplits: a burst whose request gets
// invalid replies at its job's last attempt (--max-attempts 1 here) sends
// its turns one a request rather than failing every turn of it for good:
// each turn gets a request, and an attempt, of its own.
func TestBurstInvalidAtItsLastAttemptSplits(t *testing.T) {
	e := setup(t)
	llm, batchCalls, turnCalls := burstOfThree(t, e, extractor.LLMConfig{}, func(int64) string {
		return "I am sorry, I can only answer in prose."
	})
	e.start(llm, func(c *worker.Config) { c.MaxAttempts = 1 })
	burstProcessed(t, e)
	if b, o := batchCalls.Load(), turnCalls.Load(); b != 2 || o != 3 {
		t.Errorf("calls: %d for the burst, %d for its turns; want 2 (one attempt), 3", b, o)
	}
	// b0's job extracted its own turn alone, and gave b1 and b2 a job each.
	checkBurstJob(t, e, 0, 5)
}

// burstOfThree inserts user u's burst of three turns (b0-b2, conversation
// c1) and starts a fake model answering the burst's request with
// batch(n), n the burst's calls so far, and each turn alone with a fact.
// It returns the model (cfg with the server's URL and model "fake") and
// the counts of the burst's calls and of one-turn calls.
func burstOfThree(t *testing.T, e *env, cfg extractor.LLMConfig, batch func(n int64) string) (*extractor.LLM, *atomic.Int64, *atomic.Int64) {
	t.Helper()
	return burstOfThreeReplies(t, e, cfg, func(n int64) extractortest.Reply { return extractortest.Content(batch(n)) })
}

// burstOfThreeReplies is burstOfThree with the burst's request answered
// with batch(n), a whole reply (an error status, say).
func burstOfThreeReplies(t *testing.T, e *env, cfg extractor.LLMConfig, batch func(n int64) extractortest.Reply) (*extractor.LLM, *atomic.Int64, *atomic.Int64) {
	t.Helper()
	srv := extractortest.NewServer(t)
	var batchCalls, turnCalls atomic.Int64
	srv.SetHandler(func(req openai.ChatCompletionRequest) extractortest.Reply {
		if _, _, ok := extractor.PromptTurn(req.Messages[len(req.Messages)-1].Content); !ok {
			return batch(batchCalls.Add(1))
		}
		turnCalls.Add(1)
		return extractortest.Content(`{"facts":{"name":"Alice"}}`)
	})
	cfg.BaseURL, cfg.Model = srv.URL(), "fake"
	llm, err := extractor.NewLLM(cfg)
	if err != nil {
		t.Fatal(err)
	}
	turns, ids := poisonTurns("", "b", 3, -1, "c1")
	insertBurst(t, e, turns, ids)
	return llm, &batchCalls, &turnCalls
}

// onOutcome is an Observer calling f with each extraction run's outcome.
type onOutcome struct{ f func(outcome string) }

func (o *onOutcome) TurnRejected(string)                              {}
func (o *onOutcome) Pruned(int64)                                     {}
func (o *onOutcome) Redacted(string, string)                          {}
func (o *onOutcome) Extracted(_ time.Duration, _ int, outcome string) { o.f(outcome) }

// burstProcessed waits for burstOfThree's turns and fails the test, naming
// the failed ones, unless all 3 were processed.
func burstProcessed(t *testing.T, e *env) {
	t.Helper()
	st := e.waitDone(3)
	if st.TurnsProcessed != 3 || st.TurnsFailed != 0 {
		failed, _ := e.store.FailedTurns(e.ctx, "u", 10)
		for _, f := range failed {
			t.Errorf("failed: %s attempts=%d %q", f.EventID, f.Attempts, f.LastError)
		}
		t.Fatalf("stats %+v, want the burst's 3 turns processed", st)
	}
}
