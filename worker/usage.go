package worker

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
)

// jobUsage is the tokens a run of a job spent on model calls and has not
// stored yet, by the turn each call was for. save stores it in the
// transaction that stores the calls' results (and then empties it);
// flushUsage stores what is left on every other way out, since tokens spent
// on a call that failed or whose results were not stored count too.
type jobUsage struct {
	model string
	clock *store.Clock // the ids' (see store.NewCallID)
	turns []store.Turn
	used  []store.TokenUsage
	ids   []store.CallID // each call's, so that it is counted once
}

// newUsage returns an empty jobUsage of model's calls.
func (w *Worker) newUsage(model string) *jobUsage {
	return &jobUsage{model: model, clock: w.cfg.Store.Clock()}
}

// add counts one model call's tokens for turn t (a burst's: its newest),
// under a new id.
func (u *jobUsage) add(t store.Turn, used extractor.Usage) {
	u.addCall(t, used, store.CallID{})
}

// addCall is add of a call whose id is id: the one it was counted under
// before (an unsaved result's), or zero for a new one.
func (u *jobUsage) addCall(t store.Turn, used extractor.Usage, id store.CallID) {
	if used.PromptTokens == 0 && used.CompletionTokens == 0 {
		return
	}
	if id.IsZero() {
		id = store.NewCallID(u.clock.Now())
	}
	u.turns = append(u.turns, t)
	u.used = append(u.used, storeUsage(used))
	u.ids = append(u.ids, id)
}

func (u *jobUsage) len() int {
	if u == nil {
		return 0
	}
	return len(u.turns)
}

func (u *jobUsage) reset() {
	if u != nil {
		u.turns, u.used, u.ids = u.turns[:0], u.used[:0], u.ids[:0]
	}
}

// addUsage adds the calls' tokens (from keepRemembered) in q's
// transaction, each call's once.
func addUsage(ctx context.Context, q *store.Store, model string, day time.Time, calls []store.UsageCall) error {
	return q.AddCallUsageOn(ctx, day, model, calls)
}

// flushUsage stores what usage still holds, each call's tokens on their own
// (store.AddTurnUsage: unless a forget covers the turn), also when ctx is
// done (the tokens were spent), bounded, with the calls earlier flushes
// left to this process's usage backlog. Losing a count is better than
// failing the job over it. The calls it meets the database out of reach
// for go to the backlog, for the next flush (usageBacklog), and so do a
// user's whose lock stays held past the bound (a forget); after another
// error the user's other calls are dropped (they would wait and fail
// alike), and another user's are still stored: in a legacy job holding
// several users' turns, one user's lock wait (a forget) lost the others'
// counts. It returns the turns of usage whose calls' tokens it dropped,
// with the calls' ids. Each call is stored under its id: a call whose
// tokens a save's transaction stored though it seemed to fail (its
// COMMIT's connection lost, store.ErrCommitUnconfirmed) adds nothing
// again.
func (e *extractWorker) flushUsage(ctx context.Context, usage *jobUsage) (unstored map[store.TurnKey]store.CallID) {
	calls := make([]usageCall, len(usage.turns))
	day := e.w.spendDay()
	for i, t := range usage.turns {
		calls[i] = usageCall{turn: t.Key(), at: t.Placed, model: usage.model, day: day, used: usage.used[i], id: usage.ids[i]}
	}
	usage.reset()
	return e.w.addCalls(ctx, calls, false)
}

// usageCall is one model call's tokens, kept until stored: the turn it was
// for (a burst's newest), where that turn is in the stream (for the
// tombstones), the model and spend day it counts on, and its id (stored
// with it, so that it counts once).
type usageCall struct {
	turn  store.TurnKey
	at    store.StreamPosition
	model string
	day   time.Time
	used  store.TokenUsage
	id    store.CallID
}

// usageBacklog holds the calls whose tokens a flush could not store
// because the database was out of reach, for the next flush in this
// process (every extraction run ends with one, and Stop makes a last):
// users are billed by them, and a Postgres outage of a second lost the
// tokens of every call in flight whose results were not stored with them
// (a failed call, a burst's request before its split). The oldest go past
// maxUsageBacklog, and those made maxUsageAge ago (their ids may be
// deleted, and a call stored before would count again); a process that
// stops before the database answers again loses them.
type usageBacklog struct {
	mu    sync.Mutex
	calls []usageCall
}

// maxUsageBacklog bounds the calls a backlog holds: those in flight when
// the database went out (up to --job-size a running job), a few hundred
// bytes each; a process kept from storing them this long drops the
// oldest.
const maxUsageBacklog = 50_000

// maxUsageDrain bounds the backlog's calls one flush stores, the oldest
// first (each its own transaction, some 2 ms here: 50,000 took about
// 100 s): the rest wait for the next flush, so that the job whose flush
// meets the database back is not held for minutes by other jobs' calls.
const maxUsageDrain = 500

// maxUsageAge bounds how long the backlog keeps a call, from when its id
// was made: less than store.UsageCallsKept, so that a call is never
// stored after its id may be deleted (the id of a call a transaction
// stored though its connection was lost under the COMMIT says so).
const maxUsageAge = store.UsageCallsKept - time.Hour

// take removes and returns the backlog's oldest calls, at most n, but for
// those whose id was made before oldest, which it drops and counts
// (stale). A call without an id has no age.
func (b *usageBacklog) take(n int, oldest time.Time) (calls []usageCall, stale int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n = min(n, len(b.calls))
	calls = make([]usageCall, 0, n)
	for _, c := range b.calls[:n] {
		if !c.id.IsZero() && c.id.Time().Before(oldest) {
			stale++
			continue
		}
		calls = append(calls, c)
	}
	b.calls = slices.Delete(b.calls, 0, n)
	if len(b.calls) == 0 {
		b.calls = nil
	}
	return calls, stale
}

// len returns how many calls the backlog holds.
func (b *usageBacklog) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.calls)
}

// drainUsage stores the backlog's calls, maxUsageDrain a flush, until it
// is empty, a flush stores none (the database still out of reach) or ctx
// is done; it returns how many calls are left unrecorded.
func (w *Worker) drainUsage(ctx context.Context) (left int) {
	for {
		before := w.usageBacklog.len()
		if before == 0 || ctx.Err() != nil {
			return before
		}
		w.addCalls(ctx, nil, true)
		if w.usageBacklog.len() >= before {
			return w.usageBacklog.len()
		}
	}
}

// put adds calls, dropping the oldest past the bound; it returns how many
// it dropped.
func (b *usageBacklog) put(calls []usageCall) (dropped int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, calls...)
	if dropped = len(b.calls) - maxUsageBacklog; dropped > 0 {
		b.calls = slices.Delete(b.calls, 0, dropped)
		return dropped
	}
	return 0
}

// addCalls stores the backlog's oldest calls (at most maxUsageDrain),
// then calls, as flushUsage says, and returns the turns of calls whose
// tokens it dropped. The backlog's calls of a user whose lock a forget
// holds now stay in it without a wait, unless wait (the stop's drain): a
// flush kept them after waiting for that lock, and every other job's end
// waited for it again (up to afterCancelTimeout) while it stayed held.
func (w *Worker) addCalls(ctx context.Context, calls []usageCall, wait bool) (unstored map[store.TurnKey]store.CallID) {
	type loss struct {
		calls int
		err   error
	}
	kept, stale := w.usageBacklog.take(maxUsageDrain, w.cfg.Store.Clock().Now().Add(-maxUsageAge))
	if stale > 0 {
		w.logger.Error("token usage kept too long for the database: the calls' tokens dropped unrecorded", "calls", stale, "max_age", maxUsageAge.String())
	}
	own := len(kept) // calls[i] is all[own+i]
	all := append(kept, calls...)
	var lost map[string]*loss // by user, in the order met
	var users []string
	drop := func(i int, err error) {
		if i >= own {
			if unstored == nil {
				unstored = make(map[store.TurnKey]store.CallID)
			}
			unstored[all[i].turn] = all[i].id
		}
		user := all[i].turn.UserID
		if l, ok := lost[user]; ok {
			l.calls++
			return
		}
		if lost == nil {
			lost = make(map[string]*loss)
		}
		lost[user] = &loss{calls: 1, err: err}
		users = append(users, user)
	}
	var forgotten []store.UsageCall
	defer func() { w.logForgottenUsage(forgotten) }()
	// later: the calls of users whose lock stayed held past the bound (a
	// forget, or one waiting behind a long transaction), for the next
	// flush; one wait a user a flush. quiet: those of them the backlog held
	// already, found held without a wait, said when first kept.
	var later []usageCall
	quiet := 0
	waiting := map[string]bool{}
	// hold keeps all[i] for later; a call of this flush also goes with its
	// result if the job keeps one for its next run (unstored), whose save
	// then counts it as soon as the lock is free, not at a later job's end
	// or the stop (TestLockWaitKeepsTheExtraction). Its id makes whichever
	// stores it second add nothing.
	hold := func(i int) {
		later = append(later, all[i])
		if i >= own {
			if unstored == nil {
				unstored = make(map[store.TurnKey]store.CallID)
			}
			unstored[all[i].turn] = all[i].id
		}
	}
	defer func() {
		if len(later) == 0 {
			return
		}
		// Kept before said: a test's next job may flush once it is said.
		dropped := w.usageBacklog.put(later)
		if len(later) > quiet {
			w.logger.Warn("cannot record token usage now: the user's lock is held (a forget); kept for the next try", "users", len(waiting), "calls", len(later)-quiet)
		}
		if dropped > 0 {
			w.logger.Error("token usage backlog full: the oldest calls' tokens dropped unrecorded", "calls", dropped, "max_calls", maxUsageBacklog)
		}
	}()
	for i, c := range all {
		if waiting[c.turn.UserID] {
			hold(i)
			if i < own && !wait {
				quiet++
			}
			continue
		}
		if _, ok := lost[c.turn.UserID]; ok {
			drop(i, nil)
			continue
		}
		// Bounded: a wait behind a forget or a dead connection must not
		// hold the job past its timeout or its process's lease.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), afterCancelTimeout)
		var (
			added, busy bool
			err         error
		)
		if i < own && !wait {
			added, busy, err = w.cfg.Store.TryAddTurnUsage(uctx, events.UserToken(c.turn.UserID), c.at, c.turn.UserID, c.model, c.day, c.used, c.id)
		} else {
			added, err = w.cfg.Store.AddTurnUsage(uctx, events.UserToken(c.turn.UserID), c.at, c.turn.UserID, c.model, c.day, c.used, c.id)
		}
		cancel()
		if busy {
			waiting[c.turn.UserID] = true
			hold(i)
			quiet++
			continue
		}
		if err == nil {
			if !added {
				forgotten = append(forgotten, store.UsageCall{ID: c.id, Used: c.used, Forgotten: true})
			}
			continue
		}
		if dbUnreachable(err) {
			// Once a flush, for the calls left: the next would wait and
			// fail alike (a walk logged a line a turn, 338 in 30 s,
			// each waiting up to afterCancelTimeout).
			dropped := w.usageBacklog.put(all[i:])
			w.logger.Warn("cannot record token usage now; kept for the next try", "user_id", c.turn.UserID, "calls", len(all)-i, "error", err)
			if dropped > 0 {
				w.logger.Error("token usage backlog full: the oldest calls' tokens dropped unrecorded", "calls", dropped, "max_calls", maxUsageBacklog)
			}
			break
		}
		if errors.Is(err, context.DeadlineExceeded) || store.IsLockWait(err) {
			// Before, dropped: the calls counted nowhere, though the
			// lock is passing (the forget's tombstone then sends their
			// tokens to everyone's count alone).
			waiting[c.turn.UserID] = true
			hold(i)
			continue
		}
		drop(i, err)
	}
	for _, user := range users {
		w.logger.Warn("cannot record token usage", "user_id", user, "calls", lost[user].calls, "error", lost[user].err)
	}
	return unstored
}

// logForgottenUsage tells, at info, of the calls stored (calls, those of
// them Forgotten) whose turns a forget covered: their tokens count in
// everyone's count alone, none in the user's, whose own spend started
// again. Only the numbers: the user is forgotten.
func (w *Worker) logForgottenUsage(calls []store.UsageCall) {
	var n int
	var tokens int64
	for _, c := range calls {
		if c.Forgotten {
			n++
			tokens += c.Used.PromptTokens + c.Used.CompletionTokens
		}
	}
	if n > 0 {
		w.logger.Info("model calls on turns of a forgotten user: their tokens left out of the user's count, kept in everyone's", "calls", n, "tokens", tokens)
	}
}
