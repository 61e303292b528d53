package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// leftovers counts what Postgres still holds of user's turns other than
// keep: turns, context, facts, fact history, token usage, and extraction
// jobs naming the turns (a job of several users included; the tests' event
// ids start with the user id and a dash).
func (e *env) leftovers(user string, keep ...string) string {
	e.t.Helper()
	var turns, ctxs, facts, history, usage, jobs int
	keep = append([]string{}, keep...) // never nil: NULL would match nothing
	err := e.store.Pool().QueryRow(e.ctx, `SELECT
		(SELECT count(*) FROM turns WHERE user_id = $1 AND event_id <> ALL($2)),
		(SELECT count(*) FROM context WHERE user_id = $1 AND event_id <> ALL($2)),
		(SELECT count(*) FROM facts WHERE user_id = $1 AND event_id <> ALL($2)),
		(SELECT count(*) FROM fact_history WHERE user_id = $1 AND event_id <> ALL($2) AND new_value IS NOT NULL),
		(SELECT count(*) FROM llm_usage WHERE user_id = $1),
		(SELECT count(*) FROM river_job WHERE kind = 'memoryd_extract' AND EXISTS (
			SELECT 1 FROM jsonb_array_elements_text(args->'event_ids') AS e(eid) WHERE eid LIKE $1 || '-%' AND eid <> ALL($2)))`,
		user, keep).Scan(&turns, &ctxs, &facts, &history, &usage, &jobs)
	if err != nil {
		e.t.Fatal(err)
	}
	if turns+ctxs+facts+history+usage+jobs == 0 {
		return ""
	}
	return fmt.Sprintf("turns=%d context=%d facts=%d history=%d llm_usage=%d jobs=%d", turns, ctxs, facts, history, usage, jobs)
}

// subjectMsgs counts the messages of stream on subject (a wildcard sums).
func (e *env) subjectMsgs(stream, subject string) uint64 {
	e.t.Helper()
	s, err := e.js.Stream(e.ctx, stream)
	if err != nil {
		e.t.Fatal(err)
	}
	n, err := eventstest.SubjectMsgs(e.ctx, s, subject)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// blocker is a transaction the test holds open so that another one waits
// for it, which forces an interleaving without sleeping.
type blocker struct {
	e   *env
	tx  pgx.Tx
	pid int
}

// conn opens a connection of the test's own, outside the store's pool
// (storetest.MaxConns, 4): a transaction the test holds open, and the
// queries that watch who waits for it, must neither take a slot the
// system under test needs nor wait for one. In the pool, a prune started
// late under load (its advisory lock's connection, and its turn update
// waiting on the blocked row) with a replay and a forget waiting as
// planned held all four, and the test's next poll waited for a
// connection until go test's timeout.
func (e *env) conn() *pgx.Conn {
	e.t.Helper()
	c, err := pgx.Connect(e.ctx, storetest.URL(e.t, e.store))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// watcher is the connection of e's polls of pg_stat_activity (conn).
func (e *env) watcher() *pgx.Conn {
	if e.watch == nil {
		e.watch = e.conn()
	}
	return e.watch
}

func (e *env) block(sql string, args ...any) *blocker {
	e.t.Helper()
	tx, err := e.conn().Begin(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	b := &blocker{e: e, tx: tx}
	if err := tx.QueryRow(e.ctx, `SELECT pg_backend_pid()`).Scan(&b.pid); err != nil {
		e.t.Fatal(err)
	}
	if _, err := tx.Exec(e.ctx, sql, args...); err != nil {
		e.t.Fatal(err)
	}
	return b
}

// waitBlocked waits until a backend waits for pid and returns that
// backend's pid.
func (e *env) waitBlocked(what string, pid int) int {
	e.t.Helper()
	var waiter int
	e.waitFor(what, func() (bool, string) {
		err := e.watcher().QueryRow(e.ctx, `SELECT pid FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid)) LIMIT 1`, pid).Scan(&waiter)
		return err == nil, fmt.Sprint(err)
	})
	return waiter
}

// waitDoneOrBlocked waits until done is closed or a backend waits for pid:
// a forget either went through or waits for the transaction it must follow.
func (e *env) waitDoneOrBlocked(what string, done <-chan struct{}, pid int) {
	e.t.Helper()
	e.waitFor(what, func() (bool, string) {
		select {
		case <-done:
			return true, ""
		default:
		}
		var n int
		err := e.watcher().QueryRow(e.ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, pid).Scan(&n)
		return err == nil && n > 0, fmt.Sprint(n, err)
	})
}

type forgetCall struct {
	res  worker.ForgetResult
	err  error
	done chan struct{}
}

func (e *env) forgetAsync(user string) *forgetCall {
	c := &forgetCall{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.res, c.err = worker.Forget(e.ctx, e.js, e.store, e.prefix, e.stream, user)
	}()
	return c
}

func (c *forgetCall) wait(t *testing.T) worker.ForgetResult {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(60 * time.Second):
		t.Fatal("forget did not return")
	}
	if c.err != nil {
		t.Fatalf("forget: %v", c.err)
	}
	return c.res
}

func (e *env) waitSettled() {
	e.t.Helper()
	e.waitForAcked()
	e.waitFor("no turn pending", func() (bool, string) {
		n, err := e.store.PendingTurns(e.ctx, nil)
		return err == nil && n == 0, fmt.Sprint(n, err)
	})
}

// Turns already pulled from the consumer while the forget runs are dropped
// when ingest gets to them, not recorded after the forget; a turn published
// after the forget starts a new memory.
func TestForgetDuringIngestIsFinal(t *testing.T) {
	e := setup(t)
	e.start(extractor.NewRules(), nil)
	// Ingest's insert of dave-0 waits for this transaction, so the whole
	// burst is in flight (pulled, not recorded) when the forget runs.
	b := e.block(`INSERT INTO turns (event_id, user_id, user_message, turn_at) VALUES ('dave-0', 'dave', 'x', now())`)
	const n = 300
	for i := range n {
		e.publish(events.Turn{ID: fmt.Sprintf("dave-%d", i), UserID: "dave",
			UserMessage: fmt.Sprintf("I live in city%d. Note %d.", i%7, i), AssistantResponse: "ok",
			Timestamp: t0.Add(time.Duration(i) * time.Minute)})
		if i%30 == 0 {
			e.publish(events.Turn{ID: fmt.Sprintf("bob-%d", i), UserID: "bob", UserMessage: "I live in Oslo.", Timestamp: t0})
		}
	}
	ingest := e.waitBlocked("ingest waiting for the blocker", b.pid)

	f := e.forgetAsync("dave")
	e.waitDoneOrBlocked("forget done or waiting for ingest", f.done, ingest)
	if err := b.tx.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	f.wait(t)

	e.publish(events.Turn{ID: "dave-after", UserID: "dave", UserMessage: "I live in Lima.", Timestamp: t0})
	e.waitSettled()
	if got := e.leftovers("dave", "dave-after"); got != "" {
		t.Fatalf("after the forget Postgres still holds of dave's earlier turns: %s", got)
	}
	if got := e.subjectMsgs(e.stream, events.TurnSubject(e.prefix, "dave")); got != 1 {
		t.Fatalf("dave's subject holds %d events after the forget, want 1 (the turn published after it)", got)
	}
	if st, err := e.store.Stats(e.ctx, "dave"); err != nil || st.TurnsProcessed != 1 {
		t.Fatalf("dave's turn published after the forget: stats %+v, %v; want it processed as a new memory", st, err)
	}
	if st, err := e.store.Stats(e.ctx, "bob"); err != nil || st.TurnsProcessed != 10 {
		t.Fatalf("bob stats = %+v, %v; want his 10 turns", st, err)
	}
}

// A replay that read a user's events before the forget and records them
// after it brings nothing back, and the forget does not fail on a lock.
func TestForgetDuringReplayIsFinal(t *testing.T) {
	e := setup(t)
	e.start(extractor.NewRules(), nil)
	e.seedUsers("bob", "dave")
	bob := e.snapshot("bob")

	// The replay's one batch (bob's turns sort first) waits on bob-0, before
	// it touches any of dave's turns.
	b := e.block(`SELECT 1 FROM turns WHERE event_id = 'bob-0' FOR UPDATE`)
	type replayCall struct {
		p   worker.ReplayProgress
		err error
	}
	replayed := make(chan replayCall, 1)
	go func() {
		p, err := worker.Replay(e.ctx, worker.ReplayConfig{JetStream: e.js, Store: e.store, Prefix: e.prefix, Stream: e.stream, BatchSize: 100})
		replayed <- replayCall{p, err}
	}()
	// A replay that returned (a stream lookup that timed out) would never
	// wait: said at once, with its error, not after waitFor's 2 minutes.
	var replay int
	e.waitFor("replay waiting for the blocker", func() (bool, string) {
		select {
		case r := <-replayed:
			t.Fatalf("replay returned before it waited for the blocker: %+v, %v", r.p, r.err)
		default:
		}
		err := e.watcher().QueryRow(e.ctx, `SELECT pid FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid)) LIMIT 1`, b.pid).Scan(&replay)
		return err == nil, fmt.Sprint(err)
	})

	f := e.forgetAsync("dave")
	e.waitDoneOrBlocked("forget done or waiting for the replay", f.done, replay)
	if err := b.tx.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	f.wait(t)
	// The replay checked for forgets before it waited, so it enqueued dave's
	// turns, and the forget, waiting on it, then deleted them.
	if r := <-replayed; r.err != nil || r.p.Read != 20 || r.p.Enqueued+r.p.Forgotten != 20 {
		t.Fatalf("replay = %+v, %v; want 20 read, each enqueued or skipped as forgotten", r.p, r.err)
	}
	e.waitSettled()
	if got := e.leftovers("dave"); got != "" {
		t.Fatalf("the replay brought dave back: %s", got)
	}
	if got := e.subjectMsgs(e.stream, events.TurnSubject(e.prefix, "dave")); got != 0 {
		t.Fatalf("dave's subject holds %d events", got)
	}
	if e.snapshot("bob") != bob {
		t.Fatal("forgetting dave during a replay changed bob")
	}
}

// seedUsers publishes ten turns for each user and waits until all are
// processed.
func (e *env) seedUsers(users ...string) {
	e.t.Helper()
	for u, user := range users {
		for i := range 10 {
			e.publish(events.Turn{
				ID: fmt.Sprintf("%s-%d", user, i), UserID: user,
				UserMessage: fmt.Sprintf("I live in city%d. Note %d.", i%3, i), AssistantResponse: "ok",
				Timestamp: t0.Add(time.Duration(i*10+u) * time.Minute),
			})
		}
	}
	e.waitDone(int64(10 * len(users)))
}

// A forget whose stream side did not happen (the database side committed,
// then the purge failed) leaves nothing a replay can bring back, and the
// replay deletes the events it skips (a stream restored from a backup
// older than a forget is the same case: a backup walk found a forgotten
// user's events, text and all, left in the stream for good); running the
// forget again finds nothing left.
func TestForgetRerunCompletesHalfDoneForget(t *testing.T) {
	e := setup(t)
	e.start(extractor.NewRules(), nil)
	e.seedUsers("bob", "dave")
	s, err := e.js.Stream(e.ctx, e.stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	removed, tomb, err := e.store.ForgetUser(e.ctx, "dave", events.UserToken("dave"), store.StreamPosition{Seq: info.State.LastSeq, Stored: info.State.LastTime}, worker.ExtractJobs)
	if err != nil || removed.Turns != 10 || tomb.Through.Seq != info.State.LastSeq {
		t.Fatalf("database side of the forget = %+v, %+v, %v", removed, tomb, err)
	}
	// Half done: the events are still in the stream, and a replay reads them.
	if p := e.replay(worker.ReplayConfig{}); p.Read != 20 || p.Forgotten != 10 || p.ForgottenDeleted != 10 || p.Enqueued != 10 {
		t.Fatalf("replay = %+v; want 20 read, dave's 10 skipped as forgotten and deleted, bob's 10 enqueued", p)
	}
	if got := e.leftovers("dave"); got != "" {
		t.Fatalf("a replay after a half-done forget brought dave back: %s", got)
	}
	if got := e.subjectMsgs(e.stream, events.TurnSubject(e.prefix, "dave")); got != 0 {
		t.Fatalf("dave's subject holds %d events after the replay", got)
	}
	if got := e.subjectMsgs(e.stream, events.TurnSubject(e.prefix, "bob")); got != 10 {
		t.Fatalf("bob's subject holds %d events after the replay, want his 10", got)
	}
	res, err := worker.Forget(e.ctx, e.js, e.store, e.prefix, e.stream, "dave")
	if err != nil || res.StreamEvents != 0 {
		t.Fatalf("forget again = %+v, %v; want nothing left to purge", res, err)
	}
	if st, err := e.store.Stats(e.ctx, "bob"); err != nil || st.TurnsProcessed != 10 {
		t.Fatalf("bob stats = %+v, %v", st, err)
	}
}

// extractedSignal tells the test when an extraction job has returned.
type extractedSignal struct {
	outcomes
	ch chan string
}

func (s *extractedSignal) Extracted(took time.Duration, turns int, outcome string) {
	s.outcomes.Extracted(took, turns, outcome)
	select {
	case s.ch <- outcome:
	default:
	}
}

// Tokens a model call spent while its user was being forgotten are not
// recorded as the user's after the forget, and count in everyone's count
// of the day (which names no user), as the user's earlier calls' tokens
// do. Before, they counted nowhere, though the model server spent them.
func TestUsageOfModelCallInFlightDoesNotSurviveForget(t *testing.T) {
	e := setup(t)
	called, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := extractortest.NewServer(t)
	srv.SetHandler(func(openai.ChatCompletionRequest) extractortest.Reply {
		once.Do(func() { close(called) })
		<-release
		return extractortest.Content(`{"facts":{"city":"Lima"},"context":[{"q":"Where do I live?","a":"Lima"}]}`)
	})
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	sig := &extractedSignal{outcomes: outcomes{n: map[string]int{}}, ch: make(chan string, 10)}
	e.start(llm, func(c *worker.Config) { c.Observer = sig })
	e.publish(events.Turn{ID: "dave-0", UserID: "dave", UserMessage: "I live in Lima."})
	select {
	case <-called:
	case <-time.After(60 * time.Second):
		t.Fatal("the model was not called")
	}
	res, err := worker.Forget(e.ctx, e.js, e.store, e.prefix, e.stream, "dave")
	if err != nil || res.Turns != 1 {
		t.Fatalf("forget = %+v, %v", res, err)
	}
	close(release)
	select {
	case <-sig.ch:
	case <-time.After(60 * time.Second):
		t.Fatal("the extraction did not return")
	}
	if got := e.leftovers("dave"); got != "" {
		t.Fatalf("after the model call returned Postgres holds of dave: %s", got)
	}
	// The fake's every reply is 10 prompt and 5 completion tokens.
	var daily, everyone, calls int64
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT
		(SELECT count(*) FROM llm_usage_daily WHERE user_id = 'dave'),
		(SELECT coalesce(sum(tokens), 0) FROM llm_usage_daily_shards),
		(SELECT count(*) FROM llm_usage_calls)`).Scan(&daily, &everyone, &calls); err != nil {
		t.Fatal(err)
	}
	if n := int64(srv.Requests()); daily != 0 || everyone != 15*n || calls != 1 {
		t.Fatalf("after %d requests: dave's daily counts %d, everyone's tokens %d, calls recorded %d; want 0, %d, 1", n, daily, everyone, calls, 15*n)
	}
}

// Forget takes the user's events wherever they were published: on a
// subject under the user's, and on another user's subject (dead-lettered,
// with the user_id in the body), from the turn stream and the dead-letter
// stream; other users' dead letters stay.
func TestForgetPurgesDeadLettersAttributedToTheUser(t *testing.T) {
	e := setup(t)
	e.start(extractor.NewRules(), nil)
	body := func(id, user string) []byte {
		return fmt.Appendf(nil, `{"id":%q,"user_id":%q,"user_message":"I live in Lima.","timestamp":"2026-11-21T10:00:00Z"}`, id, user)
	}
	bobSubject := events.TurnSubject(e.prefix, "bob")
	for subject, data := range map[string][]byte{
		events.TurnSubject(e.prefix, "dave") + ".v2": body("dave-v2", "dave"),
		bobSubject: body("dave-on-bob", "dave"),
	} {
		if _, err := e.js.Publish(e.ctx, subject, data); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.js.Publish(e.ctx, bobSubject, []byte(`{"id":"bob-bad","user_id":"bob"}`)); err != nil {
		t.Fatal(err)
	}
	e.publish(events.Turn{ID: "dave-0", UserID: "dave", UserMessage: "I live in Lima."})
	e.publish(events.Turn{ID: "bob-0", UserID: "bob", UserMessage: "I live in Oslo."})
	e.waitDone(2)
	e.waitForAcked()
	dl := events.DeadLetterStream(e.stream)
	if got := e.subjectMsgs(dl, events.DeadLetterSubjects(e.prefix)); got != 3 {
		t.Fatalf("dead-letter stream holds %d messages, want 3", got)
	}
	// What an operator reads (memoryd deadletters): every letter with its
	// reason, a user's (on their subject or naming them), the last ones.
	read := func(user string, limit int, data bool) []events.DeadLetter {
		t.Helper()
		ls, err := events.ReadDeadLetters(e.ctx, e.js, e.prefix, e.stream, user, limit, data)
		if err != nil {
			t.Fatal(err)
		}
		return ls
	}
	all := read("", 10, false)
	if len(all) != 3 || all[0].Seq >= all[2].Seq || all[0].Data != nil {
		t.Fatalf("dead letters read: %+v; want 3, oldest first, headers only", all)
	}
	for _, d := range all {
		if d.Reason == "" || d.OriginalSubject == "" {
			t.Errorf("dead letter without its reason or subject: %+v", d)
		}
	}
	if got := read("dave", 10, false); len(got) != 2 {
		t.Errorf("dave's dead letters: %+v; want his 2 (one on bob's subject)", got)
	}
	if got := read("", 1, true); len(got) != 1 || got[0].Seq != all[2].Seq || !json.Valid(got[0].Data) {
		t.Errorf("the last dead letter with its event: %+v", got)
	}

	res, err := worker.Forget(e.ctx, e.js, e.store, e.prefix, e.stream, "dave")
	if err != nil {
		t.Fatal(err)
	}
	if res.DeadLetters != 2 || res.StreamEvents != 3 || res.Turns != 1 {
		t.Fatalf("forget = %+v; want 2 dead letters and 3 stream events", res)
	}
	if got := e.subjectMsgs(dl, events.DeadLetterSubjects(e.prefix)); got != 1 {
		t.Fatalf("dead-letter stream holds %d messages after the forget, want bob's 1", got)
	}
	if got := read("dave", 10, false); len(got) != 0 {
		t.Errorf("dave's dead letters after his forget: %+v", got)
	}
	if got := e.subjectMsgs(e.stream, e.prefix+".turns.>"); got != 2 {
		t.Fatalf("turn stream holds %d events after the forget, want bob's 2", got)
	}
	if got := e.leftovers("dave"); got != "" {
		t.Fatalf("Postgres holds of dave: %s", got)
	}
}

// A forget takes only the user's events out of the stream: another user's
// events that the durable consumer has not delivered yet are still
// delivered and recorded. (A subject-filtered purge made nats-server
// before 2.9.12 move every consumer whose filter is wider, such as
// ingest's, past the purge, so those events were silently skipped.)
func TestForgetKeepsOtherUsersUndeliveredEvents(t *testing.T) {
	e := setup(t)
	e.start(extractor.NewRules(), nil)() // the durable consumer exists, nothing reads it
	for i := range 10 {
		for _, u := range []string{"bob", "dave"} {
			e.publish(events.Turn{ID: fmt.Sprintf("%s-%d", u, i), UserID: u, UserMessage: fmt.Sprintf("I live in city%d.", i),
				AssistantResponse: "ok", Timestamp: t0.Add(time.Duration(i) * time.Minute)})
		}
	}
	res, err := worker.Forget(e.ctx, e.js, e.store, e.prefix, e.stream, "dave")
	if err != nil || res.StreamEvents != 10 {
		t.Fatalf("forget dave = %+v, %v; want his 10 events removed from the stream", res, err)
	}
	c, err := e.js.Consumer(e.ctx, e.stream, worker.DefaultDurable)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumPending != 10 || info.NumAckPending != 0 {
		t.Fatalf("after forgetting dave the ingest consumer has %d events pending, %d unacknowledged; want bob's 10 pending",
			info.NumPending, info.NumAckPending)
	}
	e.start(extractor.NewRules(), nil)
	e.waitDone(10)
	e.waitSettled()
	if st, err := e.store.Stats(e.ctx, "bob"); err != nil || st.TurnsProcessed != 10 {
		t.Fatalf("bob stats = %+v, %v; want his 10 turns", st, err)
	}
	if got := e.leftovers("dave"); got != "" {
		t.Fatalf("dave left: %s", got)
	}
}

// A job another transaction inserts for the user's turns while the forget
// waits on those turns (retry-failed re-enqueueing a failed turn, as here; a
// takeover's replacement, a reconcile) commits before the forget's turn
// delete goes on, after its first delete of the user's jobs: the forget
// must not answer done with that job left naming the user.
func TestForgetDeletesJobsInsertedWhileItWaited(t *testing.T) {
	e := setup(t)
	e.recordTurns(recoverTurn("e1", "alice"))
	if err := e.store.MarkFailed(e.ctx, "alice", []string{"e1"}, "boom", true); err != nil {
		t.Fatal(err)
	}
	e.exec(`DELETE FROM river_job`) // the failed turn's job finished long ago

	hold := e.block(`SELECT 1 FROM turns WHERE user_id = 'alice' FOR UPDATE`)
	retried := make(chan error, 1)
	go func() {
		_, _, err := worker.RetryFailed(e.ctx, e.store, "alice", 10, true)
		retried <- err
	}()
	retry := e.waitBlocked("retry-failed waiting for the held turn", hold.pid)
	f := e.forgetAsync("alice")
	// The forget's turn delete queues behind retry-failed's lock.
	e.waitDoneOrBlocked("forget waiting for retry-failed", f.done, retry)
	if err := hold.tx.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-retried; err != nil {
		t.Fatal(err)
	}
	f.wait(t)
	var jobs []string
	rows, err := e.store.Pool().Query(e.ctx, `SELECT state::text || ' ' || args::text FROM river_job WHERE args->>'user_id' = 'alice'`)
	if err == nil {
		jobs, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || len(jobs) > 0 {
		t.Fatalf("jobs naming alice after her forget answered done: %v (%v)", jobs, err)
	}
}

// Ingest does not wait for one user's forget with other users' turns: the
// turns of the user being forgotten are handed back and recorded (or
// dropped, when the forget covers them) once it ends; the others are
// recorded meanwhile. Before, the whole batch waited on the forget's lock,
// then was handed back, again and again: a race hunt saw 100 turns of 10
// users wait 41 s behind a 40 s lock, and every user's ingest stop for the
// 3.5 s forget of a large user.
func TestIngestDoesNotWaitForAnotherUsersForget(t *testing.T) {
	e := setup(t)
	// A batch may wait up to AckWait/2 for its transaction: long enough here
	// that a batch waiting on alice's lock outlasts the test's wait.
	e.start(extractor.NewRules(), func(c *worker.Config) { c.AckWait = 10 * time.Minute })
	forget := e.block(`SELECT pg_advisory_xact_lock(hashtextextended('memoryd.user.' || current_schema() || '.' || 'alice', 0))`)
	e.publish(events.Turn{ID: "a1", UserID: "alice", UserMessage: "I live in Rome."})
	for i := range 20 {
		e.publish(events.Turn{ID: fmt.Sprintf("b%d", i), UserID: "bob", UserMessage: fmt.Sprintf("My lucky number is %d.", i)})
	}
	e.waitFor("bob's 20 turns recorded while alice is being forgotten", func() (bool, string) {
		st, err := e.store.Stats(e.ctx, "bob")
		return err == nil && st.TurnsReceived == 20, fmt.Sprintf("%+v %v", st, err)
	})
	if st, err := e.store.Stats(e.ctx, "alice"); err != nil || st.TurnsReceived != 0 {
		t.Fatalf("alice's turn recorded during her forget: %+v, %v", st, err)
	}
	if err := forget.tx.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	// The forget rolled back: her turn, handed back, is recorded.
	e.waitFor("alice's turn recorded after the forget ended", func() (bool, string) {
		st, err := e.store.Stats(e.ctx, "alice")
		return err == nil && st.TurnsReceived == 1, fmt.Sprintf("%+v %v", st, err)
	})
}

// Stop keeps to its deadline while a batch waits on the database: the batch
// is cancelled, nothing of it acknowledged, and the next worker records it.
// Before, Stop waited for the batch's transaction, up to AckWait/2 (a race
// hunt saw a SIGTERM with --shutdown-timeout 5s take 9.1 s).
func TestStopCancelsABatchWaitingOnTheDatabase(t *testing.T) {
	e := setup(t)
	w, _ := e.startWorker(extractor.NewRules(), func(c *worker.Config) { c.AckWait = 10 * time.Minute })
	lock := e.block(`LOCK TABLE turns IN EXCLUSIVE MODE`)
	e.publish(events.Turn{ID: "a1", UserID: "alice", UserMessage: "I live in Rome."})
	e.waitBlocked("the batch waiting on the locked table", lock.pid)
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		stopped <- w.Stop(ctx)
	}()
	e.waitFor("Stop to return past its deadline", func() (bool, string) {
		select {
		case err := <-stopped:
			stopped <- err
			return true, ""
		default:
			return false, "Stop still waits for the batch"
		}
	})
	if err := lock.tx.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.start(extractor.NewRules(), nil)
	e.waitFor("the handed-back turn recorded by the next worker", func() (bool, string) {
		st, err := e.store.Stats(e.ctx, "alice")
		return err == nil && st.TurnsReceived == 1, fmt.Sprintf("%+v %v", st, err)
	})
}

// The events of a user handed back during their forget are dropped once
// the forget commits, when it covers them: the forget stays final.
func TestEventsHandedBackDuringAForgetAreDroppedByIt(t *testing.T) {
	e := setup(t)
	e.start(extractor.NewRules(), nil)
	forget := e.block(`SELECT pg_advisory_xact_lock(hashtextextended('memoryd.user.' || current_schema() || '.' || 'alice', 0))`)
	ack, err := e.pub.Publish(e.ctx, events.Turn{ID: "a1", UserID: "alice", UserMessage: "I live in Rome.", Timestamp: t0})
	if err != nil {
		t.Fatal(err)
	}
	e.publish(events.Turn{ID: "b1", UserID: "bob", UserMessage: "I live in Oslo."})
	e.waitFor("bob's turn recorded while alice is being forgotten", func() (bool, string) {
		st, err := e.store.Stats(e.ctx, "bob")
		return err == nil && st.TurnsReceived == 1, fmt.Sprintf("%+v %v", st, err)
	})
	// The forget's tombstone covers her event; it commits.
	if _, err := forget.tx.Exec(e.ctx, `INSERT INTO tombstones (user_token, stream_seq) VALUES ($1, $2)`, events.UserToken("alice"), int64(ack.Sequence)); err != nil {
		t.Fatal(err)
	}
	if err := forget.tx.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.waitForAcked()
	if st, err := e.store.Stats(e.ctx, "alice"); err != nil || st.TurnsReceived != 0 {
		t.Fatalf("alice after a forget that covers her handed-back event: %+v, %v; want nothing recorded", st, err)
	}
}
