package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// TestEmbedCommandRefusesBeforeConnecting: embed needs --backfill and an
// endpoint; both are usage errors (exit 2) before anything connects.
func TestEmbedCommandRefusesBeforeConnecting(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--embed-base-url", "http://127.0.0.1:1/v1"}, "--backfill"},
		{[]string{"--backfill"}, "--embed-base-url is required"},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"embed", "--database-url", "postgres://postgres@127.0.0.1:1/none?connect_timeout=1", "--nats-url", "nats://127.0.0.1:1"}, tt.args...)
		code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, args)
		if code != 2 || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("embed %v: exit %d, stderr %q; want exit 2 saying %q", tt.args, code, errOut.String(), tt.want)
		}
	}
}

// TestEmbedBackfillCommand: items stored before embedding was on get
// vectors of the model named on the command line, and the command says so.
func TestEmbedBackfillCommand(t *testing.T) {
	t.Parallel()
	dbURL, s, srv, prefix, stream := embedSetup(t,
		store.ContextWrite{UserID: "alice", Question: "my canine companion", Answer: "Rex"},
		store.ContextWrite{UserID: "alice", Question: "home town", Answer: "Paris"},
		store.ContextWrite{UserID: "bob", Question: "tea or coffee", Answer: "tea"})
	out, errOut, code := runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--user", "alice", "--embed-base-url", srv.URL, "--embed-model", "m1")
	if code != 0 {
		t.Fatalf("embed exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"2 items without a m1 vector to embed", "embedding done"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for user, want := range map[string]store.EmbeddingCount{"alice": {Items: 2, Embedded: 2}, "bob": {Items: 1}} {
		if n, err := s.CountEmbeddings(context.Background(), user, "m1"); err != nil || n != want {
			t.Errorf("%s: %+v (%v), want %+v", user, n, err, want)
		}
	}
}

// A backfill interrupted while it waits for its jobs (the server is down,
// so they are retried) exits 1, saying the rest is enqueued: it exited 0,
// the status of "done".
func TestEmbedBackfillInterruptedIsNotDone(t *testing.T) {
	t.Parallel()
	dbURL, _, srv, prefix, stream := embedSetup(t, store.ContextWrite{UserID: "alice", Question: "my canine companion", Answer: "Rex"})
	srv.FailFrom(2, http.StatusServiceUnavailable) // down after the backfill's test text
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &cancelOn{match: "with chunks without a m1 vector to embed", cancel: cancel}
	var errOut bytes.Buffer
	code := run(ctx, &cli{stdout: out, stderr: &errOut}, []string{"embed", "--backfill", "--user", "alice", "--embed-base-url", srv.URL, "--embed-model", "m1",
		"--database-url", dbURL + fmt.Sprintf("&pool_max_conns=%d", storetest.MaxConns), "--nats-url", eventstest.URL(), "--prefix", prefix, "--stream", stream, "--log-format", "json"})
	if !strings.Contains(out.String(), "1 item without a m1 vector to embed") {
		t.Fatalf("embed exited %d before it enqueued the item\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	if code != 1 || !strings.Contains(errOut.String(), "interrupted: the rest is enqueued") || strings.Contains(out.String(), "embedding done") {
		t.Errorf("embed --backfill interrupted while waiting: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 1 saying the rest is enqueued", code, out.String(), errOut.String())
	}
}

// TestEmbedBackfillChecksTheServerFirst: a backfill embeds one text before
// it enqueues anything. A model the server does not have is refused at
// once, with nothing enqueued (an embeddings walk: a mistyped
// --embed-model sent 1,744 texts for 922 items against the server's 404,
// said nothing of the model, and left jobs on a queue no process works);
// so is a server that does not answer, unless the work is left to the
// serves (--no-work), which may reach it when this host does not.
func TestEmbedBackfillChecksTheServerFirst(t *testing.T) {
	t.Parallel()
	dbURL, _, srv, prefix, stream := embedSetup(t,
		store.ContextWrite{UserID: "alice", Question: "my canine companion", Answer: "Rex"},
		store.ContextWrite{UserID: "alice", Question: "home town", Answer: "Paris"})
	pool, err := pgxpool.New(context.Background(), dbURL+"&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	jobs := func() int {
		t.Helper()
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = ANY($1)`,
			[]string{worker.EmbedJobKind, worker.ChunkEmbedJobKind}).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	srv.Fail(http.StatusNotFound, "")
	out, errOut, code := runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--embed-base-url", srv.URL, "--embed-model", "mxbai-embed-lrage")
	if code != 1 || !strings.Contains(errOut, "refused a test text for --embed-model mxbai-embed-lrage") || !strings.Contains(errOut, "nothing enqueued") {
		t.Errorf("backfill of a model the server lacks: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 1 naming the model", code, out, errOut)
	}
	if n := srv.Requests(); n != 1 {
		t.Errorf("%d requests sent for the unknown model, want the test text's 1", n)
	}
	// Dimensions the model does not take (OpenAI's 400 to "dimensions"
	// for text-embedding-ada-002, or over the model's size) are named
	// with the flags the operator gave, not the stored name
	// ("m1?dimensions=99999" is no --embed-model value).
	srv.Fail(http.StatusBadRequest, "")
	out, errOut, code = runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--embed-base-url", srv.URL, "--embed-model", "m1", "--embed-dimensions", "99999")
	if code != 1 || !strings.Contains(errOut, "refused a test text for --embed-model m1 --embed-dimensions 99999 (is the model served there, under that name, and does it take --embed-dimensions 99999?)") {
		t.Errorf("backfill with dimensions refused: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 1 naming the flags", code, out, errOut)
	}
	// A key refused is said to be the key, not the model (a key-rotation
	// walk was asked whether the model was served).
	srv.Fail(http.StatusUnauthorized, "")
	out, errOut, code = runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--embed-base-url", srv.URL, "--embed-model", "m1")
	if code != 1 || !strings.Contains(errOut, "is --embed-api-key or --embed-api-key-file a key the server takes?") || strings.Contains(errOut, "is the model served") {
		t.Errorf("backfill with the key refused: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 1 naming the key", code, out, errOut)
	}
	srv.Fail(http.StatusServiceUnavailable, "")
	out, errOut, code = runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--embed-base-url", srv.URL, "--embed-model", "m1")
	if code != 1 || !strings.Contains(errOut, "did not embed a test text") {
		t.Errorf("backfill with the server down: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 1", code, out, errOut)
	}
	if n := jobs(); n != 0 {
		t.Errorf("%d embed jobs enqueued by refused backfills, want 0", n)
	}
	out, errOut, code = runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--no-work", "--embed-base-url", srv.URL, "--embed-model", "m1")
	if code != 0 || !strings.Contains(out, "2 items without a m1 vector to embed") || !strings.Contains(errOut, "did not embed a test text from here") {
		t.Errorf("backfill --no-work with the server down: exit %d\nstdout:\n%s\nstderr:\n%s\nwant the items enqueued, with a warning", code, out, errOut)
	}
}

// A backfill whose server refuses a text ends, saying how many items are
// left without a vector, rather than wait for them forever (a race hunt's
// backfill was still waiting after 90 s, then said the rest would be
// embedded by a running serve: its job had been cancelled for good).
func TestEmbedBackfillEndsWhenTheServerRefusesAText(t *testing.T) {
	t.Parallel()
	dbURL, s, srv, prefix, stream := embedSetup(t,
		store.ContextWrite{UserID: "alice", Question: "my canine companion", Answer: "Rex"},
		store.ContextWrite{UserID: "alice", Question: "a pasted log", Answer: "POISON"},
		store.ContextWrite{UserID: "alice", Question: "home town", Answer: "Paris"})
	srv.RefuseContaining("POISON")
	out, errOut, code := runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--user", "alice", "--embed-base-url", srv.URL, "--embed-model", "m1")
	if code != 1 || !strings.Contains(errOut, "1 context item and 0 document chunks have no m1 vector and no embed job is left") {
		t.Fatalf("embed exited %d\nstdout:\n%s\nstderr:\n%s\nwant exit 1 naming the item left without a vector", code, out, errOut)
	}
	if n, err := s.CountEmbeddings(context.Background(), "alice", "m1"); err != nil || n != (store.EmbeddingCount{Items: 3, Embedded: 2, Refused: 1}) {
		t.Errorf("alice: %+v (%v), want 2 of 3 embedded, the third refused", n, err)
	}
	// Recorded as refused: a backfill again leaves it out and sends it
	// nothing (before, each one sent it again, refused again), until
	// --retry-refused.
	sent := srv.Requests()
	out, errOut, code = runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--user", "alice", "--embed-base-url", srv.URL, "--embed-model", "m1")
	if code != 0 || !strings.Contains(out, "0 items without a m1 vector to embed") || !strings.Contains(out, "1 item the embeddings server refused before left out (--retry-refused sends them again)") {
		t.Errorf("backfill again: exit %d\nstdout:\n%s\nstderr:\n%s\nwant the refused item left out", code, out, errOut)
	}
	if n := srv.Requests() - sent; n != 1 {
		t.Errorf("backfill again sent %d requests, want 1 (its test text)", n)
	}
	out, errOut, code = runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--user", "alice", "--retry-refused", "--embed-base-url", srv.URL, "--embed-model", "m1")
	if code != 1 || !strings.Contains(out, "1 item without a m1 vector to embed") || !strings.Contains(errOut, "but for the 1 item and 0 document chunks whose text it refused as input") ||
		!strings.Contains(out, "1 item the embeddings server refused before sent again (--retry-refused)") {
		t.Errorf("backfill --retry-refused: exit %d\nstdout:\n%s\nstderr:\n%s\nwant the refused item sent again, and refused again", code, out, errOut)
	}
}

// The same backfill when its embed job outlasts River's start: the
// command's own River client, elected leader, inserts the periodic jobs
// (an embed sweep among them) on the maintenance queue, which an embed-only
// process does not work. With no serve running they stay available, and
// the wait counted the sweep as an embed job left to run: it never ended
// (a hang hunt caught the test above waiting until the package's timeout
// under load, where the job ended after the sweep's insert; the delay
// makes that certain).
func TestEmbedBackfillEndsWhenTheServerRefusesATextWithoutAServe(t *testing.T) {
	t.Parallel()
	dbURL, _, srv, prefix, stream := embedSetup(t,
		store.ContextWrite{UserID: "alice", Question: "my canine companion", Answer: "Rex"},
		store.ContextWrite{UserID: "alice", Question: "a pasted log", Answer: "POISON"})
	srv.RefuseContaining("POISON")
	srv.SetDelay(time.Second) // the job ends after River's periodic jobs are in
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, &cli{stdout: &out, stderr: &errOut}, []string{"embed", "--backfill", "--user", "alice", "--embed-base-url", srv.URL, "--embed-model", "m1",
		"--database-url", dbURL + fmt.Sprintf("&pool_max_conns=%d", storetest.MaxConns), "--nats-url", eventstest.URL(), "--prefix", prefix, "--stream", stream, "--log-format", "json"})
	if ctx.Err() != nil {
		t.Fatalf("embed --backfill still waiting after a minute (exit %d)\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	if code != 1 || !strings.Contains(errOut.String(), "1 context item and 0 document chunks have no m1 vector and no embed job is left") {
		t.Fatalf("embed exited %d\nstdout:\n%s\nstderr:\n%s\nwant exit 1 naming the item left without a vector", code, out.String(), errOut.String())
	}
}

// A backfill beside a serve that ingests ends once what existed when it
// started has its vectors: new items keep arriving, and their own jobs
// embed them. It waited for every item of the user, so it never ended
// while memory kept coming (a race review's suspicion, confirmed here:
// items added every few milliseconds, without jobs of their own in this
// test, kept the command waiting until they stopped, and it then failed).
func TestEmbedBackfillEndsWhileMemoryKeepsArriving(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL, s, srv, prefix, stream := embedSetup(t,
		store.ContextWrite{UserID: "alice", Question: "my canine companion", Answer: "Rex"},
		store.ContextWrite{UserID: "alice", Question: "home town", Answer: "Paris"})
	stop, stopped := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		defer func() { stopped <- n }()
		for ; n < 20000; n++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "alice", Question: fmt.Sprintf("new %d", n), Answer: "x"}}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	out, errOut, code := runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--user", "alice", "--embed-base-url", srv.URL, "--embed-model", "m1")
	close(stop)
	added := <-stopped
	if code != 0 || !strings.Contains(out, "embedding done") {
		t.Fatalf("embed exited %d after %d items arrived\nstdout:\n%s\nstderr:\n%s\nwant it done", code, added, out, errOut)
	}
	if added == 20000 {
		t.Fatalf("the backfill outlasted the %d items added: the test's premise (items arriving while it runs) does not hold", added)
	}
	es, err := s.UserEmbeddings(ctx, "alice", "m1")
	if err != nil || len(es) < 2 {
		t.Fatalf("alice's vectors: %d, %v; want at least the 2 items there before", len(es), err)
	}
}

// embedSetup is a backfill test's set-up: a database holding items, a
// fake embeddings server, and a prefix and stream of the test's own.
func embedSetup(t *testing.T, items ...store.ContextWrite) (dbURL string, s *store.Store, srv *embeddingtest.Server, prefix, stream string) {
	t.Helper()
	dbURL = storetest.Migrated(t) // a migrated schema of the pool
	s = storetest.Unmigrated(t, dbURL)
	if _, err := s.InsertContext(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	prefix, stream = eventstest.Names(t, eventstest.Conn(t))
	return dbURL, s, embeddingtest.New(t), prefix, stream
}

// TestEmbedBackfillLeavesOutTheRefusedAndSucceeds: a backfill without
// --retry-refused leaves out the items the server refused before, and so
// does not fail for them once it has embedded what it enqueued. Before,
// it said it left them out, embedded a new item, then exited 1 naming
// them (while one with nothing new to embed exited 0): a backfill run
// from cron failed every night for an item no run would send again.
func TestEmbedBackfillLeavesOutTheRefusedAndSucceeds(t *testing.T) {
	t.Parallel()
	dbURL, s, srv, prefix, stream := embedSetup(t,
		store.ContextWrite{UserID: "alice", Question: "my canine companion", Answer: "Rex"},
		store.ContextWrite{UserID: "alice", Question: "a pasted log", Answer: "POISON"})
	srv.RefuseContaining("POISON")
	if out, errOut, code := runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--user", "alice", "--embed-base-url", srv.URL, "--embed-model", "m1"); code != 1 {
		t.Fatalf("first backfill exited %d\nstdout:\n%s\nstderr:\n%s\nwant 1, the item refused", code, out, errOut)
	}
	if _, err := s.InsertContext(context.Background(), []store.ContextWrite{{UserID: "alice", Question: "home town", Answer: "Paris"}}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--user", "alice", "--embed-base-url", srv.URL, "--embed-model", "m1")
	if code != 0 || !strings.Contains(out, "1 item without a m1 vector to embed") || !strings.Contains(out, "1 item the embeddings server refused before left out") || !strings.Contains(out, "embedding done") {
		t.Errorf("backfill of a new item beside a refused one: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 0, the new item embedded, the refused one left out", code, out, errOut)
	}
	// One refused by this very run still fails it.
	if _, err := s.InsertContext(context.Background(), []store.ContextWrite{{UserID: "alice", Question: "another log", Answer: "POISON again"}}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--user", "alice", "--embed-base-url", srv.URL, "--embed-model", "m1")
	if code != 1 || !strings.Contains(errOut, "but for the 2 items and 0 document chunks whose text it refused as input") {
		t.Errorf("backfill of an item refused by it: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 1", code, out, errOut)
	}
}

// A backfill with --dims (the model behind the name changed) sends the
// texts the old model refused again, the new model may take them, and
// says so; before, their refusals outlived the model they were of. With
// --user, of that user only, which it sends: it forgot every user's and
// counted them as sent again, though it sent only the user's (review33).
func TestEmbedBackfillWithDimsForgetsTheOldModelsRefusals(t *testing.T) {
	t.Parallel()
	dbURL, srv, prefix, stream := twoUsersRefused(t)
	out, errOut, code := runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--user", "alice", "--dims", strconv.Itoa(embeddingtest.DefaultDims), "--embed-base-url", srv.URL, "--embed-model", "m1")
	if code != 1 || !strings.Contains(out, "1 item without a m1 vector to embed") || !strings.Contains(out, "1 item the embeddings server refused before sent again (--dims") {
		t.Errorf("backfill --user alice --dims: exit %d\nstdout:\n%s\nstderr:\n%s\nwant alice's one refused item sent again (and refused again: exit 1), not bob's", code, out, errOut)
	}
	out, errOut, code = runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--user", "bob", "--embed-base-url", srv.URL, "--embed-model", "m1")
	if code != 0 || !strings.Contains(out, "1 item the embeddings server refused before left out") {
		t.Errorf("backfill --user bob after alice's: exit %d\nstdout:\n%s\nstderr:\n%s\nwant bob's refusal kept, his item left out", code, out, errOut)
	}
}

// twoUsersRefused embeds an item of alice's and one of bob's with a
// server that refuses both texts: each user has one refusal of model m1.
func twoUsersRefused(t *testing.T) (dbURL string, srv *embeddingtest.Server, prefix, stream string) {
	t.Helper()
	dbURL, _, srv, prefix, stream = embedSetup(t,
		store.ContextWrite{UserID: "alice", Question: "a pasted log", Answer: "POISON"},
		store.ContextWrite{UserID: "bob", Question: "another log", Answer: "POISON too"})
	srv.RefuseContaining("POISON")
	if out, errOut, code := runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--embed-base-url", srv.URL, "--embed-model", "m1"); code != 1 {
		t.Fatalf("first backfill: exit %d\nstdout:\n%s\nstderr:\n%s\nwant 1, both texts refused", code, out, errOut)
	}
	return dbURL, srv, prefix, stream
}

// A backfill with --dims N where N is already the model's recorded
// dimensions (a nightly cron that keeps the flag) changes no model: it
// keeps the refusals, leaves their items out and succeeds. Before, every
// run forgot them, sent the refused texts again and exited 1, each night.
// Dimensions that do change still forget them.
func TestEmbedBackfillWithUnchangedDimsKeepsTheRefusals(t *testing.T) {
	t.Parallel()
	dbURL, _, srv, prefix, stream := embedSetup(t,
		store.ContextWrite{UserID: "alice", Question: "my canine companion", Answer: "Rex"},
		store.ContextWrite{UserID: "alice", Question: "a pasted log", Answer: "POISON"})
	srv.RefuseContaining("POISON")
	if out, errOut, code := runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--embed-base-url", srv.URL, "--embed-model", "m1"); code != 1 {
		t.Fatalf("first backfill: exit %d\nstdout:\n%s\nstderr:\n%s\nwant 1, the text refused", code, out, errOut)
	}
	for run := range 2 {
		sent := srv.Requests()
		out, errOut, code := runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--dims", strconv.Itoa(embeddingtest.DefaultDims), "--embed-base-url", srv.URL, "--embed-model", "m1")
		if code != 0 || !strings.Contains(out, "0 items without a m1 vector to embed") || !strings.Contains(out, "1 item the embeddings server refused before left out") {
			t.Errorf("backfill %d with --dims %d, the recorded dimensions: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 0, the refused item left out", run+1, embeddingtest.DefaultDims, code, out, errOut)
		}
		if n := srv.Requests() - sent; n != 1 {
			t.Errorf("backfill %d with unchanged --dims sent %d requests, want 1 (its test text)", run+1, n)
		}
	}
	srv.SetDims(32)
	out, errOut, code := runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--dims", "32", "--embed-base-url", srv.URL, "--embed-model", "m1")
	if code != 1 || !strings.Contains(out, "2 items without a m1 vector to embed") || !strings.Contains(out, "1 item the embeddings server refused before sent again (--dims") {
		t.Errorf("backfill with --dims 32, changed: exit %d\nstdout:\n%s\nstderr:\n%s\nwant both items sent again (the refused one refused again: exit 1)", code, out, errOut)
	}
}

// After a backfill with --dims N of one user (the model behind the name
// changed), the backfill with --dims N of another sends that user's texts
// the old model refused again, as the first did its user's: the model
// changed for both. Before, N being recorded by then, the second kept the
// old model's refusals, and no run but --retry-refused sent them again; so
// did a run again after one interrupted between recording N and
// forgetting. A run again of the same user keeps what the new model
// refused.
func TestEmbedBackfillWithDimsUserByUser(t *testing.T) {
	t.Parallel()
	dbURL, srv, prefix, stream := twoUsersRefused(t)
	srv.SetDims(32)
	for _, user := range []string{"alice", "bob"} {
		out, errOut, code := runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--user", user, "--dims", "32", "--embed-base-url", srv.URL, "--embed-model", "m1")
		if code != 1 || !strings.Contains(out, "1 item the embeddings server refused before sent again (--dims") {
			t.Errorf("backfill --user %s --dims 32: exit %d\nstdout:\n%s\nstderr:\n%s\nwant the old model's refusal of %s's item forgotten, the item sent again (and refused again: exit 1)", user, code, out, errOut, user)
		}
	}
	out, errOut, code := runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--user", "bob", "--dims", "32", "--embed-base-url", srv.URL, "--embed-model", "m1")
	if code != 0 || !strings.Contains(out, "1 item the embeddings server refused before left out") {
		t.Errorf("backfill --user bob --dims 32 again: exit %d\nstdout:\n%s\nstderr:\n%s\nwant the new model's refusal kept, the item left out", code, out, errOut)
	}
}

// TestEmbedBackfillTriesThePassingFailureOfItsTestTextAgain: a backfill
// whose test text meets one 500 of a server that answers the next request
// runs; before, it exited 1 saying the server did not embed it (a probe:
// 2 of 12 backfills, each after one 500 or a connection closed).
func TestEmbedBackfillTriesThePassingFailureOfItsTestTextAgain(t *testing.T) {
	t.Parallel()
	dbURL, s, srv, prefix, stream := embedSetup(t, store.ContextWrite{UserID: "alice", Question: "my canine companion", Answer: "Rex"})
	srv.FailNext(1, http.StatusInternalServerError)
	out, errOut, code := runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--embed-base-url", srv.URL, "--embed-model", "m1")
	if code != 0 || strings.Contains(errOut, "did not embed a test text") {
		t.Fatalf("backfill whose test text failed once: exit %d\nstdout:\n%s\nstderr:\n%s\nwant it tried again and the backfill run", code, out, errOut)
	}
	if n, err := s.CountEmbeddings(context.Background(), "alice", "m1"); err != nil || n.Embedded != 1 {
		t.Errorf("alice's m1 vectors after the backfill: %+v (%v), want 1", n, err)
	}
}

// TestEmbedBackfillDoesNotTryATimedOutTestTextAgain: the test text's
// request that ran out its --embed-timeout is not tried again, however
// short that timeout: the next would wait as long. Before, a timeout under
// the probe's fixed 5 s was taken for a passing failure and sent three
// times.
func TestEmbedBackfillDoesNotTryATimedOutTestTextAgain(t *testing.T) {
	t.Parallel()
	dbURL, _, srv, prefix, stream := embedSetup(t, store.ContextWrite{UserID: "alice", Question: "my canine companion", Answer: "Rex"})
	release := srv.HoldContaining("memoryd: the dimensions")
	defer release()
	out, errOut, code := runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--embed-base-url", srv.URL, "--embed-model", "m1", "--embed-timeout", "200ms")
	if code == 0 {
		t.Fatalf("backfill whose test text timed out: exit 0\nstdout:\n%s\nstderr:\n%s\nwant it refused", out, errOut)
	}
	if n := srv.Requests(); n != 1 {
		t.Errorf("backfill whose test text timed out after --embed-timeout 200ms: %d requests, want 1\nstderr:\n%s", n, errOut)
	}
}
