package worker_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/worker"
)

// TestWakeAfterACrashWaitsForTheModelServer: a wake of the jobs waiting
// for the model server that comes after the server went down with a
// request in flight (the connection cut, then refused while a supervisor
// restarts it) wakes none: here one of the wakes that follow the server's
// last answer (every second for 5 s), the crash coming within them. Its
// next answer wakes them, that wake alone counted toward their maxWakes.
// Before, a crash did not count the server as down (extractor.LLM.Down):
// such a wake brought every waiting job back into the dead server, to be
// refused and snoozed again, and counted toward its wakes (a crash walk:
// 3 wakes of 44 jobs).
func TestWakeAfterACrashWaitsForTheModelServer(t *testing.T) {
	e := setup(t)
	const marker = "ZZ-CRASH-THE-RUNNER-ZZ"
	srv := newCrashingServer(t, marker, time.Hour) // restarted below
	llm, w := unstartedServe(t, e, srv.URL())
	// Jobs snoozed for the server (as outcome leaves them, a minute's
	// wait counted), their snoozes to end a minute from now.
	ids := snoozedForTheModel(t, e, 4)
	states := func() []modelWaiter { return modelWaiters(t, e, ids) }
	turn := modelTurn

	if _, err := llm.Extract(e.ctx, turn("My name is Alice.")); err != nil {
		t.Fatalf("the server's answer: %v", err)
	}
	_, err := llm.Extract(e.ctx, turn("My name is Alice. "+marker))
	if !extractor.IsCrashed(err) || extractor.IsUnreachable(err) {
		// The job's own decision (an attempt spent, the crash counted)
		// rests on it.
		t.Fatalf("request the server went down with: %v (crashed %v, unreachable %v); want crashed, not unreachable",
			err, extractor.IsCrashed(err), extractor.IsUnreachable(err))
	}
	if !llm.Down() {
		t.Error("the model server does not count as down after it went down with a request in flight")
	}
	// A wake that follows the answer, coming after the crash.
	worker.WakeLingering(e.ctx, w)
	for i, st := range states() {
		if st.state != "scheduled" || st.due || st.wakes != 0 || st.woken {
			t.Errorf("job %d after a wake while the server is down: %+v; want still snoozed, no wake counted", ids[i], st)
		}
	}

	srv.restart()
	if _, err := llm.Extract(e.ctx, turn("My name is Alice.")); err != nil {
		t.Fatalf("the server's answer after its restart: %v", err)
	}
	if llm.Down() {
		t.Error("the model server counts as down after it answered")
	}
	worker.ModelAnswered(w)
	wokenOnce(t, e, ids, "the waiting jobs woken by the server's answer")
}

// TestWakeOfAnotherServeWaitsForACrashedModelServer: with two serves
// sharing one model server, a crash that cuts a request of serve A only
// leaves serve B counting the server up (B's requests were answered, none
// cut or refused since); a wake of B's that follows its last answer,
// coming after the crash while the server refuses connections, wakes none
// of the jobs waiting for the server (every serve's), and counts no wake.
// B's next answer wakes them, that wake alone counted toward their
// maxWakes. Before, B's wake brought every waiting job back into the
// restart, to be refused and snoozed again, each wake counted toward the
// job's bound (docs/operations.md: still open after
// TestWakeAfterACrashWaitsForTheModelServer).
func TestWakeOfAnotherServeWaitsForACrashedModelServer(t *testing.T) {
	e := setup(t)
	const marker = "ZZ-CRASH-THE-RUNNER-ZZ"
	srv := newCrashingServer(t, marker, time.Hour) // restarted below
	serve := func() (*extractor.LLM, *worker.Worker) { return unstartedServe(t, e, srv.URL()) }
	llmA, _ := serve()
	llmB, wB := serve()
	ids := snoozedForTheModel(t, e, 4)

	// B's answer, which its wakes follow for wakeLinger.
	if _, err := llmB.Extract(e.ctx, modelTurn("My name is Bob.")); err != nil {
		t.Fatalf("the server's answer to serve B: %v", err)
	}
	// The server goes down with A's request in flight, none of B's.
	if _, err := llmA.Extract(e.ctx, modelTurn("My name is Alice. "+marker)); !extractor.IsCrashed(err) {
		t.Fatalf("serve A's request the server went down with: %v; want crashed", err)
	}
	if llmB.Down() {
		t.Fatal("serve B counts the server down, none of its requests cut or refused: the case this test is about is gone")
	}
	// One of B's wakes that follow its answer, coming now.
	worker.WakeLingering(e.ctx, wB)
	for i, st := range modelWaiters(t, e, ids) {
		if st.state != "scheduled" || st.due || st.wakes != 0 || st.woken {
			t.Errorf("job %d after serve B's wake while the server refuses connections: %+v; want still snoozed, no wake counted", ids[i], st)
		}
	}

	srv.restart()
	if _, err := llmB.Extract(e.ctx, modelTurn("My name is Bob.")); err != nil {
		t.Fatalf("the server's answer to serve B after its restart: %v", err)
	}
	worker.ModelAnswered(wB)
	wokenOnce(t, e, ids, "the waiting jobs woken by the server's answer to serve B")
}

// TestWakeOfAnotherServeWaitsForACrashedEmbeddingsServer is
// TestWakeOfAnotherServeWaitsForACrashedModelServer for the embed and
// chunk embed jobs waiting for the embeddings server: with two serves
// sharing it, a crash that cuts a request of serve A only leaves serve B
// counting the server up (embedding.Client.LastDown zero: B's requests
// were answered, none cut or refused since); a wake of B's that follows
// its last answer, coming while the server refuses connections, wakes none
// and counts no wake. B's next answer wakes them, that wake alone counted
// toward their maxWakes. Before, B's wake brought every waiting job back
// into the restart, each wake counted toward the job's bound.
func TestWakeOfAnotherServeWaitsForACrashedEmbeddingsServer(t *testing.T) {
	e := setup(t)
	const marker = "ZZ-CRASH-THE-EMBEDDER-ZZ"
	srv := embeddingtest.New(t)
	embA, _ := unstartedEmbedServe(t, e, srv)
	embB, wB := unstartedEmbedServe(t, e, srv)
	ids := append(snoozedForTheServer(t, e, worker.EmbedJobKind, 2), snoozedForTheServer(t, e, worker.ChunkEmbedJobKind, 2)...)

	// B's answer, which its wakes follow for wakeLinger.
	if _, err := embB.Embed(e.ctx, []string{"My dog is named Rex."}); err != nil {
		t.Fatalf("the server's answer to serve B: %v", err)
	}
	// The server goes down with A's request in flight, none of B's, and
	// refuses connections while it restarts.
	srv.CrashOn(marker, 0)
	if _, err := embA.Embed(e.ctx, []string{"My dog is named Rex. " + marker}); err == nil {
		t.Fatal("serve A's request the server went down with was answered")
	}
	srv.Stop()
	if !embB.LastDown().IsZero() {
		t.Fatal("serve B counts the server down, none of its requests cut or refused: the case this test is about is gone")
	}
	// One of B's wakes that follow its answer, coming now.
	worker.WakeEmbedLingering(e.ctx, wB)
	for i, st := range modelWaiters(t, e, ids) {
		if st.state != "scheduled" || st.due || st.wakes != 0 || st.woken {
			t.Errorf("job %d after serve B's wake while the embeddings server refuses connections: %+v; want still snoozed, no wake counted", ids[i], st)
		}
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	srv.Recover()
	if _, err := embB.Embed(e.ctx, []string{"My dog is named Rex."}); err != nil {
		t.Fatalf("the server's answer to serve B after its restart: %v", err)
	}
	wB.EmbeddingsAnswered()
	wokenOnce(t, e, ids, "the waiting jobs woken by the server's answer to serve B")
}

// snoozedForTheModel inserts n extraction jobs snoozed for the model
// server (as outcome leaves them, a minute's wait counted), their snoozes
// to end a minute from now, and returns their ids.
func snoozedForTheModel(t *testing.T, e *env, n int) []int64 {
	t.Helper()
	return snoozedForTheServer(t, e, worker.ExtractJobKind, n)
}

// snoozedForTheServer inserts n jobs of kind snoozed for their server
// (the model server's or the embeddings server's: outcome leaves both
// alike, a minute's wait counted), their snoozes to end a minute from now,
// and returns their ids.
func snoozedForTheServer(t *testing.T, e *env, kind string, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	for i := range ids {
		if err := e.store.Pool().QueryRow(e.ctx, `INSERT INTO river_job (kind, args, queue, state, max_attempts, scheduled_at, metadata)
			VALUES ($1, '{}', 'q', 'scheduled', 5, now() + interval '1 minute',
				'{"memoryd_snoozed_for": "model_unreachable", "memoryd_model_waits": 1, "memoryd_model_wait_ms": 60000}') RETURNING id`,
			kind).Scan(&ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// modelWaiter is a job of snoozedForTheModel as a wake leaves it.
type modelWaiter struct {
	state string
	due   bool
	wakes int
	woken bool
}

// modelWaiters returns the jobs ids as they are now. A wake stamps with
// Postgres's now() (store.WakeWaiting), so due is exact.
func modelWaiters(t *testing.T, e *env, ids []int64) []modelWaiter {
	t.Helper()
	out := make([]modelWaiter, len(ids))
	for i, id := range ids {
		var meta []byte
		if err := e.store.Pool().QueryRow(e.ctx, `SELECT state, scheduled_at <= now(), metadata FROM river_job WHERE id = $1`, id).
			Scan(&out[i].state, &out[i].due, &meta); err != nil {
			t.Fatal(err)
		}
		var m struct {
			Wakes int  `json:"memoryd_wakes"`
			Woken bool `json:"memoryd_woken"`
		}
		if err := json.Unmarshal(meta, &m); err != nil {
			t.Fatal(err)
		}
		out[i].wakes, out[i].woken = m.Wakes, m.Woken
	}
	return out
}

// modelTurn is an input of one turn with the user message msg.
func modelTurn(msg string) extractor.Input {
	return extractor.Input{UserID: "u", Turn: extractor.Turn{EventID: "e", UserMessage: msg, AssistantResponse: "ok", Timestamp: time.Now()}}
}

// unstartedServe is a serve's model client of the server at url and a
// worker using it, not started: the test runs the wakes, and no job.
func unstartedServe(t *testing.T, e *env, url string) (*extractor.LLM, *worker.Worker) {
	t.Helper()
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: url, Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(worker.Config{Conn: e.nc, Store: e.store, Extractor: llm, Logger: slog.New(slog.DiscardHandler),
		Prefix: e.prefix, Stream: e.stream})
	if err != nil {
		t.Fatal(err)
	}
	return llm, w
}

// unstartedEmbedServe is a serve's embeddings client of srv and a worker
// embedding with it, not started: the test runs the wakes, and no job.
func unstartedEmbedServe(t *testing.T, e *env, srv *embeddingtest.Server) (*embedding.Client, *worker.Worker) {
	t.Helper()
	emb := embedder(t, srv, "m1")
	w, err := worker.New(worker.Config{Conn: e.nc, Store: e.store, Extractor: extractor.NewRules(), Embedder: emb,
		Logger: slog.New(slog.DiscardHandler), Prefix: e.prefix, Stream: e.stream})
	if err != nil {
		t.Fatal(err)
	}
	return emb, w
}

// wokenOnce waits until the jobs ids are woken (available, due, marked
// woken), then checks that one wake was counted for each: the answer's.
func wokenOnce(t *testing.T, e *env, ids []int64, what string) {
	t.Helper()
	// Due is checked on the read that finds them woken, not waited for: a
	// wake that left them a minute's snooze was otherwise passed once the
	// snooze ran out, within the wait.
	var woken []modelWaiter
	e.waitFor(what, func() (bool, string) {
		woken = modelWaiters(t, e, ids)
		for _, s := range woken {
			if s.state != "available" || !s.woken {
				return false, fmt.Sprintf("%+v", woken)
			}
		}
		return true, ""
	})
	for i, st := range woken {
		if !st.due {
			t.Errorf("job %d woken but not due: %+v", ids[i], st)
		}
	}
	for i, st := range modelWaiters(t, e, ids) {
		if st.wakes != 1 {
			t.Errorf("job %d: %d wakes counted; want 1, the answer's", ids[i], st.wakes)
		}
	}
}
