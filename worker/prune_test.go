package worker_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// seedContext stores n items per user, item i at t0+i minutes.
func seedContext(t *testing.T, s *store.Store, users []string, n int) {
	t.Helper()
	ctx := context.Background()
	for _, u := range users {
		var items []store.ContextWrite
		for i := range n {
			items = append(items, store.ContextWrite{UserID: u, Question: fmt.Sprintf("question %d %s", i, strings.Repeat("q", 200)),
				Answer: fmt.Sprintf("answer %d %s", i, strings.Repeat("a", 400)), CreatedAt: t0.Add(time.Duration(i) * time.Minute), EventID: fmt.Sprint(i)})
		}
		if _, err := s.InsertContext(ctx, items); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: u, Key: "name", Value: u, SourceAt: t0}}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPruneToSizeDeletesOldestAndConverges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	users := []string{"alice", "bob", "carol"}
	seedContext(t, s, users, 1000)
	before, err := s.MeasureSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	limit := before.LiveBytes - before.ContextBytes*4/10 // needs ~40% of the items gone
	rep, err := worker.Prune(ctx, s, worker.PruneLimits{MaxBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	if rep.RemovedForSize < 1000 || rep.RemovedForSize > 1500 {
		t.Fatalf("removed %d items; want about 40%% of 3000", rep.RemovedForSize)
	}
	if rep.After.LiveBytes > limit {
		t.Fatalf("live size after prune %d > limit %d", rep.After.LiveBytes, limit)
	}
	// Oldest first, over all users: every remaining item is at least as new
	// as any deleted one, i.e. the remaining minimum minute is the cut.
	var minLeft time.Time
	var left int64
	if err := s.Pool().QueryRow(ctx, `SELECT min(created_at), count(*) FROM context`).Scan(&minLeft, &left); err != nil {
		t.Fatal(err)
	}
	if left != 3000-rep.RemovedForSize {
		t.Fatalf("%d items left, want %d", left, 3000-rep.RemovedForSize)
	}
	cut := int(minLeft.Sub(t0) / time.Minute)
	if wantCut := int(rep.RemovedForSize) / 3; cut < wantCut-1 || cut > wantCut+1 {
		t.Fatalf("oldest remaining item is minute %d, want about %d (oldest deleted first across users)", cut, wantCut)
	}
	for _, u := range users {
		if _, err := s.Fact(ctx, u, "name"); err != nil {
			t.Fatalf("fact of %s pruned: %v", u, err)
		}
	}
	// The files did not shrink, but the next run must not delete again.
	again, err := worker.Prune(ctx, s, worker.PruneLimits{MaxBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	if again.RemovedForSize != 0 {
		t.Fatalf("second prune removed %d more items (real size %d, live %d, limit %d)", again.RemovedForSize, again.Before.RealBytes, again.Before.LiveBytes, limit)
	}
}

func TestPrunePerUserCapKeepsNewest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	seedContext(t, s, []string{"alice", "bob"}, 150)
	seedContext(t, s, []string{"carol"}, 20)
	rep, err := worker.Prune(ctx, s, worker.PruneLimits{MaxContextPerUser: 100})
	if err != nil {
		t.Fatal(err)
	}
	if rep.RemovedForCap != 100 {
		t.Fatalf("removed %d, want 100 (50 each from alice and bob)", rep.RemovedForCap)
	}
	for u, want := range map[string]int64{"alice": 100, "bob": 100, "carol": 20} {
		n, err := s.CountContext(ctx, u)
		if err != nil || n != want {
			t.Fatalf("%s has %d items (%v), want %d", u, n, err, want)
		}
		items, err := s.RecentContext(ctx, u, 1)
		if err != nil || !strings.HasPrefix(items[0].Question, "question "+fmt.Sprint(want-1+map[string]int64{"alice": 50, "bob": 50, "carol": 0}[u])) {
			t.Fatalf("%s newest item = %q, %v", u, items[0].Question, err)
		}
	}
}

// TestPruneSkipsRowBeingDeduplicated: a pair being re-inserted locks the row
// it deduplicates against, so a concurrent prune cannot delete it and lose
// the new memory.
func TestPruneSkipsRowBeingDeduplicated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	seedContext(t, s, []string{"alice"}, 3)
	oldest := store.ContextWrite{UserID: "alice", Question: fmt.Sprintf("question 0 %s", strings.Repeat("q", 200)),
		Answer: fmt.Sprintf("answer 0 %s", strings.Repeat("a", 400)), CreatedAt: t0.Add(time.Hour), EventID: "again"}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// Re-insert the oldest pair inside an open transaction.
	ids, err := s.WithTx(tx).InsertContext(ctx, []store.ContextWrite{oldest})
	if err != nil || ids[0] != 0 {
		t.Fatalf("re-insert: ids %v, %v; want a duplicate", ids, err)
	}
	n, err := s.DeleteOldestContext(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("prune deleted %d rows, want 1 (the next oldest)", n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	items, err := s.RecentContext(ctx, "alice", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 2 || !items[0].CreatedAt.Equal(t0.Add(time.Hour)) || !strings.HasPrefix(items[0].Question, "question 0") {
		t.Fatalf("items = %+v; want the re-said pair kept and refreshed, the next oldest pruned", items)
	}
}

func TestPeriodicPruneRunsInWorker(t *testing.T) {
	e := setup(t)
	seedContext(t, e.store, []string{"alice"}, 30)
	e.start(extractor.NewRules(), func(c *worker.Config) { c.MaxContextPerUser = 5; c.PruneInterval = time.Second })
	e.waitFor("periodic prune", func() (bool, string) {
		n, err := e.store.CountContext(e.ctx, "alice")
		return err == nil && n == 5, fmt.Sprint(n, err)
	})
}

// A stop ends a running prune at once, keeping what it deleted, and the
// job ends completed (the next period's run goes on). Before, River left
// the prune running until the stop's deadline (a VACUUM waiting on a lock,
// here; under load a run took 50 s), then cancelled it and ran it again
// from the start.
func TestStopEndsARunningPrune(t *testing.T) {
	e := setup(t)
	seedContext(t, e.store, []string{"alice"}, 30)
	// The prune's VACUUM of context waits for this lock; its deletes do
	// not (SHARE UPDATE EXCLUSIVE conflicts with VACUUM, not with rows).
	tx, err := e.store.Pool().Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(e.ctx) }()
	if _, err := tx.Exec(e.ctx, `LOCK TABLE context IN SHARE UPDATE EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	w, stop := e.startWorker(extractor.NewRules(), func(c *worker.Config) { c.MaxContextPerUser = 5; c.PruneInterval = time.Hour })
	defer stop()
	e.waitFor("the prune's VACUUM waiting for the lock", func() (bool, string) {
		var waiting int
		err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'context'::regclass`).Scan(&waiting)
		return err == nil && waiting == 1, fmt.Sprint(waiting, err)
	})
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	if err := w.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the stop waited for its deadline: the prune held it")
	}
	var state string
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT state FROM river_job WHERE kind = 'memoryd_prune'`).Scan(&state); err != nil || state != "completed" {
		t.Fatalf("prune job state %q, %v; want completed", state, err)
	}
	if n, err := e.store.CountContext(e.ctx, "alice"); err != nil || n != 5 {
		t.Fatalf("alice has %d items (%v); want the deletes before the stop kept: 5", n, err)
	}
}

// randomText is n bytes of text that Postgres cannot compress, so that the
// stored size is what the test wrote.
func randomText(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n*3/4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// seedTurns records n turns of user with large texts, ids prefix-0...,
// processes those of them that are processed (the rest stay pending), and
// backdates their processing by age.
func seedTurns(t *testing.T, s *store.Store, user, prefix string, n int, processed bool, age time.Duration) []string {
	t.Helper()
	ctx := context.Background()
	var turns []store.Turn
	for i := range n {
		turns = append(turns, store.Turn{EventID: fmt.Sprintf("%s-%d", prefix, i), UserID: user, UserMessage: randomText(t, 12<<10),
			AssistantResponse: randomText(t, 4<<10), TurnAt: t0.Add(time.Duration(i) * time.Minute), Metadata: []byte(`{"client":"test"}`)})
	}
	out, err := s.InsertTurns(ctx, turns)
	if err != nil || len(out) != n || slices.Contains(out, store.TurnDuplicate) || slices.Contains(out, store.TurnConflict) {
		t.Fatalf("insert turns: %v, %v", out, err)
	}
	ids := make([]string, n)
	for i, t := range turns {
		ids[i] = t.EventID
	}
	if !processed {
		return ids
	}
	if err := s.MarkProcessed(ctx, user, ids, store.Provenance{Extractor: "rules"}); err != nil {
		t.Fatal(err)
	}
	// Received (and stored in the stream) then too: the size limit spares
	// the text of turns the stream stored in the last hour.
	if _, err := s.Pool().Exec(ctx, `UPDATE turns SET processed_at = now() - $2::interval, received_at = now() - $2::interval WHERE event_id = ANY($1)`, ids, age); err != nil {
		t.Fatal(err)
	}
	flushStats(t, s)
	return ids
}

// flushStats publishes the statistics of the statements s's connections
// ran, the dead row versions the seeding's updates left above all, which
// the size measure reads (MeasureSize). Postgres publishes a connection's
// counts at most once a second, or some seconds later when it idles, so
// a test's measure just after seeding and the prune's a moment later
// could disagree by hundreds of dead rows: a CI run saw the excess of
// TestPruneForSizeClearsWhatTheExcessNeeds vanish (0 turns cleared for
// 41 KB). Each idle connection flushes them as this statement ends,
// before it tells the client it is ready.
func flushStats(t *testing.T, s *store.Store) {
	t.Helper()
	ctx := context.Background()
	for _, c := range s.Pool().AcquireAllIdle(ctx) {
		_, err := c.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
		c.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// textState counts a set of turns by whether they still hold their text.
func textState(t *testing.T, s *store.Store, ids []string) (kept, cleared int) {
	t.Helper()
	for _, id := range ids {
		var msg, resp string
		var meta []byte
		var clearedAt *time.Time
		err := s.Pool().QueryRow(context.Background(), `SELECT user_message, assistant_response, metadata, text_cleared_at FROM turns WHERE event_id = $1`, id).
			Scan(&msg, &resp, &meta, &clearedAt)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case msg == "" && resp == "" && meta == nil && clearedAt != nil:
			cleared++
		case msg != "" && resp != "" && meta != nil && clearedAt == nil:
			kept++
		default:
			t.Fatalf("turn %s half cleared: message %d bytes, response %d bytes, metadata %q, cleared at %v", id, len(msg), len(resp), meta, clearedAt)
		}
	}
	return kept, cleared
}

// TestPruneDoesNotWipeContextForOneUsersTurns: one user's large turns make
// the turns table alone exceed the limit. Pruning clears the text of the
// turns past their retention (not the others) and gets under the limit
// without touching any user's context. When the text of processed turns
// within their retention keeps the size over the limit, that text is
// cleared before any context item (the stream keeps it; before, users'
// memory was deleted to keep it); when the text of pending and failed
// turns does, pruning spares the context (deleting all of it would not
// help) and says so.
func TestPruneDoesNotWipeContextForOneUsersTurns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A database of its own: the VACUUMs (settleTurnStats, the prune's)
	// remove dead versions that no other test's snapshot holds.
	s := storetest.Open(t, storetest.Database(t))
	noAutovacuum(t, s)
	// Few context items: with their term statistics (context_terms, counted
	// with context) more would outweigh the turns this test needs over the limit.
	seedContext(t, s, []string{"alice", "bob"}, 40)
	expired := seedTurns(t, s, "mallory", "old", 150, true, 8*24*time.Hour)
	recent := seedTurns(t, s, "mallory", "new", 30, true, time.Hour)
	pending := seedTurns(t, s, "mallory", "pending", 5, false, 0)
	failed := seedTurns(t, s, "mallory", "failed", 5, false, 0)
	if err := s.MarkFailed(ctx, "mallory", failed, "boom", true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `UPDATE turns SET received_at = now() - interval '30 days' WHERE event_id = ANY($1)`, append(pending, failed...)); err != nil {
		t.Fatal(err)
	}
	// 190 inserts; 180 + 180 updates marking and dating the processed
	// turns, 5 failed, 10 dated.
	writes := settleTurnStats(t, s, 0, 190+180+180+5+10)
	before, err := s.MeasureSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Turns alone are over the limit; clearing the expired text (150 of 190
	// turns) is enough to get under it.
	limit := before.LiveBytes - before.TurnTextBytes/2
	if before.TurnsBytes <= limit {
		t.Fatalf("setup: turns take %d bytes, not over the limit %d", before.TurnsBytes, limit)
	}
	rep, err := worker.Prune(ctx, s, worker.PruneLimits{MaxBytes: limit, TurnRetention: 7 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before %+v", rep.Before)
	t.Logf("after  %+v", rep.After)
	if rep.RemovedForSize != 0 || rep.ContextSpared || rep.OverLimit {
		t.Fatalf("report %+v: want no context removed and the size under the limit", rep)
	}
	if rep.After.LiveBytes > limit {
		t.Fatalf("live size after prune %d > limit %d", rep.After.LiveBytes, limit)
	}
	if rep.TurnTextsCleared != int64(len(expired)) {
		t.Fatalf("cleared %d turn texts, want the %d past retention", rep.TurnTextsCleared, len(expired))
	}
	if kept, cleared := textState(t, s, expired); cleared != len(expired) {
		t.Fatalf("expired turns: %d kept their text, %d cleared; want all cleared", kept, cleared)
	}
	keep := append(append(append([]string{}, recent...), pending...), failed...)
	if kept, cleared := textState(t, s, keep); kept != len(keep) {
		t.Fatalf("recent, pending and failed turns: %d kept their text, %d cleared; want all kept", kept, cleared)
	}
	for _, u := range []string{"alice", "bob"} {
		if n, err := s.CountContext(ctx, u); err != nil || n != 40 {
			t.Fatalf("%s has %d context items (%v), want all 40", u, n, err)
		}
	}
	// The rows stay: stats still count them, and a redelivered event is
	// still known.
	st, err := s.Stats(ctx, "mallory")
	if err != nil || st.TurnsReceived != 190 || st.TurnsProcessed != 180 || st.TurnsFailed != 5 {
		t.Fatalf("mallory stats %+v, %v; want 190 turns, 180 processed, 5 failed", st, err)
	}
	if out, err := s.InsertTurns(ctx, []store.Turn{{EventID: expired[0], UserID: "mallory", UserMessage: "again", TurnAt: t0}}); err != nil || out[0] == store.TurnInserted {
		t.Fatalf("redelivered turn inserted again: %v, %v", out, err)
	}

	// Now a limit that the text of the recent processed turns, within
	// their retention, keeps out of reach (30 of the 40 turns holding
	// text; a quarter of the text is over): it goes, not the context.
	writes = settleTurnStats(t, s, writes, rep.TurnTextsCleared+rep.TurnTextsClearedForSize)
	mid, err := s.MeasureSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	limit = mid.LiveBytes - mid.TurnTextBytes/4
	rep, err = worker.Prune(ctx, s, worker.PruneLimits{MaxBytes: limit, TurnRetention: 7 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if rep.RemovedForSize != 0 || rep.ContextSpared || rep.OverLimit || rep.TurnTextsClearedForSize == 0 || rep.TurnTextsCleared != 0 {
		t.Fatalf("report %+v: want recent turns' text cleared for size, no context removed, under the limit", rep)
	}
	if kept, _ := textState(t, s, append(append([]string{}, pending...), failed...)); kept != len(pending)+len(failed) {
		t.Fatalf("pending and failed turns: %d kept their text; want all %d", kept, len(pending)+len(failed))
	}
	for _, u := range []string{"alice", "bob"} {
		if n, err := s.CountContext(ctx, u); err != nil || n != 40 {
			t.Fatalf("%s has %d context items (%v), want all 40", u, n, err)
		}
	}

	// Last, a limit that only pending and failed turns' text, and the
	// text of turns processed in the last hour (a conversation under way:
	// its next extraction reads them), keep out of reach: above the floor,
	// below the size without any context and without older processed
	// turns' text. Every older processed turn's text goes, the context is
	// spared.
	justNow := seedTurns(t, s, "mallory", "now", 3, true, 0)
	settleTurnStats(t, s, writes, rep.TurnTextsClearedForSize+3+3+3)
	// Measured after the seed: a limit under the floor is refused.
	size, err := s.MeasureSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	limit = size.FloorBytes + 1
	rep, err = worker.Prune(ctx, s, worker.PruneLimits{MaxBytes: limit, TurnRetention: 7 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if rep.RemovedForSize != 0 || !rep.ContextSpared || !rep.OverLimit {
		t.Fatalf("report %+v: want no context removed, context spared and the size reported over the limit", rep)
	}
	if _, cleared := textState(t, s, recent); cleared != len(recent) {
		t.Fatalf("recent processed turns: %d cleared; want all %d", cleared, len(recent))
	}
	if kept, _ := textState(t, s, justNow); kept != len(justNow) {
		t.Fatalf("turns processed in the last hour: %d kept their text; want all %d", kept, len(justNow))
	}
	if kept, _ := textState(t, s, append(append([]string{}, pending...), failed...)); kept != len(pending)+len(failed) {
		t.Fatalf("pending and failed turns: %d kept their text; want all %d", kept, len(pending)+len(failed))
	}
	for _, u := range []string{"alice", "bob"} {
		if n, err := s.CountContext(ctx, u); err != nil || n != 40 {
			t.Fatalf("%s has %d context items (%v), want all 40", u, n, err)
		}
	}
}

// TestPruneForSizeKeepsTheTextOverCapTurnsWaitFor: turns a spend cap sent
// to the offline extractor are processed, and wait for the job that
// extracts them again with the model at the next midnight, which reads
// their text (store.OfflineTurns). Clearing text for size spares them:
// cleared, the job found nothing to do and the turns kept their rules
// memory for good.
func TestPruneForSizeKeepsTheTextOverCapTurnsWaitFor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	seedContext(t, s, []string{"alice", "bob"}, 40)
	ids := seedTurns(t, s, "carol", "c", 20, true, time.Hour)
	waiting, done := ids[:10], ids[10:]
	if _, err := s.Pool().Exec(ctx, `INSERT INTO river_job (kind, args, queue, state, max_attempts, scheduled_at)
		VALUES ($1, jsonb_build_object('user_id', 'carol', 'event_ids', $2::text[], 'over_cap', true), 'extraction', 'scheduled', 5, now() + interval '10 hours')`,
		worker.ExtractJobKind, waiting); err != nil {
		t.Fatal(err)
	}
	// A completed over-cap job holds nothing back.
	if _, err := s.Pool().Exec(ctx, `INSERT INTO river_job (kind, args, queue, state, max_attempts, scheduled_at, finalized_at)
		VALUES ($1, jsonb_build_object('user_id', 'carol', 'event_ids', $2::text[], 'over_cap', true), 'extraction', 'completed', 5, now(), now())`,
		worker.ExtractJobKind, done); err != nil {
		t.Fatal(err)
	}
	size, err := s.MeasureSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := worker.Prune(ctx, s, worker.PruneLimits{MaxBytes: size.FloorBytes + 1, TurnRetention: 7 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if rep.TurnTextsClearedForSize != int64(len(done)) {
		t.Fatalf("report %+v: want the text of the %d turns no job waits for cleared for size", rep, len(done))
	}
	if kept, _ := textState(t, s, waiting); kept != len(waiting) {
		t.Fatalf("turns an over-cap job waits for: %d kept their text; want all %d", kept, len(waiting))
	}
	if turns, err := s.OfflineTurns(ctx, "carol", waiting, "rules"); err != nil || len(turns) != len(waiting) {
		t.Fatalf("offline turns left for the model: %d (%v); want %d", len(turns), err, len(waiting))
	}
}

// TestPruneRemovesNoMoreThanTheExcess: with an excess of k items' worth, a
// prune deletes k items, the oldest.
func TestPruneRemovesNoMoreThanTheExcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	const k = 50
	limit := seedOverLimit(t, s, k)
	rep, err := worker.Prune(ctx, s, worker.PruneLimits{MaxBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	if rep.RemovedForSize != k || rep.OverLimit {
		t.Fatalf("removed %d items (over limit: %v), want exactly the excess of %d", rep.RemovedForSize, rep.OverLimit, k)
	}
	var minLeft time.Time
	if err := s.Pool().QueryRow(ctx, `SELECT min(created_at) FROM context`).Scan(&minLeft); err != nil {
		t.Fatal(err)
	}
	// 50 oldest over three users seeded minute by minute: minutes 0..16 of
	// each, and two of minute 16 or 17's three.
	if cut := minLeft.Sub(t0) / time.Minute; cut != 16 {
		t.Fatalf("oldest remaining item is minute %d, want 16", cut)
	}
}

// seedOverLimit stores 300 items for each of three users and returns a size
// limit k items below their size.
func seedOverLimit(t *testing.T, s *store.Store, k int) int64 {
	t.Helper()
	ctx := context.Background()
	seedContext(t, s, []string{"alice", "bob", "carol"}, 300)
	// The first VACUUM adds the free space and visibility maps to the
	// table's files; done here, the estimate is what a prune sees.
	if err := s.VacuumContext(ctx); err != nil {
		t.Fatal(err)
	}
	size, err := s.MeasureSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return size.LiveBytes - int64(float64(k)*size.BytesPerContextRow())
}

// TestStartWarnsOfSizeLimitBelowFloor: a limit below what pruning can
// reach is logged at error when the worker starts, with both figures, and
// the worker runs: the floor grows with facts and turns, and a refusal
// made a limit accepted at one start refuse the next, every replica's
// restart failing (a lifecycle walk). The message is one sentence naming
// the setting, the limit and the floor (memoryd prune's refusal).
func TestStartWarnsOfSizeLimitBelowFloor(t *testing.T) {
	e := setup(t)
	seedContext(t, e.store, []string{"alice"}, 10)
	size, err := e.store.MeasureSize(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	logs := new(eventstest.SyncBuffer)
	e.start(extractor.NewRules(), func(c *worker.Config) {
		c.MaxDBSize = 1000
		c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	var line struct {
		Level, Msg string
		Floor      int64 `json:"floor_bytes"`
		Limit      int64 `json:"max_db_size"`
	}
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "the size that pruning cannot go under") {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if line.Level != "ERROR" || line.Limit != 1000 || line.Floor != size.FloorBytes {
		t.Fatalf("start with a 1000-byte limit logged %+v; want an error naming limit 1000 and floor %d:\n%s", line, size.FloorBytes, logs.String())
	}
	// The worker runs: a turn is extracted.
	e.publish(events.Turn{ID: "f1", UserID: "bob", UserMessage: "I live in Porto.", AssistantResponse: "Nice."})
	e.waitDone(1)
	msg := (&worker.SizeFloorError{Limit: 1000, Floor: size.FloorBytes}).Describe("--max-db-size")
	if !strings.HasPrefix(msg, "--max-db-size 1000B is below ") || strings.Count(msg, ".") > 1 {
		t.Fatalf("message %q: want one sentence naming the flag, the limit and the floor", msg)
	}
}

// TestReplayRestoresClearedTurnText: a turn whose text was cleared after
// its retention gets it back from the stream when replayed, and is extracted
// again from it.
func TestReplayRestoresClearedTurnText(t *testing.T) {
	e := setup(t)
	e.start(extractor.NewRules(), nil)
	turn := events.Turn{ID: "r1", UserID: "alice", UserMessage: "I live in Lisbon.", AssistantResponse: "Nice city.", Metadata: []byte(`{"client":"web"}`)}
	e.publish(turn)
	e.waitDone(1)
	// The prune leaves a turn a waiting job names, and River completes a
	// job after its save commits: the turn is processed before its job ends.
	e.waitFor("the extraction job ended", func() (bool, string) {
		var n int
		err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = $1
			AND state IN ('available', 'pending', 'retryable', 'running', 'scheduled')`, worker.ExtractJobKind).Scan(&n)
		return err == nil && n == 0, fmt.Sprint(n, err)
	})
	if _, err := e.store.Pool().Exec(e.ctx, `UPDATE turns SET processed_at = now() - interval '8 days'`); err != nil {
		t.Fatal(err)
	}
	rep, err := worker.Prune(e.ctx, e.store, worker.PruneLimits{TurnRetention: 7 * 24 * time.Hour})
	if err != nil || rep.TurnTextsCleared != 1 {
		t.Fatalf("prune: %+v, %v; want one turn text cleared", rep, err)
	}
	if _, cleared := textState(t, e.store, []string{"r1"}); cleared != 1 {
		t.Fatal("turn text not cleared")
	}
	if _, _, err := e.store.ResetMemory(e.ctx, []string{"alice"}); err != nil {
		t.Fatal(err)
	}
	e.replay(worker.ReplayConfig{Users: []string{"alice"}})
	got, err := e.store.GetTurn(e.ctx, "alice", "r1")
	if err != nil || got.Status != store.StatusProcessed || got.UserMessage != turn.UserMessage || got.AssistantResponse != turn.AssistantResponse || string(got.Metadata) != `{"client": "web"}` {
		t.Fatalf("replayed turn = %+v, %v; want its text and metadata back, processed", got, err)
	}
	if kept, _ := textState(t, e.store, []string{"r1"}); kept != 1 {
		t.Fatal("replayed turn still marked cleared")
	}
	if loc, err := e.store.Fact(e.ctx, "alice", "location"); err != nil || loc.Value != "Lisbon" {
		t.Fatalf("location after replay = %+v, %v; want Lisbon, extracted from the restored text", loc, err)
	}
}

// A memory deleted and extracted again whole (what replay --reset does)
// doubles the context table's files without holding one more item: the
// dead row versions are reusable space, not memory, and a limit the memory
// fit under before must delete nothing after. The estimate scaled the
// files by live rows over the most live rows there were, and deleted about
// 40% of the items to make up for the dead ones.
func TestPruneCountsNoDeadRowsAsMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	limit, before := churnContext(t, s)
	rep, err := worker.Prune(ctx, s, worker.PruneLimits{MaxBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	checkNothingPruned(t, rep, limit, before)
}

// The same once a VACUUM (autovacuum's, between two prune runs) reclaimed
// the dead rows: the files keep their size and the statistics no longer
// count the dead rows, so the sample taken before (by the reconcile job,
// every minute) is what keeps the estimate right. The test has a database
// of its own: in the shared one, any other test's transaction older than
// the DELETE keeps the dead rows through the VACUUM, which reports them
// dead again, and nothing vacuums the table after it.
func TestPruneAfterAVacuumOfDeadRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t, storetest.Database(t))
	limit, before := churnContext(t, s)
	if err := s.SampleContextHighWater(ctx); err != nil {
		t.Fatal(err)
	}
	vacuumUntilNoDead(t, s, "context")
	rep, err := worker.Prune(ctx, s, worker.PruneLimits{MaxBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	checkNothingPruned(t, rep, limit, before)
}

// The reconcile job, which the leader runs every ReconcileInterval, takes
// the sample.
func TestReconcileSamplesTheContextHighWater(t *testing.T) {
	e := setup(t)
	churnContext(t, e.store)
	var hw int64
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT context_high_water FROM prune_state`).Scan(&hw); err != nil {
		t.Fatal(err)
	}
	e.start(extractor.NewRules(), func(c *worker.Config) { c.ReconcileInterval = time.Second })
	e.waitFor("the context high water to count the dead rows", func() (bool, string) {
		var now int64
		err := e.store.Pool().QueryRow(e.ctx, `SELECT context_high_water FROM prune_state`).Scan(&now)
		return err == nil && now >= 1800, fmt.Sprintf("high water %d (was %d), %v", now, hw, err)
	})
}

// churnContext seeds 900 items, measures them, then deletes them all and
// seeds them again, as a reset and its replay do, and waits until
// Postgres's statistics count the 900 dead rows. It returns a size limit
// the first measure fit under with 5% of the context to spare, and that
// measure.
func churnContext(t *testing.T, s *store.Store) (int64, store.SizeReport) {
	t.Helper()
	ctx := context.Background()
	noAutovacuum(t, s)
	users := []string{"alice", "bob", "carol"}
	seedContext(t, s, users, 300)
	if err := s.VacuumContext(ctx); err != nil {
		t.Fatal(err)
	}
	before, err := s.MeasureSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `DELETE FROM context`); err != nil {
		t.Fatal(err)
	}
	seedContext(t, s, users, 300)
	// The deleting connection reports its dead rows, and each seeding
	// connection its inserts, when it goes idle (Postgres flushes a
	// backend's statistics at most once a second). Waiting for the dead
	// rows alone let a sample count 600 live rows of 900 (CI, once).
	waitStat(t, s, "900 dead and 900 live context rows",
		`SELECT pg_stat_get_dead_tuples('context'::regclass) >= 900 AND pg_stat_get_live_tuples('context'::regclass) >= 900`)
	return before.LiveBytes + before.ContextBytes/20, before
}

// settleTurnStats waits until Postgres's statistics count the writes to
// the turns table (inserts and updates: done before, plus more), then
// vacuums it, and returns the writes counted. A backend sends its counts
// when idle, at most once a second, so without it the dead versions of a
// test's own writes reached the high water (MeasureSize) at one prune or
// the next, by timing; and counts sent after a VACUUM (the prune's own)
// add dead versions it had already removed. Settled, every measurement
// sees the same table.
func settleTurnStats(t *testing.T, s *store.Store, done, more int64) int64 {
	t.Helper()
	writes := done + more
	waitStat(t, s, fmt.Sprintf("%d writes to turns", writes),
		fmt.Sprintf(`SELECT pg_stat_get_tuples_inserted('turns'::regclass) + pg_stat_get_tuples_updated('turns'::regclass) >= %d`, writes))
	vacuumUntilNoDead(t, s, "turns")
	return writes
}

// noAutovacuum turns autovacuum off for every table of s's schema (and
// their TOAST tables) before a test writes the dead rows it waits for
// (waitStat) and measures. A VACUUM or ANALYZE of autovacuum's set the
// statistics' dead counts to what it found, 0, and the test's wait for
// its dead rows failed after its minute, or its measure saw reused space
// (servers with autovacuum on, as Debian's and compose.yaml's: a table is
// due after 50 dead rows and a fifth of its live ones; 8 of 8 runs of the
// churn's tests failed with autovacuum_naptime at 1 s). The DDL has a
// reused schema dropped when the test ends instead of given back
// (store/storetest/pool.go).
func noAutovacuum(t *testing.T, s *store.Store) {
	t.Helper()
	execSQL(t, s, `DO $$
	DECLARE r record;
	BEGIN
		FOR r IN SELECT oid::regclass AS rel FROM pg_class WHERE relnamespace = current_schema()::regnamespace AND relkind = 'r' LOOP
			EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = off, toast.autovacuum_enabled = off)', r.rel);
		END LOOP;
	END $$`)
}

// waitStat waits until query, over Postgres's statistics, is true, for at
// most a minute. A backend sends its counts when it idles, at most once a second and else
// up to 10 s later: the idle connections of s's pool (the test's writes,
// and a worker's on the same store) are asked to send theirs now.
func waitStat(t *testing.T, s *store.Store, what, query string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for {
		for _, c := range s.Pool().AcquireAllIdle(ctx) {
			// Best effort: it takes a superuser (or a GRANT); without
			// it the wait is only longer.
			_, _ = c.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
			c.Release()
		}
		var ok bool
		if err := s.Pool().QueryRow(ctx, query).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Postgres's statistics did not show %s within a minute", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func checkNothingPruned(t *testing.T, rep worker.PruneReport, limit int64, before store.SizeReport) {
	t.Helper()
	if rep.RemovedForSize != 0 {
		t.Fatalf("removed %d of 900 items for a limit of %d the same memory fit under (live %d before the churn; now real %d, estimated live %d, %d rows, %d dead, high water %d)",
			rep.RemovedForSize, limit, before.LiveBytes, rep.Before.RealBytes, rep.Before.LiveBytes, rep.Before.ContextRows, rep.Before.ContextDead, rep.Before.HighWater)
	}
	if rep.Before.RealBytes <= before.RealBytes+before.ContextBytes/2 {
		t.Fatalf("the files grew from %d to %d bytes only: the test's premise (the churn doubles the context files) does not hold", before.RealBytes, rep.Before.RealBytes)
	}
}

// Two prunes at once (a prune job of each of two processes: River inserts
// periodic jobs on the leader, but any process works them; or App.Prune
// beside a serve) delete the excess once: the second waits for the
// first and measures after it. Before, each measured the same excess and
// deleted all of it (a race hunt saw 1,926 of 3,000 items removed where
// 969 were over the limit, and a whole table emptied).
func TestPrunesAtOnceDeleteTheExcessOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	const k = 50
	limit := seedOverLimit(t, s, k)
	// A prune running elsewhere holds the lock while both start.
	held, release := make(chan struct{}), make(chan struct{})
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock) // before the pool closes, should the test fail
	running := make(chan error, 1)
	go func() {
		_, err := s.Exclusively(ctx, worker.PruneLock, true, func() error {
			close(held)
			<-release
			return nil
		})
		running <- err
	}()
	<-held
	type result struct {
		rep worker.PruneReport
		err error
	}
	results := make(chan result, 2)
	for range 2 {
		go func() {
			rep, err := worker.Prune(ctx, s, worker.PruneLimits{MaxBytes: limit})
			results <- result{rep, err}
		}()
	}
	// The waiters of this schema's prune lock (the key store.Exclusively
	// takes: a bigint's two halves in classid and objid).
	waitStat(t, s, "both prunes to wait for the one running", `SELECT count(*) = 2 FROM pg_locks l,
		(SELECT hashtextextended('memoryd.run.' || current_schema() || '.' || '`+worker.PruneLock+`', 0) AS k) x
		WHERE l.locktype = 'advisory' AND NOT l.granted AND l.objsubid = 1
		AND l.classid::text::bigint = (x.k >> 32) & 4294967295 AND l.objid::text::bigint = x.k & 4294967295`)
	unblock()
	if err := <-running; err != nil {
		t.Fatal(err)
	}
	var removed int64
	for range 2 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		removed += r.rep.RemovedForSize
	}
	if removed != k {
		t.Fatalf("two prunes at once removed %d items; want the excess, %d, once", removed, k)
	}
}

// Completed jobs' rows are deleted after Config.CompletedJobRetention, not
// River's 24 hours: live ingest makes about one extraction job a turn, and
// a soak at 30 turns/s gained 63,000 rows in 44 minutes.
func TestCompletedJobsAreDeletedAfterTheirRetention(t *testing.T) {
	e := setup(t)
	retain := func(c *worker.Config) { c.CompletedJobRetention = time.Second }
	stop := e.start(extractor.NewRules(), retain)
	e.publish(events.Turn{ID: "m1", UserID: "alice", UserMessage: "I live in Oslo"})
	e.waitDone(1)
	e.waitFor("the extraction job completed more than its retention ago", func() (bool, string) {
		var n int
		err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND state = 'completed' AND finalized_at < now() - interval '1 second'`, worker.ExtractJobKind).Scan(&n)
		return err == nil && n == 1, fmt.Sprint(n, err)
	})
	// River's leader cleans as it is elected, then every 30 s: a worker
	// started again (the first one's leadership released at its stop)
	// cleans at once, instead of the test waiting half a minute.
	stop()
	e.start(extractor.NewRules(), retain)
	e.waitFor("the completed extraction job deleted", func() (bool, string) {
		var n int
		err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = $1`, worker.ExtractJobKind).Scan(&n)
		return err == nil && n == 0, fmt.Sprint(n, err)
	})
}

// TestTurnRowsCountAfterTheirTextIsCleared: clearing the newest turns'
// text lets VACUUM give the end of the turns table back to the system; the
// space so returned is no longer reusable space of the table, so the turn
// rows still count in the size. Before, the text's high water stayed, and
// the rows counted for nothing: a review measured a live size of 453 KB
// where the files held 1.2 MB.
func TestTurnRowsCountAfterTheirTextIsCleared(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A database of its own: VACUUM removes no row another test's
	// transaction in the shared database may still see.
	s := storetest.Open(t, storetest.Database(t))
	noAutovacuum(t, s)
	seedContext(t, s, []string{"alice"}, 10)
	seedTurns(t, s, "mallory", "t", 60, true, 2*time.Hour)
	before, err := s.MeasureSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Only the floor: every processed turn's text goes for size.
	rep, err := worker.Prune(ctx, s, worker.PruneLimits{MaxBytes: before.FloorBytes + 1})
	if err != nil {
		t.Fatal(err)
	}
	a := rep.After
	if rep.TurnTextsClearedForSize != 60 || a.TurnTextBytes != 0 {
		t.Fatalf("report %+v: want the 60 turns' text cleared for size", rep)
	}
	if reusable := a.TurnTextHighWater - a.TurnTextBytes; reusable >= a.TurnsBytes {
		t.Fatalf("after the prune the turns table holds %d bytes, and %d count as reusable: the turn rows count for nothing (size %+v)", a.TurnsBytes, reusable, a)
	}
}

// Over the size limit, clearing turn text stops once what it cleared
// covers the excess: it cleared whole batches of 100 turns, so an excess of
// a few turns' text cost up to 99 more (tens of MB with long replies).
func TestPruneForSizeClearsWhatTheExcessNeeds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	seedContext(t, s, []string{"alice", "bob"}, 40)
	ids := seedTurns(t, s, "mallory", "old", 150, true, 2*time.Hour)
	size, err := s.MeasureSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	perTurn := size.TurnTextBytes / int64(len(ids))
	limit := size.LiveBytes - perTurn*5/2 // two turns and a half over
	if limit < size.FloorBytes {
		t.Fatalf("setup: limit %d under the floor %d", limit, size.FloorBytes)
	}
	rep, err := worker.Prune(ctx, s, worker.PruneLimits{MaxBytes: limit, TurnRetention: 7 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if rep.RemovedForSize != 0 || rep.OverLimit {
		t.Fatalf("report %+v: want no context removed and the size under the limit", rep)
	}
	if rep.TurnTextsClearedForSize < 3 || rep.TurnTextsClearedForSize > 5 {
		t.Errorf("cleared the text of %d turns (%d bytes) for an excess of %d bytes, %d a turn: want the 3 or so that cover it",
			rep.TurnTextsClearedForSize, rep.TurnTextBytesForSize, size.LiveBytes-limit, perTurn)
	}
	if _, cleared := textState(t, s, ids); int64(cleared) != rep.TurnTextsClearedForSize {
		t.Errorf("%d turns without their text, report says %d", cleared, rep.TurnTextsClearedForSize)
	}
}

// TestPruneForSizeClearsReplayedText: a replay processes old turns again
// and writes their text back; the size limit clears that text before any
// context item. It spared the turns processed in the last hour, and a
// replay's are all that: the limit deleted users' memory instead (found by
// a lifecycle walk: 61 items removed, no text cleared). Turns the stream
// stored in the last hour (a conversation under way) keep theirs.
func TestPruneForSizeClearsReplayedText(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	seedContext(t, s, []string{"alice", "bob"}, 40)
	// Received a day ago, processed again just now, as after a replay.
	replayed := seedTurns(t, s, "mallory", "replayed", 60, true, 24*time.Hour)
	if _, err := s.Pool().Exec(ctx, `UPDATE turns SET processed_at = now() WHERE event_id = ANY($1)`, replayed); err != nil {
		t.Fatal(err)
	}
	live := seedTurns(t, s, "mallory", "live", 5, true, 0)
	size, err := s.MeasureSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	limit := size.LiveBytes - size.TurnTextBytes/2
	rep, err := worker.Prune(ctx, s, worker.PruneLimits{MaxBytes: limit, TurnRetention: 7 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if rep.RemovedForSize != 0 || rep.OverLimit || rep.TurnTextsClearedForSize == 0 {
		t.Fatalf("report %+v: want replayed turns' text cleared for size, no context removed, under the limit", rep)
	}
	if kept, _ := textState(t, s, live); kept != len(live) {
		t.Errorf("turns of a conversation under way: %d of %d kept their text", kept, len(live))
	}
	for _, u := range []string{"alice", "bob"} {
		if n, err := s.CountContext(ctx, u); err != nil || n != 40 {
			t.Errorf("%s has %d context items (%v), want all 40", u, n, err)
		}
	}
}
