package worker_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

func embedder(t testing.TB, srv *embeddingtest.Server, model string) *embedding.Client {
	t.Helper()
	c, err := embedding.New(embedding.Config{BaseURL: srv.URL, Model: model, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// withEmbedder turns embedding on with sweep (<0: none).
func withEmbedder(emb worker.Embedder, sweep time.Duration) func(*worker.Config) {
	return func(c *worker.Config) {
		c.Embedder = emb
		c.EmbedSweepInterval = sweep
	}
}

// waitEmbedded waits until every context item of user has a current vector
// of model, and at least min items exist.
func (e *env) waitEmbedded(user, model string, min int64) store.EmbeddingCount {
	e.t.Helper()
	var n store.EmbeddingCount
	e.waitFor(fmt.Sprintf("%s's items embedded with %s", user, model), func() (bool, string) {
		var err error
		n, err = e.store.CountEmbeddings(e.ctx, user, model)
		if err != nil {
			return false, err.Error()
		}
		return n.Items >= min && n.Embedded == n.Items, fmt.Sprintf("%+v", n)
	})
	return n
}

// checkVectors checks that user's vectors of model are the fake server's
// vectors of the items' text, in dims dimensions.
func (e *env) checkVectors(user, model string, dims int) {
	e.t.Helper()
	items, err := e.store.RecentContext(e.ctx, user, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	text := map[int64]string{}
	for _, it := range items {
		text[it.ID] = it.Question
		if it.Answer != "" {
			text[it.ID] += "\n" + it.Answer
		}
	}
	vs, err := e.store.UserEmbeddings(e.ctx, user, model)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(vs) != len(items) {
		e.t.Fatalf("%d vectors of %s for %d items", len(vs), model, len(items))
	}
	for _, v := range vs {
		q, err := embedding.Decode(v.Vector, v.Dims)
		if err != nil || v.Dims != dims {
			e.t.Fatalf("item %d: dims %d (want %d), %v", v.ContextID, v.Dims, dims, err)
		}
		if cos := q.Dot(embeddingtest.Vector(text[v.ContextID], dims)); cos < 0.98 {
			e.t.Errorf("item %d: cosine with its text's vector %.3f, want ≈1", v.ContextID, cos)
		}
	}
}

// TestEmbedPublishedTurns: the context items of published turns get
// vectors of the configured model, with the dimensions the server replied
// with, from jobs the extraction's transaction inserted (the sweep is off).
func TestEmbedPublishedTurns(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	e.start(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	e.publish(events.Turn{ID: "a1", UserID: "alice", UserMessage: "My dog is named Rex.", AssistantResponse: "Rex is a fine name."})
	e.publish(events.Turn{ID: "a2", UserID: "alice", UserMessage: "I live in Paris.", AssistantResponse: "Lovely city."})
	e.publish(events.Turn{ID: "b1", UserID: "bob", UserMessage: "I prefer tea.", AssistantResponse: "Noted."})
	e.waitDone(3)
	e.waitEmbedded("alice", "m1", 2)
	e.waitEmbedded("bob", "m1", 1)
	e.checkVectors("alice", "m1", embeddingtest.DefaultDims)
	if n, _ := e.store.CountEmbeddings(e.ctx, "", "other"); n.Embedded != 0 {
		t.Errorf("vectors of a model never configured: %+v", n)
	}
}

// TestEmbedEndpointDown: with the embeddings server failing, extraction
// completes as ever (items lexical-only) and the embed jobs retry; once
// the server recovers the vectors arrive.
func TestEmbedEndpointDown(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	srv.Fail(http.StatusServiceUnavailable, "")
	e.start(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	e.publish(events.Turn{ID: "a1", UserID: "alice", UserMessage: "My dog is named Rex.", AssistantResponse: "Good dog."})
	e.publish(events.Turn{ID: "a2", UserID: "alice", UserMessage: "I live in Paris.", AssistantResponse: "Lovely."})
	st := e.waitDone(2)
	if st.TurnsProcessed != 2 || st.ContextItems != 2 {
		t.Fatalf("with the embeddings server down, stats %+v, want 2 turns processed and 2 items", st)
	}
	// The jobs keep trying (more requests than jobs: retried).
	e.waitFor("embed jobs retried", func() (bool, string) {
		return srv.Requests() >= 3, fmt.Sprintf("%d requests", srv.Requests())
	})
	if n, _ := e.store.CountEmbeddings(e.ctx, "alice", "m1"); n.Embedded != 0 {
		t.Fatalf("vectors while the server fails: %+v", n)
	}
	srv.Recover()
	e.waitEmbedded("alice", "m1", 2)
	e.checkVectors("alice", "m1", embeddingtest.DefaultDims)
}

// TestEmbedBackfill: items that existed before embedding was turned on
// get vectors when a backfill enqueues them, only the user's asked for.
func TestEmbedBackfill(t *testing.T) {
	e := setup(t)
	e.seedItems("alice", "bob")
	srv := embeddingtest.New(t)
	w, _ := e.startWorker(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	n, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "alice", "m1", 1, 5)
	if err != nil || n != 2 {
		t.Fatalf("backfill enqueued %d items (%v), want alice's 2", n, err)
	}
	e.waitEmbedded("alice", "m1", 2)
	e.checkVectors("alice", "m1", embeddingtest.DefaultDims)
	if n, _ := e.store.CountEmbeddings(e.ctx, "bob", "m1"); n.Embedded != 0 {
		t.Errorf("bob's items embedded by alice's backfill: %+v", n)
	}
	// Nothing is missing any more: a second backfill enqueues nothing.
	if n, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "alice", "m1", 1, 5); err != nil || n != 0 {
		t.Errorf("second backfill found %d items (%v), want 0", n, err)
	}
}

// TestEmbedModelChange: a worker started with another model (of other
// dimensions) re-embeds every item in the background through its sweep,
// while the old model's vectors stay readable.
func TestEmbedModelChange(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	stop := e.start(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	e.publish(events.Turn{ID: "a1", UserID: "alice", UserMessage: "My dog is named Rex.", AssistantResponse: "Good dog."})
	e.publish(events.Turn{ID: "a2", UserID: "alice", UserMessage: "I live in Paris.", AssistantResponse: "Lovely."})
	e.waitDone(2)
	e.waitEmbedded("alice", "m1", 2)
	stop()

	srv.SetDims(32)
	e.start(extractor.NewRules(), withEmbedder(embedder(t, srv, "m2"), time.Hour))
	e.waitEmbedded("alice", "m2", 2)
	e.checkVectors("alice", "m2", 32)
	e.checkVectors("alice", "m1", embeddingtest.DefaultDims)
}

// TestEmbedJobOfAnotherModel: a job enqueued for another model is on that
// model's queue, which this worker does not fetch: it waits, unattempted,
// for a worker of its model (before, in one shared queue, every worker
// fetched it and each run of another model's used up an attempt, so it was
// often given up before one of its model took it). A job of the queue all
// models shared before is still fetched, not run by a worker of another
// model, and given up without a warning; the items get no vector of either
// model from it.
func TestEmbedJobOfAnotherModel(t *testing.T) {
	e := setup(t)
	ids, err := e.store.InsertContext(e.ctx, []store.ContextWrite{
		{UserID: "alice", Question: "home town", Answer: "Paris", CreatedAt: t0},
		{UserID: "alice", Question: "pet", Answer: "a dog", CreatedAt: t0},
		{UserID: "alice", Question: "job", Answer: "baker", CreatedAt: t0},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := embeddingtest.New(t)
	logs := new(eventstest.SyncBuffer)
	w, _ := e.startWorker(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(embedder(t, srv, "m1"), -1)(c)
		c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	client, err := river.NewClient[pgx.Tx](riverpgxv5.New(e.store.Pool()), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m2 := func(id int64, queue string) int64 {
		t.Helper()
		res, err := client.Insert(e.ctx, worker.EmbedArgs{UserID: "alice", ContextIDs: []int64{id}, Model: "m2"}, &river.InsertOpts{Queue: queue, MaxAttempts: 2})
		if err != nil {
			t.Fatal(err)
		}
		return res.Job.ID
	}
	onItsQueue := m2(ids[0], worker.QueueEmbedFor("m2"))
	legacy := m2(ids[1], worker.QueueEmbed)
	// An m1 job after them: once it is done, the worker has fetched from
	// its queues since the m2 jobs were there.
	if _, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "alice", "m1", 64, 2); err != nil {
		t.Fatal(err)
	}
	e.waitEmbedded("alice", "m1", 3)
	e.waitFor("the m2 job of the old shared queue given up", func() (bool, string) {
		var state string
		err := e.store.Pool().QueryRow(e.ctx, `SELECT state FROM river_job WHERE id = $1`, legacy).Scan(&state)
		return state == "cancelled" || state == "discarded", fmt.Sprintf("%s %v", state, err)
	})
	var state string
	var attempt int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT state, attempt FROM river_job WHERE id = $1`, onItsQueue).Scan(&state, &attempt); err != nil || state != "available" || attempt != 0 {
		t.Errorf("the m2 job on its model's queue: %s, attempt %d (%v); want available, never attempted", state, attempt, err)
	}
	if n, _ := e.store.CountEmbeddings(e.ctx, "alice", "m2"); n.Embedded != 0 {
		t.Errorf("vectors of m2: %+v, want none", n)
	}
	// Not a failure of the embedding: no warning or error says the items
	// stay lexical-only (they have, or will have, the worker's model's).
	if strings.Contains(logs.String(), "embedding failed") {
		t.Errorf("the other model's job was logged as a failure:\n%s", logs.String())
	}
}

// TestForgetRemovesEmbedJobsAndVectors: a forget deletes the user's embed
// jobs, waiting or retrying, and the user's vectors, not another user's.
func TestForgetRemovesEmbedJobsAndVectors(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	w, _ := e.startWorker(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	e.publish(events.Turn{ID: "a1", UserID: "alice", UserMessage: "My dog is named Rex.", AssistantResponse: "Good dog."})
	e.publish(events.Turn{ID: "b1", UserID: "bob", UserMessage: "I prefer tea.", AssistantResponse: "Noted."})
	e.waitDone(2)
	e.waitEmbedded("alice", "m1", 1)
	e.waitEmbedded("bob", "m1", 1)
	// A job the server keeps failing, waiting to be retried.
	srv.Fail(http.StatusInternalServerError, "")
	if _, _, err := e.store.StoreContext(e.ctx, store.ContextWrite{UserID: "alice", Question: "home town", Answer: "Paris"}); err != nil {
		t.Fatal(err)
	}
	jobs := func(user string) int {
		var n int
		if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'user_id' = $2`,
			worker.EmbedJobKind, user).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	e.waitFor("alice's new job tried", func() (bool, string) { return srv.Requests() > 0, "" })
	if _, err := w.Forget(e.ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if n := jobs("alice"); n != 0 {
		t.Errorf("alice has %d embed jobs after forget, want 0", n)
	}
	if n := jobs("bob"); n == 0 {
		t.Error("bob's embed job went with alice's forget")
	}
	if vs, _ := e.store.UserEmbeddings(e.ctx, "alice", "m1"); len(vs) != 0 {
		t.Errorf("alice keeps %d vectors after forget", len(vs))
	}
	if vs, _ := e.store.UserEmbeddings(e.ctx, "bob", "m1"); len(vs) != 1 {
		t.Errorf("bob has %d vectors, want 1", len(vs))
	}
}

// TestEmbedEndpointSlow: a server slower than the client's timeout holds
// up nothing: extraction completes, and once the server is fast again the
// retried jobs store the vectors.
func TestEmbedEndpointSlow(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	srv.SetDelay(time.Minute)
	emb, err := embedding.New(embedding.Config{BaseURL: srv.URL, Model: "m1", Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e.start(extractor.NewRules(), withEmbedder(emb, -1))
	e.publish(events.Turn{ID: "a1", UserID: "alice", UserMessage: "My dog is named Rex.", AssistantResponse: "Good dog."})
	if st := e.waitDone(1); st.TurnsProcessed != 1 || st.ContextItems != 1 {
		t.Fatalf("with a slow embeddings server, stats %+v, want the turn processed", st)
	}
	e.waitFor("embed job timed out and retried", func() (bool, string) {
		return srv.Requests() >= 2, fmt.Sprintf("%d requests", srv.Requests())
	})
	srv.SetDelay(0)
	e.waitEmbedded("alice", "m1", 1)
}

// An embed sweep that read a user's items just before the user's forget
// committed inserts no job naming the user (it waits for the forget and
// reads the items again), and one running beside a forget does not
// deadlock with it; other users' items are enqueued.
func TestEmbedSweepBesideForget(t *testing.T) {
	e := setup(t)
	e.seedItems("alice", "bob")
	srv := embeddingtest.New(t)
	w, err := worker.New(worker.Config{Conn: e.nc, Store: e.store, Extractor: extractor.NewRules(), Logger: slog.New(slog.DiscardHandler),
		Prefix: e.prefix, Stream: e.stream, Embedder: embedder(t, srv, "m1"), EmbedSweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	// A forget of alice under way (ForgetUser's lock, her items deleted),
	// not committed: the sweep reads her items and must wait for it.
	forget := e.block(`SELECT pg_advisory_xact_lock(hashtextextended('memoryd.user.' || current_schema() || '.' || 'alice', 0))`)
	if _, err := forget.tx.Exec(e.ctx, `DELETE FROM context WHERE user_id = 'alice'`); err != nil {
		t.Fatal(err)
	}
	type sweep struct {
		n   int
		err error
	}
	swept := make(chan sweep, 1)
	go func() {
		n, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "", "m1", 1, 5)
		swept <- sweep{n, err}
	}()
	e.waitBlocked("the sweep waiting for the forget", forget.pid)
	if err := forget.tx.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	s := <-swept
	if s.err != nil || s.n != 2 {
		t.Fatalf("sweep = %d items, %v; want bob's 2", s.n, s.err)
	}
	var jobs []string
	rows, err := e.store.Pool().Query(e.ctx, `SELECT args->>'user_id' FROM river_job WHERE kind = $1 ORDER BY id`, worker.EmbedJobKind)
	if err == nil {
		jobs, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || !slices.Equal(jobs, []string{"bob", "bob"}) {
		t.Fatalf("embed jobs' users after the sweep: %v (%v); want bob's only", jobs, err)
	}
}

// seedItems stores two context items for each user, as an extraction would.
func (e *env) seedItems(users ...string) {
	e.t.Helper()
	for _, u := range users {
		if _, err := e.store.InsertContext(e.ctx, []store.ContextWrite{
			{UserID: u, Question: "my canine companion", Answer: "a dog named Rex", CreatedAt: t0},
			{UserID: u, Question: "home town", Answer: "Paris", CreatedAt: t0}}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// A sweep over more users than one of its transactions locks enqueues every
// item, page after page.
func TestEmbedSweepOverManyUsers(t *testing.T) {
	e := setup(t)
	var users []string
	for i := range 70 {
		users = append(users, fmt.Sprintf("u%02d", i))
	}
	e.seedItems(users...)
	srv := embeddingtest.New(t)
	w, err := worker.New(worker.Config{Conn: e.nc, Store: e.store, Extractor: extractor.NewRules(), Logger: slog.New(slog.DiscardHandler),
		Prefix: e.prefix, Stream: e.stream, Embedder: embedder(t, srv, "m1"), EmbedSweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	n, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "", "m1", 10, 5)
	if err != nil || n != 140 {
		t.Fatalf("sweep enqueued %d items (%v), want 140", n, err)
	}
	var jobUsers int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(DISTINCT args->>'user_id') FROM river_job WHERE kind = $1`, worker.EmbedJobKind).Scan(&jobUsers); err != nil || jobUsers != 70 {
		t.Fatalf("embed jobs name %d users (%v), want 70", jobUsers, err)
	}
}

// An embed job waiting out its retry backoff (the server was down) is made
// available at once by RetryWaitingEmbeds, which the backfill runs; a job of
// another model is left to its workers. The backfill's unique insert added
// nothing beside the waiting job and waited for its backoff, up to 10
// minutes.
func TestRetryWaitingEmbeds(t *testing.T) {
	e := setup(t)
	e.seedItems("alice")
	enq, err := worker.NewEnqueuer(worker.EnqueuerConfig{Store: e.store})
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"m1", "m2"} {
		if _, err := enq.EnqueueMissingEmbeddings(e.ctx, "alice", model, 10, 5); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.store.Pool().Exec(e.ctx, `UPDATE river_job SET state = 'retryable', attempt = 3, scheduled_at = now() + interval '10 minutes' WHERE kind = $1`, worker.EmbedJobKind); err != nil {
		t.Fatal(err)
	}
	n, err := enq.RetryWaitingEmbeds(e.ctx, "m1")
	if err != nil || n != 1 {
		t.Fatalf("retried %d jobs (%v), want m1's one", n, err)
	}
	// Due: not waiting its backoff. River stamps the retry by store.Clock,
	// Postgres's time read over a round trip, which a loaded machine's
	// slow reply puts a little ahead of now() (a CI run at load 26 saw m1
	// not due): 5 s is far inside the 10 minutes told apart.
	rows, err := e.store.Pool().Query(e.ctx, `SELECT args->>'model', state, scheduled_at <= now() + interval '5 seconds' FROM river_job WHERE kind = $1 ORDER BY 1`, worker.EmbedJobKind)
	if err != nil {
		t.Fatal(err)
	}
	type job struct {
		model, state string
		due          bool
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (job, error) {
		var j job
		return j, r.Scan(&j.model, &j.state, &j.due)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []job{{"m1", "available", true}, {"m2", "retryable", false}}
	if !slices.Equal(got, want) {
		t.Errorf("jobs %+v, want %+v", got, want)
	}
}

// TestEmbedRefusedTextAloneStaysLexical: a text the embeddings server
// refuses as input (400: longer than the model's context) costs its own
// vector only; the items sharing its job get theirs. A text over 8 KiB is
// sent cut to its start, so a server refusing longer inputs embeds it.
// Before, the refusal cancelled the whole job (a race hunt: 56 of 121
// items without a vector after a model change, and every sweep rebuilt
// the same job), and the 47 KB text was sent whole.
func TestEmbedRefusedTextAloneStaysLexical(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	srv.RefuseContaining("POISON")
	srv.RefuseOver(9000)
	items := aliceNotes(10)
	// The refused text is the job's shortest: the probe that tells a
	// refusal of the requests from one of a text must not take it for the
	// former (a review: all 10 left without a vector).
	items[3].Question, items[3].Answer = "n", "POISON"
	items[7].Answer = strings.Repeat("a long pasted log line\n", 2000) // 46 KB
	if _, err := e.store.InsertContext(e.ctx, items); err != nil {
		t.Fatal(err)
	}
	w, _ := e.startWorker(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	if n, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "alice", "m1", 64, 1); err != nil || n != 10 {
		t.Fatalf("backfill enqueued %d items (%v), want 10 in one job", n, err)
	}
	e.waitFor("the embed job finished", func() (bool, string) {
		var states []string
		err := e.store.Pool().QueryRow(e.ctx, `SELECT coalesce(array_agg(state::text), '{}') FROM river_job WHERE kind = $1`, worker.EmbedJobKind).Scan(&states)
		return err == nil && len(states) == 1 && states[0] == "completed", fmt.Sprintf("%v %v", states, err)
	})
	if n, err := e.store.CountEmbeddings(e.ctx, "alice", "m1"); err != nil || n.Embedded != 9 || n.Items != 10 {
		t.Fatalf("after the job: %+v (%v), want 9 of 10 items embedded, the refused one without", n, err)
	}
	vs, err := e.store.UserEmbeddings(e.ctx, "alice", "m1")
	if err != nil {
		t.Fatal(err)
	}
	all, err := e.store.RecentContext(e.ctx, "alice", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range all {
		has := slices.ContainsFunc(vs, func(v store.StoredEmbedding) bool { return v.ContextID == it.ID })
		if refused := strings.Contains(it.Answer, "POISON"); has == refused {
			t.Errorf("item %q: vector %v", it.Question, has)
		}
	}
}

// A server that refuses every request as bad input (a 400 for an unknown
// model or parameter) costs three more requests (the shortest and longest
// text alone, the control text), not a halving down to every
// text: a review measured 240 requests for a backfill of 121 items where
// one job needs 2.
func TestEmbedRequestsRefusedAltogetherAreNotHalved(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	srv.Fail(http.StatusBadRequest, "")
	var items []store.ContextWrite
	for i := range 10 {
		items = append(items, store.ContextWrite{UserID: "alice", Question: fmt.Sprintf("note %d", i), Answer: "plain", CreatedAt: t0})
	}
	if _, err := e.store.InsertContext(e.ctx, items); err != nil {
		t.Fatal(err)
	}
	w, _ := e.startWorker(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	if _, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "alice", "m1", 64, 1); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the embed job given up", func() (bool, string) {
		var state string
		err := e.store.Pool().QueryRow(e.ctx, `SELECT state::text FROM river_job WHERE kind = $1`, worker.EmbedJobKind).Scan(&state)
		return err == nil && (state == "cancelled" || state == "discarded"), fmt.Sprint(state, err)
	})
	// The control text alone, refused too, tells a refusal of the
	// requests from one of every text (which is found and recorded).
	if n := srv.Requests(); n != 4 {
		t.Errorf("%d requests for a job of 10 texts the server refuses altogether, want 4 (the batch, its shortest and longest text, the control)", n)
	}
	if refs, err := e.store.MissingEmbeddings(e.ctx, "alice", "m1", 0, 100); err != nil || len(refs) != 10 {
		t.Errorf("%d items missing a vector (%v), want 10: a refusal of the requests is recorded for no item", len(refs), err)
	}
}

// embedJobs returns the states of the embed jobs and the last error each
// recorded, in id order.
func (e *env) embedJobs() (states, errs []string) {
	e.t.Helper()
	rows, err := e.store.Pool().Query(e.ctx, `SELECT state::text, coalesce(errors[array_length(errors, 1)]->>'error', '')
		FROM river_job WHERE kind = $1 ORDER BY id`, worker.EmbedJobKind)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s, m string
		if err := rows.Scan(&s, &m); err != nil {
			e.t.Fatal(err)
		}
		states, errs = append(states, s), append(errs, m)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return states, errs
}

// TestEmbedUnusableVectorsAreNotStored: texts the server answers with a
// vector holding nulls (llama.cpp's NaN), a null vector or a zero vector
// get no vector and stay missing, so that a backfill redoes them; the
// job's other items get theirs, and the job does not retry for them.
// Before, the nulls were stored as zeros and the zero vectors with scale
// 0, the job completed, and a backfill found nothing missing.
func TestEmbedUnusableVectorsAreNotStored(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	srv.BreakVector("NANTEXT", embeddingtest.NullEntries)
	srv.BreakVector("NULLTEXT", embeddingtest.NullVector)
	srv.BreakVector("ZEROTEXT", embeddingtest.ZeroVector)
	var items []store.ContextWrite
	for i, a := range []string{"plain", "NANTEXT", "plain", "NULLTEXT", "ZEROTEXT", "plain"} {
		items = append(items, store.ContextWrite{UserID: "alice", Question: fmt.Sprintf("note %d", i), Answer: a, CreatedAt: t0})
	}
	if _, err := e.store.InsertContext(e.ctx, items); err != nil {
		t.Fatal(err)
	}
	logs := new(eventstest.SyncBuffer)
	w, _ := e.startWorker(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(embedder(t, srv, "m1"), -1)(c)
		c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	if n, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "alice", "m1", 64, 5); err != nil || n != 6 {
		t.Fatalf("backfill enqueued %d items (%v), want 6 in one job", n, err)
	}
	e.waitFor("the embed job finished", func() (bool, string) {
		states, _ := e.embedJobs()
		return len(states) == 1 && states[0] == "completed", fmt.Sprint(states)
	})
	if n, err := e.store.CountEmbeddings(e.ctx, "alice", "m1"); err != nil || n.Embedded != 3 || n.Items != 6 {
		t.Fatalf("after the job: %+v (%v), want 3 of 6 items embedded", n, err)
	}
	if got := logs.String(); !strings.Contains(got, `"refused":3`) || strings.Contains(got, "NANTEXT") {
		t.Errorf("the log should count the 3 texts without quoting them:\n%s", got)
	}
	srv.Recover()
	if n, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "alice", "m1", 64, 5); err != nil || n != 3 {
		t.Fatalf("second backfill found %d items (%v), want the 3 without a usable vector", n, err)
	}
	e.waitEmbedded("alice", "m1", 6)
}

// TestEmbedDimensionsChangeBehindTheName: a reply of other dimensions under
// the model's name (another model behind an Ollama tag or a LiteLLM alias)
// is refused, saying how to re-embed, and not stored beside the vectors of
// the first dimensions; `embed --backfill --dims N` (SetEmbeddingDims)
// then re-embeds every item. Before, both sizes were stored and a backfill
// found nothing missing. The job's recorded error says embed, not extract.
func TestEmbedDimensionsChangeBehindTheName(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	srv.SetDims(16)
	e.seedItems("alice")
	w, _ := e.startWorker(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	if _, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "alice", "m1", 64, 5); err != nil {
		t.Fatal(err)
	}
	e.waitEmbedded("alice", "m1", 2)
	srv.SetDims(8)
	if _, err := e.store.InsertContext(e.ctx, []store.ContextWrite{{UserID: "alice", Question: "favourite drink", Answer: "tea", CreatedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	if n, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "alice", "m1", 64, 5); err != nil || n != 1 {
		t.Fatalf("backfill found %d items (%v), want the new one", n, err)
	}
	var errs []string
	// The insert's own job (the worker's context hook) and, unless that
	// one was still waiting, the backfill's.
	e.waitFor("the 8-dimension jobs given up", func() (bool, string) {
		var states []string
		states, errs = e.embedJobs()
		return len(states) >= 2 && !slices.ContainsFunc(states[1:], func(s string) bool { return s != "cancelled" }), fmt.Sprint(states, errs)
	})
	if want := "embed: embedding: permanent error: the model behind the name \"m1\" changed: it answered with 8 dimensions, its stored vectors have 16"; !strings.HasPrefix(errs[1], want) ||
		!strings.Contains(errs[1], "memoryd embed --backfill --dims 8") {
		t.Errorf("job error %q, want it to start %q and name the command", errs[1], want)
	}
	if n, _ := e.store.CountEmbeddings(e.ctx, "alice", "m1"); n.Embedded != 2 || n.Items != 3 {
		t.Errorf("after the refused reply: %+v, want 2 of 3 embedded", n)
	}
	// The operator says the model changed: every item is embedded anew.
	if prev, err := e.store.SetEmbeddingDims(e.ctx, "m1", 8); err != nil || prev == 8 {
		t.Fatalf("set dims 8: %d before (%v), want others", prev, err)
	}
	if n, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "alice", "m1", 64, 5); err != nil || n != 3 {
		t.Fatalf("backfill after --dims 8 enqueued %d items (%v), want all 3", n, err)
	}
	e.waitEmbedded("alice", "m1", 3)
	e.checkVectors("alice", "m1", 8)
}

// TestEmbedWaitsLogOnceAJob: an embed job that waits (the embeddings
// server rate limiting, the database out of reach) is logged as an
// extraction job is: at its first wait (a rate limit at info; an outage a
// warning, which the process's handler holds back: OutageRepeats), its
// later waits at debug. Before, every wait of every job was a warning, and
// with embeddings on every write is a job.
func TestEmbedWaitsLogOnceAJob(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	srv.Fail(http.StatusTooManyRequests, "1")
	var logs lockedBuffer
	e.start(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(embedder(t, srv, "m1"), -1)(c)
		c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	e.publish(events.Turn{ID: "a1", UserID: "alice", UserMessage: "My dog is named Rex.", AssistantResponse: "Good dog."})
	e.waitFor("the embed job to wait three times", func() (bool, string) {
		return srv.Requests() >= 3, fmt.Sprintf("%d requests", srv.Requests())
	})
	srv.Recover()
	e.waitEmbedded("alice", "m1", 1)
	levels := map[string]int{}
	for l := range strings.Lines(logs.String()) {
		var line struct{ Level, Msg string }
		if json.Unmarshal([]byte(l), &line) == nil && strings.HasPrefix(line.Msg, "embedding") {
			levels[line.Level+": "+line.Msg]++
		}
	}
	const waiting = "embedding waiting without spending attempts; the items or chunks stay lexical-only until it succeeds"
	if levels["INFO: "+waiting] != 1 || levels["DEBUG: "+waiting] < 2 || len(levels) != 2 || !slices.Contains(worker.OutageRepeats, waiting) {
		t.Fatalf("one embed job's waits logged as %v; want its first at info, the later ones at debug, nothing else, and the line held back in an outage (OutageRepeats: %q)",
			levels, worker.OutageRepeats)
	}
}

// aliceNotes is n context items of alice's, "note i" answered "plain answer
// i", at t0: texts an embeddings test changes one or two of.
func aliceNotes(n int) []store.ContextWrite {
	items := make([]store.ContextWrite, 0, n)
	for i := range n {
		items = append(items, store.ContextWrite{UserID: "alice", Question: fmt.Sprintf("note %d", i), Answer: fmt.Sprintf("plain answer %d", i), CreatedAt: t0})
	}
	return items
}
