package worker

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestAloneWakeWaitsForTheModelServer: a job letting modelAloneLock go
// while the model server refuses connections (its request brought the
// server down, a poison turn's second crash) wakes no waiter then, but at
// the server's next answer (not one that comes while a run of the process
// holds the lock); while it accepts, the waiter is woken at once.
// Before, the waiter was woken into the dead server, snoozed as a job the
// server went down with (which nothing wakes) and woke the next, until
// every waiter waited out a snooze of its own (a review).
func TestAloneWakeWaitsForTheModelServer(t *testing.T) {
	e := raceSetup(t)
	s := storetest.New(t)
	worker := func(baseURL string) *Worker {
		t.Helper()
		llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: baseURL, Model: "fake"})
		if err != nil {
			t.Fatal(err)
		}
		w, err := New(Config{Conn: e.js.Conn(), Store: s, Extractor: llm, Logger: slog.New(slog.DiscardHandler), Prefix: e.prefix, Stream: e.stream})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	waiting := func() int64 {
		t.Helper()
		var id int64
		if err := s.Pool().QueryRow(e.ctx, `INSERT INTO river_job (kind, args, queue, state, max_attempts, scheduled_at, metadata)
			VALUES ($1, '{}', 'q', 'scheduled', 5, now() + interval '1 minute', jsonb_build_object($2::text, $3::text, $4::text, 1)) RETURNING id`,
			ExtractJobKind, metaSnoozedFor, snoozedForAlone, metaAloneHolds).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	due := func(id int64) bool {
		t.Helper()
		var due bool
		if err := s.Pool().QueryRow(e.ctx, `SELECT state = 'available' AND scheduled_at <= now() FROM river_job WHERE id = $1`, id).Scan(&due); err != nil {
			t.Fatal(err)
		}
		return due
	}

	// An address that refuses connections: a listener's, closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	w := worker("http://" + addr + "/v1")
	id := waiting()
	w.aloneReleased(context.Background())
	if due(id) {
		t.Errorf("waiter woken while the model server refuses connections; want it woken at its next answer")
	}
	// An answer while a run of the process holds the lock (its own
	// request's, maybe) leaves the wake to that run's release.
	w.aloneHolding.Add(1)
	w.modelAnswered()
	if due(id) {
		t.Errorf("waiter woken at an answer while a run of the process holds the lock")
	}
	w.aloneHolding.Add(-1)
	w.modelAnswered()
	if !due(id) {
		t.Errorf("waiter not woken at the model server's answer")
	}

	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	w = worker(srv.URL + "/v1")
	id = waiting()
	w.aloneReleased(context.Background())
	if !due(id) {
		t.Errorf("waiter not woken with the model server accepting connections")
	}
}

// TestAloneWakeAtAnAnswerDuringTheDial: the model server's answer
// arriving while a job letting modelAloneLock go dials the server (gone)
// wakes the waiter, even when the dial then finds the server refusing:
// the answer is newer. Before, the wake was marked due only after the
// dial, so that answer found none due and the waiter stayed asleep until
// the server's next answer or its own snooze (a review).
func TestAloneWakeAtAnAnswerDuringTheDial(t *testing.T) {
	e := raceSetup(t)
	s := storetest.New(t)
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: "http://127.0.0.1:1/v1", Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(Config{Conn: e.js.Conn(), Store: s, Extractor: llm, Logger: slog.New(slog.DiscardHandler), Prefix: e.prefix, Stream: e.stream})
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := s.Pool().QueryRow(e.ctx, `INSERT INTO river_job (kind, args, queue, state, max_attempts, scheduled_at, metadata)
		VALUES ($1, '{}', 'q', 'scheduled', 5, now() + interval '1 minute', jsonb_build_object($2::text, $3::text, $4::text, 1)) RETURNING id`,
		ExtractJobKind, metaSnoozedFor, snoozedForAlone, metaAloneHolds).Scan(&id); err != nil {
		t.Fatal(err)
	}
	// The dial: the server answers an extraction while it is under way,
	// then the dial is refused. Once: each answer arms a wake, whose own
	// check for a refusing server would answer again, a loop that ran
	// (and took a core) until the package's end.
	var answered atomic.Bool
	w.modelWaits.refuses = func(context.Context) bool {
		if answered.CompareAndSwap(false, true) {
			w.modelAnswered()
		}
		return true
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	w.aloneReleased(context.Background())
	var due bool
	if err := s.Pool().QueryRow(e.ctx, `SELECT state = 'available' AND scheduled_at <= now() FROM river_job WHERE id = $1`, id).Scan(&due); err != nil {
		t.Fatal(err)
	}
	if !due {
		t.Errorf("waiter not woken by the model server's answer during the dial")
	}
	if w.aloneWakeDue.Load() {
		t.Errorf("a wake is still due after the answer woke the waiter; want it taken once")
	}
}
