package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// testConfig is the app's defaults with test overrides: an isolated schema,
// subject prefix and stream, fewer workers and generous timeouts.
func testConfig(t *testing.T) Config {
	t.Helper()
	dbURL := storetest.Migrated(t) + poolCap // a migrated schema: see unmigrated
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	cfg := Defaults()
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.NATS.URL, cfg.Store.URL, cfg.Prefix, cfg.Stream = eventstest.URL(), dbURL, prefix, stream
	cfg.Worker.Workers, cfg.Worker.BatchSize, cfg.Worker.MaxAttempts = 4, 50, 3
	cfg.Worker.JobTimeout, cfg.Enricher.Timeout = time.Minute, time.Second
	cfg.LLM.Timeout, cfg.LLM.MaxConcurrency = 10*time.Second, 2
	// What a test that is not about them need not pay for (some 0.1 s of
	// Postgres CPU each, in every one of the package's apps): the check
	// for a missing database, a connection of its own, which the tests of
	// a new database ask for (onMissingDatabase), and the prune the
	// default turn retention runs on start (an Exclusively connection, a
	// River job), which the tests of the prune ask for with their limits.
	cfg.Store.CreateDatabase = false
	cfg.Worker.TurnRetention = -1
	// One connection of each pool at start, not the 4 and 2 (each enrich
	// one with its statements prepared) every app of the package paid
	// for: 64 -> 57 s of Postgres CPU for the package (2026-12-06). More
	// open as a test needs them.
	cfg.Store.MinConns, cfg.EnrichPool.MinConns = 1, 1
	return cfg
}

// poolCap caps the app's pool: the suite shares one Postgres.
var poolCap = fmt.Sprintf("&pool_max_conns=%d", storetest.MaxConns)

// unmigrated gives cfg an empty schema instead of testConfig's migrated one,
// for a test of what the app does before or instead of migrating.
func unmigrated(t *testing.T, cfg *Config) {
	t.Helper()
	_, url := storetest.Schema(t)
	cfg.Store.URL = url + poolCap
}

// startTestApp runs the whole service in-process on testConfig changed by
// mod; the test's cleanup stops it.
func startTestApp(t *testing.T, mod func(*Config)) *App {
	t.Helper()
	cfg := testConfig(t)
	if mod != nil {
		mod(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop(context.Background()) })
	return a
}

func publishAndWait(t *testing.T, a *App, user string, turns ...events.Turn) {
	t.Helper()
	js, err := jetstream.New(a.nc)
	if err != nil {
		t.Fatal(err)
	}
	pub := events.NewPublisher(js, a.cfg.Prefix)
	for _, turn := range turns {
		if _, err := pub.Publish(context.Background(), turn); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.WaitProcessed(ctx, user, len(turns), nil); err != nil {
		t.Fatal(err)
	}
}

func TestForgetEndpointAndTokenUsage(t *testing.T) {
	t.Parallel()
	llm := extractortest.NewServer(t, extractortest.Content(`{"facts":{"location":"Oslo"},"context":[{"q":"Where do I live?","a":"Oslo"}]}`))
	svc := startTestApp(t, func(c *Config) { c.LLM.BaseURL, c.LLM.Model = llm.URL(), "fake-model" })
	ts := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for _, user := range []string{"alice", "bob"} {
		publishAndWait(t, svc, user,
			events.Turn{ID: user + "-1", UserID: user, UserMessage: "I live in Oslo", Timestamp: ts},
			events.Turn{ID: user + "-2", UserID: user, UserMessage: "Still Oslo", Timestamp: ts.Add(time.Minute)})
	}
	client := events.NewClient(svc.nc, svc.cfg.Prefix)
	ctx := context.Background()

	st, err := client.Stats(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	// extractortest.Content reports 10 prompt and 5 completion tokens a call.
	if u := st.LLMUsage["fake-model"]; u.PromptTokens != 20 || u.CompletionTokens != 10 || u.Extractions != 2 {
		t.Fatalf("alice llm usage = %+v", st.LLMUsage)
	}

	if _, err := client.Forget(ctx, "mallory"); err != nil {
		t.Fatalf("forgetting an unknown user: %v", err)
	}
	res, err := client.Forget(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if res.StreamEvents != 2 || res.Turns != 2 || res.Context != 1 || res.Facts != 1 {
		t.Fatalf("forget reply = %+v", res)
	}
	st, err = client.Stats(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if st.TurnsReceived != 0 || st.Facts != 0 || st.ContextItems != 0 || len(st.LLMUsage) != 0 {
		t.Fatalf("alice stats after forget = %+v", st)
	}
	if st, err := client.Stats(ctx, "bob"); err != nil || st.TurnsProcessed != 2 || st.Facts != 1 {
		t.Fatalf("bob stats after forgetting alice = %+v, %v", st, err)
	}
	// The subject's token must match the payload: bob cannot be forgotten
	// through alice's subject.
	msg, err := svc.nc.Request(fmt.Sprintf("%s.forget.alice", svc.cfg.Prefix), []byte(`{"user_id":"bob"}`), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get("Nats-Service-Error-Code") != "400" {
		t.Fatalf("forget with mismatched token answered %q", msg.Header.Get("Nats-Service-Error-Code"))
	}
	if st, err := client.Stats(ctx, "bob"); err != nil || st.TurnsProcessed != 2 {
		t.Fatalf("bob after refused forget = %+v, %v", st, err)
	}
}

func TestOpsEndpoints(t *testing.T) {
	t.Parallel()
	svc := startTestApp(t, func(c *Config) { c.Ops = OpsConfig{Addr: "127.0.0.1:0", Pprof: true} })
	base := "http://" + svc.ops.ln.Addr().String()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("/healthz = %d", code)
	}
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, `"consumer":"ok"`) {
		t.Fatalf("/readyz = %d %s", code, body)
	}
	publishAndWait(t, svc, "alice", events.Turn{ID: "m1", UserID: "alice", UserMessage: "I live in Oslo", Timestamp: time.Now()})
	if _, err := svc.nc.Request(svc.cfg.Prefix+".turns.alice", []byte(`{"id":1}`), time.Second); err != nil && !errors.Is(err, nats.ErrNoResponders) {
		// A JetStream publish answers with an ack; either way the event is in the stream.
		t.Logf("publish bad event: %v", err)
	}
	if _, err := events.NewClient(svc.nc, svc.cfg.Prefix).Enrich(context.Background(), events.EnrichRequest{UserID: "alice", Message: "where do I live"}); err != nil {
		t.Fatal(err)
	}
	// A bad request (no message) is answered
	// with a 400, and counted; the reply comes after the count.
	var se *events.ServiceError
	if _, err := events.NewClient(svc.nc, svc.cfg.Prefix).Enrich(context.Background(), events.EnrichRequest{UserID: "alice", Message: ""}); !errors.As(err, &se) || se.Code != 400 {
		t.Fatalf("enrich without a message: %v, want a 400", err)
	}
	var body string
	eventstest.Poll(30*time.Second, func() (bool, string) {
		_, body = get("/metrics")
		return strings.Contains(body, `memoryd_turns_rejected_total{reason="invalid_id"} 1`), ""
	}) // the checks below say what is missing
	for _, want := range []string{
		"memoryd_turns_received_total 2",
		"memoryd_turns_recorded_total 1",
		`memoryd_turns_rejected_total{reason="invalid_id"} 1`,
		`memoryd_turns_extracted_total{outcome="processed"} 1`,
		// Outcomes and reasons that have not happened read 0, not no data.
		`memoryd_turns_extracted_total{outcome="failed"} 0`,
		`memoryd_turns_extracted_total{outcome="discarded"} 0`,
		`memoryd_turns_rejected_total{reason="token_mismatch"} 0`,
		`memoryd_query_embeddings_total{outcome="timeout"} 0`,
		"memoryd_enrich_duration_seconds_count 1",
		`memoryd_request_errors_total{code="400",endpoint="enrich"} 1`,
		`memoryd_enrich_degraded_total{reason="timeout"} 0`,
		`memoryd_enrich_degraded_total{reason="overloaded"} 0`,
		"memoryd_extraction_duration_seconds_bucket",
		"process_resident_memory_bytes",
		"memoryd_giveway_waits_total",
		"memoryd_giveway_seconds_total",
		// An empty queue's states read 0, not no data.
		`memoryd_queue_jobs{queue="extract",state="available"} 0`,
		`memoryd_queue_jobs{queue="maintenance",state="retryable"} 0`,
		"memoryd_replay_resets_unfinished 0",
		"memoryd_turns_failed 0",
		// The stream's ingest backlog, once the turns are recorded.
		`memoryd_ingest_backlog_turns{state="unread"} 0`,
		`memoryd_ingest_backlog_turns{state="unacked"} 0`,
		// Both pools, enrich's own too.
		`memoryd_db_pool_max_connections{pool="shared"}`,
		`memoryd_db_pool_max_connections{pool="enrich"}`,
		`memoryd_db_pool_connections{pool="enrich",state="idle"}`,
		`memoryd_db_pool_new_connections_total{pool="shared"}`,
		`memoryd_db_pool_acquire_waits_total{pool="enrich"}`,
		// Which version each replica runs.
		fmt.Sprintf(`memoryd_build_info{go_version=%q,role="all",version=%q} 1`, runtime.Version(), svc.cfg.Version),
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	// A reset whose replay has not read the stream back shows.
	if _, _, err := svc.store.ResetMemory(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if _, body := get("/metrics"); !strings.Contains(body, "memoryd_replay_resets_unfinished 1") {
		t.Errorf("/metrics after a reset with no replay lacks memoryd_replay_resets_unfinished 1")
	}
	// A turn failed for good shows, as a gauge of the turns failed now
	// (the extraction counter is this process's since it started).
	if _, err := svc.store.InsertTurns(context.Background(), []store.Turn{{EventID: "f1", UserID: "alice", UserMessage: "I moved", TurnAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if err := svc.store.MarkFailed(context.Background(), "alice", []string{"f1"}, "model gone", true); err != nil {
		t.Fatal(err)
	}
	if _, body := get("/metrics"); !strings.Contains(body, "memoryd_turns_failed 1") {
		t.Errorf("/metrics after a failed turn lacks memoryd_turns_failed 1")
	}
	if code, _ := get("/debug/pprof/"); code != 200 {
		t.Fatalf("pprof = %d", code)
	}
	svc.store.Close() // Postgres gone: not ready
	if code, body := get("/readyz"); code != 503 || strings.Contains(body, `"postgres":"ok"`) {
		t.Fatalf("/readyz with the pool closed = %d %s", code, body)
	}
}

// TestStartProcessEnrichStop: an app on its defaults (with test names)
// records and extracts a published turn, answers enrich with it, and
// stops cleanly, closing what it opened.
func TestStartProcessEnrichStop(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if h := a.Health(ctx); h["postgres"] != "ok" || h["nats"] != "ok" || h["consumer"] != "ok" {
		t.Fatalf("health after start = %v", h)
	}
	publishAndWait(t, a, "ada", events.Turn{ID: "ada-1", UserID: "ada", UserMessage: "I live in Lisbon and love sardines",
		AssistantResponse: "Lisbon is lovely", Timestamp: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)})
	nc, err := a.Conn()
	if err != nil {
		t.Fatal(err)
	}
	reply, err := events.NewClient(nc, cfg.Prefix).Enrich(ctx, events.EnrichRequest{UserID: "ada", Message: "any sardines recipe?"})
	if err != nil {
		t.Fatal(err)
	}
	if reply.Degraded || !strings.Contains(reply.Injection, "sardines") {
		t.Fatalf("enrich reply = %+v", reply)
	}
	if err := a.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if !nc.IsClosed() {
		t.Error("the NATS connection the app opened is still open after Stop")
	}
	if h := a.Health(ctx); h["postgres"] == "ok" || h["nats"] == "ok" {
		t.Errorf("health after stop = %v", h)
	}
	if err := a.Stop(ctx); err != nil {
		t.Errorf("second stop: %v", err)
	}
}

// startWithAlice starts an App that has recorded one turn of alice's, and
// returns it with a context that ends with the test (or after a minute).
func startWithAlice(t *testing.T) (*App, context.Context) {
	t.Helper()
	a := startTestApp(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	publishAndWait(t, a, "alice", events.Turn{ID: "t1", UserID: "alice", UserMessage: "my dog is Rex", AssistantResponse: "ok", Timestamp: time.Now().UTC()})
	return a, ctx
}

// TestForgetOnAStartedApp: App.Forget with a running worker also deletes the
// user's document collections (it panicked on a nil store: the store was
// opened only when no worker ran), and no one else's.
func TestForgetOnAStartedApp(t *testing.T) {
	t.Parallel()
	a, ctx := startWithAlice(t)
	s, err := a.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"alice", "bob"} {
		if _, err := s.PutDocument(ctx, store.DocumentPut{Owner: store.Owner{User: user}, Collection: "kb", DocID: "d", Content: "The zebra notes."}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := a.Forget(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if res.Turns != 1 {
		t.Fatalf("forget reply = %+v, want the one turn", res)
	}
	var owners []string
	if err := s.Pool().QueryRow(ctx, `SELECT coalesce(array_agg(owner ORDER BY owner), '{}') FROM collections`).Scan(&owners); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(owners, []string{"bob"}) {
		t.Fatalf("collections after forgetting alice belong to %q, want bob only", owners)
	}
}

// A forget whose stream side fails after the memory is deleted answers a
// 500 that says so and to send it again, not that the store timed out.
// (The stream here refuses deletes, for good: nats-server cannot take
// that back.)
func TestForgetStreamSideFailureSaysWhatToDo(t *testing.T) {
	t.Parallel()
	a, ctx := startWithAlice(t)
	js, err := jetstream.New(a.nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, a.cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.DenyDelete = true
	if _, err = js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	client := events.NewClient(a.nc, a.cfg.Prefix)
	_, err = client.Forget(ctx, "alice")
	var se *events.ServiceError
	if !errors.As(err, &se) || se.Code != 500 || !strings.Contains(se.Description, "memory is deleted") || !strings.Contains(se.Description, "run the forget again") {
		t.Fatalf("forget with a stream that refuses deletes: %v; want a 500 saying the memory is deleted and to run it again", err)
	}
}

// A serve stopped while a forget is in progress does not wait past its
// shutdown deadline for it: Stop cancels the forget, which answers that it
// was cancelled (before: closing the database pool waited for the forget's
// connection, up to the forget's minute, or its documents' 10 minutes).
// Cancelled in its transaction, nothing is deleted and the requester is told
// to send it again; cancelled after it, the memory is gone and the reply
// says what was left.
func TestStopCancelsAForgetInProgress(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// block takes, in q's transaction, what the forget will wait for.
		block func(ctx context.Context, tx pgx.Tx, q *store.Store) error
		// waiting is a LIKE pattern of the forget's statement that the
		// block holds: other work (the document's chunking job) may wait
		// on the same lock first.
		waiting    string
		want       string
		memoryLeft bool
	}{
		{"in its transaction", func(ctx context.Context, _ pgx.Tx, q *store.Store) error {
			_, err := q.LockUsers(ctx, []string{events.UserToken("alice")})
			return err
		}, "%", "memoryd stopped before this request was done", true},
		{"deleting documents", func(ctx context.Context, tx pgx.Tx, _ *store.Store) error {
			_, err := tx.Exec(ctx, `SELECT 1 FROM collections WHERE owner_kind = 'user' AND owner = 'alice' FOR UPDATE`)
			return err
		}, "SELECT id FROM collections WHERE owner_kind = 'user' AND owner = $1%FOR UPDATE", "deleting their documents did not finish", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, ctx := startWithAlice(t)
			other, tx, pid := blockerWithADocument(t, ctx, a)
			if err := tc.block(ctx, tx, other.WithTx(tx)); err != nil {
				t.Fatal(err)
			}
			errc := forgetWaitingOn(t, ctx, a, other, pid, tc.waiting)
			stopCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			if err := a.Stop(stopCtx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("stop during a forget: %v, want its deadline passed", err)
			}
			err := <-errc
			var se *events.ServiceError
			if !errors.As(err, &se) || se.Code != 500 || !strings.Contains(se.Description, tc.want) || !strings.Contains(se.Description, "again") {
				t.Fatalf("forget cancelled by stop: %v; want a 500 saying %q and to send it again", err, tc.want)
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			st, err := other.Stats(ctx, "alice")
			if err != nil {
				t.Fatal(err)
			}
			if left := st.TurnsReceived > 0; left != tc.memoryLeft {
				t.Fatalf("after the cancelled forget alice has %d turns; want memory left %v", st.TurnsReceived, tc.memoryLeft)
			}
			var docs int
			if err := other.Pool().QueryRow(ctx, `SELECT count(*) FROM collections WHERE owner_kind = 'user' AND owner = 'alice'`).Scan(&docs); err != nil {
				t.Fatal(err)
			}
			if docs != 1 {
				t.Fatalf("alice has %d collections after the cancelled forget, want hers kept", docs)
			}
		})
	}
}

// blockerWithADocument gives alice a document, then opens a transaction,
// for the test to take locks a forget will wait on, on a pool of its own
// (Stop closes the app's), which the test's checks use too; pid is the
// transaction's backend. The transaction is rolled back at the test's end.
func blockerWithADocument(t *testing.T, ctx context.Context, a *App) (other *store.Store, tx pgx.Tx, pid int) {
	t.Helper()
	s, err := a.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutDocument(ctx, store.DocumentPut{Owner: store.Owner{User: "alice"}, Collection: "kb", DocID: "d", Content: "The zebra notes."}); err != nil {
		t.Fatal(err)
	}
	other = storetest.Open(t, a.cfg.Store.URL)
	if tx, err = other.Pool().Begin(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return other, tx, pid
}

// forgetWaitingOn sends a forget of alice's on a connection of its own
// (Stop does not drain it) and returns once the forget's statement
// matching waiting (a LIKE pattern: other work may wait on the same lock
// first) waits on the backend pid; the channel has the forget's result.
func forgetWaitingOn(t *testing.T, ctx context.Context, a *App, other *store.Store, pid int, waiting string) <-chan error {
	t.Helper()
	nc, err := nats.Connect(eventstest.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	errc := make(chan error, 1)
	go func() {
		_, err := events.NewClient(nc, a.cfg.Prefix).Forget(ctx, "alice")
		errc <- err
	}()
	for n, deadline := 0, time.Now().Add(2*time.Minute); n == 0; {
		if err := other.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid)) AND query LIKE $2`,
			pid, waiting).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 && time.Now().After(deadline) {
			t.Fatalf("the forget never waited on the block (%s)", waiting)
		}
	}
	return errc
}

// A Postgres that hangs (packets dropped, not refused) fails the postgres
// check alone: the consumer check has its own time. Before, both ran one
// after the other under one deadline, and /readyz blamed the consumer for
// Postgres's silence (an operator's walk).
func TestReadinessBlamesOnlyAHangingPostgres(t *testing.T) {
	t.Parallel()
	a, ctx := startWithAlice(t)
	// A server that accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	go func() { // exits when the listener closes
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	pc, err := pgxpool.ParseConfig("postgres://postgres@" + ln.Addr().String() + "/memoryd?sslmode=disable&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc) // connects lazily
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	a.mu.Lock()
	real := a.store
	a.store = store.New(pool)
	a.mu.Unlock()
	t.Cleanup(func() {
		a.mu.Lock()
		a.store = real
		a.mu.Unlock()
	})
	checks := a.Health(ctx)
	if checks["postgres"] == "ok" || checks["consumer"] != "ok" || checks["nats"] != "ok" {
		t.Fatalf("readiness with Postgres hanging: %v; want only postgres failing", checks)
	}
}

// TestDocsDeleteDeletesTheDocumentsJobs: memory.docs.delete, as served,
// deletes the River jobs naming the document (wired from the worker's job
// shapes): their arguments hold its id and its content's hash.
func TestDocsDeleteDeletesTheDocumentsJobs(t *testing.T) {
	t.Parallel()
	a, ctx := startWithAlice(t)
	s, err := a.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	put, err := s.PutDocument(ctx, store.DocumentPut{Owner: store.Owner{User: "alice"}, Collection: "kb", DocID: "d", Content: "The zebra notes."})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `INSERT INTO river_job (kind, args, state, max_attempts, queue, priority, scheduled_at, finalized_at)
		VALUES ($1, jsonb_build_object('collection_id', $2::bigint, 'doc_id', 'd', 'hash', 'abc'), 'completed', 5, 'q', 1, now(), now())`,
		worker.ChunkEmbedJobKind, put.Collection.ID); err != nil {
		t.Fatal(err)
	}
	r, err := events.NewClient(a.nc, a.cfg.Prefix).DeleteDocument(ctx, events.DocsDeleteRequest{UserID: "alice", Collection: "kb", DocID: "d"})
	if err != nil || !r.Deleted {
		t.Fatalf("docs.delete = %+v, %v", r, err)
	}
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM river_job WHERE args->>'doc_id' = 'd'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d jobs still name the deleted document", n)
	}
}
