package worker_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// waitingEmbedJob is an embed or chunk embed job as the wake tests read it.
type waitingEmbedJob struct {
	kind, state    string
	due, finalized *time.Time
	errors         int
	meta           struct {
		For      string `json:"memoryd_snoozed_for"`
		Waits    int    `json:"memoryd_model_waits"`
		Wait     int64  `json:"memoryd_model_wait_ms"`
		Unwaited int64  `json:"memoryd_model_unwaited_ms"`
		Wakes    int    `json:"memoryd_wakes"`
	}
}

// embedJobsByID reads the embed and chunk embed jobs.
func (e *env) embedJobsByID() map[int64]waitingEmbedJob {
	e.t.Helper()
	rows, err := e.store.Pool().Query(e.ctx, `SELECT id, kind, state::text, scheduled_at, finalized_at, coalesce(array_length(errors, 1), 0), metadata
		FROM river_job WHERE kind IN ($1, $2)`, worker.EmbedJobKind, worker.ChunkEmbedJobKind)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]waitingEmbedJob{}
	for rows.Next() {
		var (
			id   int64
			j    waitingEmbedJob
			meta []byte
		)
		if err := rows.Scan(&id, &j.kind, &j.state, &j.due, &j.finalized, &j.errors, &meta); err != nil {
			e.t.Fatal(err)
		}
		_ = json.Unmarshal(meta, &j.meta)
		out[id] = j
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// TestEmbeddingsAnswerWakesEmbedJobs: embed and chunk embed jobs meeting
// an embeddings server that is down (503s) wait for it without spending
// attempts, as extraction jobs wait for the model server: each snooze
// counted whole toward --llm-max-outage, its spread credited; and when
// the server answers an embed job again they run at once, not when their
// snoozes end (about a minute here), with the part the wake cut short
// credited; so does its answer to a query enrich embedded
// (Worker.EmbeddingsAnswered). Before, each failure spent an attempt, and
// the jobs waited out River's backoff once the server was back.
func TestEmbeddingsAnswerWakesEmbedJobs(t *testing.T) {
	for _, query := range []bool{false, true} {
		name := "an embed job's answer"
		if query {
			name = "a query's answer"
		}
		t.Run(name, func(t *testing.T) { embeddingsAnswerWakes(t, query) })
	}
}

func embeddingsAnswerWakes(t *testing.T, query bool) {
	e := setup(t)
	srv := embeddingtest.New(t)
	srv.Fail(http.StatusServiceUnavailable, "")
	w, _ := e.startWorker(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(embedder(t, srv, "m1"), -1)(c)
		c.JobRetryBase = time.Minute
	})
	users := []string{"ann", "bea", "cat"}
	for _, u := range users {
		e.publish(events.Turn{ID: "t-" + u, UserID: u, UserMessage: "My dog is named Rex.", AssistantResponse: "Good dog."})
	}
	e.waitDone(int64(len(users)))
	// A document chunked inline: its chunk embed job waits too.
	err := e.store.InTx(e.ctx, func(_ pgx.Tx, q *store.Store) error {
		_, err := q.PutDocument(e.ctx, store.DocumentPut{Owner: store.Owner{User: "ann"}, Collection: "notes", DocID: "d",
			Content: sections("garden", 3), Chunk: enricher.ChunkDocument})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	due := map[int64]time.Time{}
	e.waitFor("the embed and chunk embed jobs snoozed for the embeddings server", func() (bool, string) {
		clear(due)
		kinds := map[string]int{}
		for id, j := range e.embedJobsByID() {
			if j.state == "scheduled" && j.meta.For == "model_unreachable" {
				due[id] = *j.due
				kinds[j.kind]++
			}
		}
		return kinds[worker.EmbedJobKind] == len(users) && kinds[worker.ChunkEmbedJobKind] >= 1, fmt.Sprint(kinds)
	})
	credited := map[int64]int64{} // before the wake
	for id, j := range e.embedJobsByID() {
		if _, ok := due[id]; !ok {
			continue
		}
		credited[id] = j.meta.Unwaited
		// Counted a minute (its first snooze, with JobRetryBase a
		// minute): its snooze, which the spread shortens, and the rest
		// credited as not waited.
		if j.errors != 0 || j.meta.Waits != 1 || j.meta.Wait <= 0 || j.meta.Wait+j.meta.Unwaited != time.Minute.Milliseconds() {
			t.Errorf("%s job %d: %d errors, %d waits, a snooze of %d ms and %d ms not waited; want no attempt spent, one wait, and the minute counted",
				j.kind, id, j.errors, j.meta.Waits, j.meta.Wait, j.meta.Unwaited)
		}
	}
	srv.Recover()
	if query {
		w.EmbeddingsAnswered() // as the enricher's observer says it
	} else {
		// A new write's embed job meets the server answering.
		e.publish(events.Turn{ID: "t-new", UserID: "dan", UserMessage: "My dog is named Rex.", AssistantResponse: "Good dog."})
		users = append(users, "dan")
	}
	for _, u := range users {
		e.waitEmbedded(u, "m1", 1)
	}
	e.waitChunksEmbedded("ann", "m1", 1)
	var jobs map[int64]waitingEmbedJob
	e.waitFor("the woken jobs finalized", func() (bool, string) {
		jobs = e.embedJobsByID()
		for id := range due {
			if jobs[id].finalized == nil {
				return false, fmt.Sprintf("job %d %s", id, jobs[id].state)
			}
		}
		return true, ""
	})
	for id, at := range due {
		j := jobs[id]
		if j.state != "completed" || !j.finalized.Before(at) {
			t.Errorf("%s job %d: %s at %v; want completed before its snooze ended at %v", j.kind, id, j.state, j.finalized, at)
		}
		if j.meta.Wakes != 1 || j.meta.Unwaited <= credited[id] || j.errors != 0 {
			t.Errorf("%s job %d: %d wakes, %d ms not waited, %d errors; want one wake, the part it cut short credited, no attempt spent",
				j.kind, id, j.meta.Wakes, j.meta.Unwaited, j.errors)
		}
	}
}

// TestEmbeddingsDownAgainAfterItsAnswerWakesNone: an embeddings server
// that answers one request and goes down again with the next does not
// have the embed jobs waiting for it woken into that outage by the wakes
// that follow its answer (every second for 5 s), each logged as
// "embeddings server answering", as TestServerDownAgainAfterItsAnswerWakesNone
// for the model server; its next answer wakes them.
func TestEmbeddingsDownAgainAfterItsAnswerWakesNone(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	srv.Fail(http.StatusServiceUnavailable, "")
	var logs lockedBuffer
	e.start(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(embedder(t, srv, "m1"), -1)(c)
		c.JobRetryBase = time.Minute // snoozes a wake alone ends within the test
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	users := []string{"ann", "bea", "cat"}
	for _, u := range users {
		e.publish(events.Turn{ID: "t-" + u, UserID: u, UserMessage: "My dog is named Rex.", AssistantResponse: "Good dog."})
	}
	waiting := func(due map[int64]time.Time) map[int64]time.Time {
		now := map[int64]time.Time{}
		for id, j := range e.embedJobsByID() {
			if _, ok := due[id]; (ok || due == nil) && j.state == "scheduled" && j.meta.For == "model_unreachable" && !j.due.Equal(due[id]) {
				now[id] = *j.due
			}
		}
		return now
	}
	var due map[int64]time.Time
	e.waitFor("the embed jobs snoozed for the embeddings server", func() (bool, string) {
		due = waiting(nil)
		return len(due) == len(users), fmt.Sprintf("%d snoozed", len(due))
	})
	// The next request is answered, every later one fails again.
	srv.Recover()
	srv.FailFrom(2, http.StatusServiceUnavailable)
	answered := time.Now()
	e.publish(events.Turn{ID: "t-dan", UserID: "dan", UserMessage: "My dog is named Rex.", AssistantResponse: "Good dog."})
	e.waitEmbedded("dan", "m1", 1)
	// The answer wakes the 3; the server fails them again and they wait.
	e.waitFor("the woken jobs waiting again", func() (bool, string) {
		again := waiting(due)
		return len(again) == len(due), fmt.Sprintf("%d of %d", len(again), len(due))
	})
	sent := srv.Requests()
	// The wakes that follow an answer come within wakeLinger (5 s) of it,
	// a wakeEvery (1 s) apart; the jobs' snoozes end a minute or more
	// after. A request in this window is a job woken into the outage. (A
	// bound on an absence: it can miss the fault on a stalled machine,
	// not invent it.)
	for time.Since(answered) < 7*time.Second && srv.Requests() == sent {
		time.Sleep(50 * time.Millisecond) // polling for an absence, not synchronising
	}
	if n := srv.Requests(); n != sent {
		t.Errorf("%d requests sent after the embeddings server went down again, by jobs woken into the outage; want none", n-sent)
	}
	if n := strings.Count(logs.String(), "embeddings server answering; embed jobs waiting for it run now"); n != 1 {
		t.Errorf("%d lines saying the embeddings server answers, want 1 (its one answer):\n%s", n, logs.String())
	}
}
