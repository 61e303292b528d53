package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/memoryd/memoryd/store"
)

// Jobs snoozed for a model server that is down wait up to a minute each
// (maxModelWait), so that thousands of them do not ask it over and over;
// the server's first answer wakes them all (wakeWaiters), in Postgres,
// telling River's producers as an insert does, so that every process's
// waiting jobs run at once. Before, they ran as their snoozes ended, up
// to a minute after the server was back, and a job whose snooze ended in
// the seconds before this process's probe was answered was held back for
// up to a minute more (about one in twelve after a long outage).
//
// A job woken by one process may be fetched by another whose own probe
// is still to come: it holds the job back, and the job waits for that
// probe, uncounted (outcome, metaWoken), not a whole snooze, at most
// maxWokenHolds times. A job is woken at most maxWakes times: one that
// the server fails while answering others would otherwise run at every
// wake.

// Jobs snoozed for an embeddings server that is down (embed and chunk
// embed jobs: outcome) are woken alike, when it answers an embed job of
// any process (embedAnswered) or a query its enricher embedded
// (EmbeddingsAnswered), with a modelWaiters of their own
// (Worker.embedWaits): the model server and the embeddings server may be
// different hosts, and one answering says nothing of the other. Before,
// embed jobs spent attempts while the embeddings server was down, and
// waited out River's backoff once it was back (up to 10 minutes).

// modelWaiters tracks whether jobs this process snoozed for a server (the
// model server's, or the embeddings server's) may still be waiting:
// safe for concurrent use.
type modelWaiters struct {
	// jobs are the kinds of job waiting for the server, which a wake
	// wakes, and server and kind name them in the log; set by New.
	jobs         []store.RiverJobs
	server, kind string
	// since is when a job was last snoozed for the server (unix
	// nanoseconds), 0 when none has been since the wake that followed.
	since atomic.Int64
	// woke is when the last wake began (unix nanoseconds).
	woke atomic.Int64
	// answered is when the server last answered (unix nanoseconds).
	answered atomic.Int64
	// pending is set while a wake is due (wakeSoon).
	pending atomic.Bool
	// looked is when this process last woke the waiters without having
	// snoozed a job itself (unix nanoseconds): see wakeSoon.
	looked atomic.Int64

	// down, when set, reports whether the server counts as down again
	// since its last answer (extractor.LLM.Down, embedding.Client.LastDown):
	// set by New.
	down func() bool
	// refuses, when set, reports whether the server's address refuses
	// connections now (extractor.LLM.RefusesConnections,
	// embedding.Client.RefusesConnections): set by New.
	refuses func(context.Context) bool
}

const (
	// wakeEvery bounds how often a process wakes the waiters.
	wakeEvery = time.Second
	// wakeLinger is how long after the server's last answer, and after
	// the last snooze for it, wakes go on, every wakeEvery: River stores
	// a snooze after the run that decided it returns (its completer
	// batches them), so a job held back just before the server's answer
	// may be stored snoozed after the wake that answer began.
	wakeLinger = 5 * time.Second
	// wakeLookEvery bounds how often a process that snoozed no job for
	// the server wakes the others' waiters when it answers (wakeSoon).
	wakeLookEvery = 5 * time.Second
	// wakeTimeout bounds one wake's UPDATE (a few milliseconds per
	// thousand jobs waiting).
	wakeTimeout = 30 * time.Second
)

// waiting notes that a job is being snoozed for m's server now.
func (m *modelWaiters) waiting() { m.since.Store(time.Now().UnixNano()) }

// modelWaiting notes that a job is being snoozed for the model server now.
func (w *Worker) modelWaiting() {
	w.modelWaits.waiting()
	w.modelFailing()
}

// modelFailing notes that extraction found the model server failing (a
// job waits for it, or spends an attempt past --llm-max-outage): its next
// answer is logged (modelAnswered).
func (w *Worker) modelFailing() { w.modelDownSince.CompareAndSwap(0, time.Now().UnixNano()) }

// msgModelAnswersAgain is logged at the model server's first answer after
// extraction found it failing: the end of what msgModelUnreachable (or
// msgModelRefuses) warned of. Before, a wait shorter than the extractor's
// own outageTold (30 s) was warned of and its end logged at debug only: at
// the default level the log said the server was down and never that it
// came back (a walk).
const msgModelAnswersAgain = "model server answers again; extraction resumes"

// modelToldEvery bounds how often msgModelAnswersAgain goes out at info
// (the later ones within it at debug): a server failing for a moment every
// few seconds (a gateway under load) has its waits' warnings held back to
// one every 30 s (OutageRepeats), and its ends alike.
const modelToldEvery = 30 * time.Second

// modelAnswered is called when the model server answered an extraction:
// it ends the refusal outage, and wakes the jobs waiting for the server
// (wakeSoon), apart from the job, whose save does not wait for it, and a
// job waiting for modelAloneLock whose wake was held back for this answer
// (aloneReleased), unless a run of this process holds the lock (the
// answer may be its own): woken then, the waiter found the lock taken
// and counted a hold, its snooze doubled (a walk: 17 of 53 wakes), and
// that run wakes one as it lets the lock go.
func (w *Worker) modelAnswered() {
	if since := w.modelDownSince.Swap(0); since != 0 {
		now := time.Now()
		level := slog.LevelInfo
		if told := w.modelToldAt.Load(); told != 0 && now.UnixNano()-told < int64(modelToldEvery) {
			level = slog.LevelDebug
		} else {
			w.modelToldAt.Store(now.UnixNano())
		}
		// No text of a turn: how long, as this process saw it.
		w.logger.Log(context.Background(), level, msgModelAnswersAgain, "down_for", now.Sub(time.Unix(0, since)).Round(time.Millisecond).String())
	}
	if w.aloneHolding.Load() == 0 && w.aloneWakeDue.CompareAndSwap(true, false) {
		w.wakeAloneWaiter(context.Background())
	}
	w.modelRefusing.end()
	w.modelWaits.answered.Store(time.Now().UnixNano())
	w.wakeSoon(&w.modelWaits, 0)
}

// embedAnswered is called when the embeddings server answered an embed
// job's request with vectors: it wakes the embed and chunk embed jobs
// waiting for the server (wakeSoon), every process's.
func (w *Worker) embedAnswered() {
	w.embedRefusing.end()
	w.embedWaits.answered.Store(time.Now().UnixNano())
	w.wakeSoon(&w.embedWaits, 0)
}

// EmbeddingsAnswered tells the worker that the embeddings server answered
// a request of this process other than an embed job's (a query the
// enricher embedded): the embed jobs waiting for it are woken as an embed
// job's answer wakes them. For a process whose embed jobs all wait, which
// sends the server no request of theirs until a snooze ends.
func (w *Worker) EmbeddingsAnswered() {
	if w.cfg.Embedder != nil {
		w.embedAnswered()
	}
}

// wakeSoon runs wakeWaiters for m after d, on a timer of its own, when
// jobs may be waiting and no wake is due already. A wake due when Stop
// begins does nothing.
//
// Jobs may be waiting that this process did not snooze: another
// process's, which sends the server no request while all its jobs wait
// (its probe is a job's request), and so learns that the server is back
// only when a snooze ends, up to a minute later, unless a process the
// server answers wakes them. So a process that snoozed none wakes them
// too, at most once every wakeLookEvery (an UPDATE that finds no job
// to wake writes nothing). Before, only a process that had snoozed a job
// woke: with two serves, one whose requests never failed answered the
// first turn after an outage and woke nothing, and the other's jobs
// waited their snoozes out (a review: about one run in ten of
// TestModelAnswerWakesItsWaiters with two processes).
func (w *Worker) wakeSoon(m *modelWaiters, d time.Duration) {
	if m.since.Load() == 0 {
		now, last := time.Now().UnixNano(), m.looked.Load()
		if now-last < int64(wakeLookEvery) || !m.looked.CompareAndSwap(last, now) {
			return
		}
		// As if its last snooze were past wakeLinger: one wake, none
		// after (those are for snoozes of its own River has yet to
		// store).
		m.since.CompareAndSwap(0, now-int64(wakeLinger)-1)
	}
	if !m.pending.CompareAndSwap(false, true) {
		return
	}
	w.mu.Lock()
	halt := w.halt
	w.mu.Unlock()
	time.AfterFunc(d, func() {
		m.pending.Store(false)
		w.mu.Lock()
		select {
		case <-halt:
			w.mu.Unlock()
			return
		default:
		}
		w.wakes.Add(1) // under mu, halt open: Stop's Wait follows it
		w.mu.Unlock()
		defer w.wakes.Done()
		ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout)
		defer cancel()
		go func() { // ends with the wake (cancel, deferred)
			select {
			case <-halt:
				cancel()
			case <-ctx.Done():
			}
		}()
		w.wakeWaiters(ctx, m)
	})
}

// wakeWaiters makes m's jobs snoozed for its server (metaSnoozedFor:
// extraction jobs for the model server, embed jobs for the embeddings
// server) run now, every process's, when this process snoozed
// one since its last wake or within wakeLinger of now; at most once every
// wakeEvery, and again wakeEvery later while the server's last answer is
// within wakeLinger (never in an outage that goes on: each wake would
// bring every waiting job back to be held back and counted), and none
// while the server counts as down or refuses connections (gone): that
// wake waits for this process's next answer. A job held by another
// transaction is left to its snooze. A failure is logged and left to the
// next answer.
func (w *Worker) wakeWaiters(ctx context.Context, m *modelWaiters) {
	since := m.since.Load()
	if since == 0 {
		return
	}
	if time.Now().UnixNano()-m.woke.Load() < int64(wakeEvery) {
		// Woken within wakeEvery: this wake would not run, so no dial
		// (gone) for it. An answer while wakes linger asks for one each.
		return
	}
	if m.gone(ctx) {
		// The server counts as down again, which its last answer ended (one
		// that answered a request and went down with the next, a crashing
		// turn's, counts down from the cut, extractor.Error.Crashed, not only
		// once a later request is refused, which this process may not send
		// before its wakes), or refuses connections (a crash that cut only
		// another serve's requests: this one counts it up). A wake would bring
		// the waiting jobs back into that outage, each refused and snoozed
		// again, the wake counted toward their maxWakes, and log that the
		// server answers: before, the wakes that follow an answer (wakeLinger)
		// went on into a crash (a walk: 3 wakes of 44 jobs), and with several
		// serves, one whose requests the crash did not cut still woke them
		// (TestWakeOfAnotherServeWaitsForACrashedModelServer). The wake waits
		// for this process's next answer: since is left set and none re-armed;
		// an answer during the dial arms its own (pending is clear). The
		// embeddings server's alike.
		w.logger.Debug(m.server + " down or refusing connections; the " + m.kind + " jobs waiting for it wait for its next answer")
		return
	}
	now := time.Now()
	last := m.woke.Load()
	if now.UnixNano()-last < int64(wakeEvery) || !m.woke.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	var n int64
	for _, jobs := range m.jobs {
		woken, err := w.cfg.Store.WakeWaiting(ctx, jobs, store.Wake{SnoozedKey: metaSnoozedFor, Reason: outcomeModelDown,
			WokenKey: metaWoken, WaitKey: metaModelWaitMillis, UnwaitedKey: metaModelUnwaitedMillis, CountKey: metaWakes, MaxWakes: maxWakes,
			CountedAtKey: metaWakeCountedAt, CountEvery: wakeCountEvery})
		if errors.Is(err, context.Canceled) {
			return // Stop began: the snoozes stand
		}
		if err != nil {
			w.logger.Warn("cannot wake the "+m.kind+" jobs waiting for the "+m.server+"; they run when their snoozes end", "error", err)
			return
		}
		n += woken
	}
	if n > 0 {
		w.logger.Info(m.server+" answering; "+m.kind+" jobs waiting for it run now", "jobs", n)
	}
	if now.Sub(time.Unix(0, since)) > wakeLinger {
		// Every snooze decided until then is stored: woken, or not for
		// the model. A new one sets since again.
		m.since.CompareAndSwap(since, 0)
		return
	}
	if now.Sub(time.Unix(0, m.answered.Load())) <= wakeLinger {
		// A snooze decided just before the answer may not be stored yet.
		w.wakeSoon(m, wakeEvery)
	}
}

// aloneWakeTimeout bounds the wake of a job waiting for modelAloneLock
// (one row's UPDATE).
const aloneWakeTimeout = 5 * time.Second

// aloneReleased is called by a job that held modelAloneLock once it has
// let it go: it wakes the job that has waited longest for it
// (wakeAloneWaiter), unless the model server counts as down (the job's
// request brought it down, a poison turn's second crash, or met it down).
// Woken then, the waiter met the server down too, was snoozed as a job
// the server went down with (which nothing wakes: snoozedAfterCrash) and
// woke the next, which did the same, until every waiter waited out a
// snooze of its own (a review). The wake waits for this serve's next
// answer from the server (modelAnswered); the waiters' own snoozes, up to
// maxAloneWait, bring them back meanwhile. The wake is due before the
// look at the server, so that an answer arriving during its dial wakes
// the waiter (before, it was missed until the next answer); whichever of
// the two takes the due wake does it, once.
func (w *Worker) aloneReleased(ctx context.Context) {
	w.aloneWakeDue.Store(true)
	if w.modelWaits.gone(ctx) {
		return
	}
	if w.aloneWakeDue.CompareAndSwap(true, false) {
		w.wakeAloneWaiter(ctx)
	}
}

// connectionRefuser is an extractor or embedder that can tell whether its
// server refuses connections now (extractor.LLM, embedding.Client).
type connectionRefuser interface {
	RefusesConnections(ctx context.Context) bool
}

// goneTimeout bounds gone's look at the server's address.
const goneTimeout = 5 * time.Second

// gone reports whether m's server counts as down (down) or refuses connections
// now (refuses): a crash counts the server down only in the process whose
// request it cut (extractor.Error.Crashed), and a server may go down with no
// request of this process in flight, so the address is tried too (one dial, a
// millisecond or so; bounded by goneTimeout, not by ctx, which may be a job's
// ending). Asked before every wake of the jobs waiting for the server
// (wakeWaiters) and of one waiting for modelAloneLock (aloneReleased).
func (m *modelWaiters) gone(ctx context.Context) bool {
	if m.down != nil && m.down() {
		return true
	}
	if m.refuses == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), goneTimeout)
	defer cancel()
	return m.refuses(ctx)
}

// wakeAloneWaiter makes the extraction job that has waited longest for
// modelAloneLock (snoozedForAlone: held back unsent, every serve's) run
// now: called by the job that held the lock, once it has let it go.
// Before, the lock sat idle while the waiters' snoozes (up to
// maxAloneWait) ran out: the turns a crash cut were done 14-32 s after
// they came in a walk where each held the lock 0.3 s. One is woken, not
// all: the others would find the lock taken again and count a hold each.
// A waiter whose snooze River has yet to store, or whose holder died,
// waits its snooze out, as before. A failure is logged and left to the
// snoozes.
func (w *Worker) wakeAloneWaiter(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), aloneWakeTimeout)
	defer cancel()
	id, err := w.cfg.Store.WakeFirstWaiting(ctx, extractJobs, metaSnoozedFor, snoozedForAlone, metaAloneHolds)
	if err != nil {
		w.logger.Warn("cannot wake the extraction waiting to send its request alone; it runs when its snooze ends", "error", err)
		return
	}
	if id != 0 {
		w.logger.Debug("extraction waiting to send its request alone woken", "job_id", id)
	}
}
