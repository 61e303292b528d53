package worker

// Recovery of the jobs of a process that died.
//
// River marks a job running with the id of the client that took it
// (river_job.attempted_by) and, when that process dies, leaves the job
// running until its rescuer finds it older than RescueStuckJobsAfter (here
// 2 × JobTimeout, 20 minutes by default). memoryd does not wait for that:
//
//   - Every worker process registers its River client id in
//     memoryd_processes before River starts, and renews the row's heartbeat
//     every HeartbeatInterval.
//   - On the same tick every process looks for rows whose heartbeat is older
//     than ProcessTimeout (Postgres's clock decides), deletes them, ends the
//     running jobs of those processes and inserts a new extraction job for
//     each extraction job and embed job, with the attempts it has left (a
//     periodic maintenance job just runs again in its next period), in one
//     transaction
//     (store.TakeOverJobs). Any live process does this, not only River's
//     leader: after a crash of the leader, River elects a new one only when
//     the dead leader's lease has run out, and the takeover needs no single
//     owner (two processes serialise on the rows; the second finds nothing).
//   - A process never works a job another process may have taken over: it
//     holds a lease that lasts as long as its last successful heartbeat plus
//     fenceAfter (two thirds of ProcessTimeout, by its own clock, counted
//     from before the heartbeat was sent). When the lease lapses (it cannot
//     reach Postgres, or it learns its row was deleted) the contexts of its
//     running extraction jobs are cancelled and they hand themselves back;
//     a job that starts while the lease has lapsed hands itself back at
//     once. The remaining third of ProcessTimeout is the time a cancelled
//     job has to return before another process can take it over. So one
//     job's turns are never extracted by two processes at the same time,
//     unless a job ignores its context for that long or the two clocks run
//     at rates that differ by a third.
//   - A job on its last attempt when its process died is not run again: its
//     turns are marked failed (listed by `memoryd failed`, re-run by
//     retry-failed), so that a turn that kills its process cannot do so
//     forever.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/memoryd/memoryd/store"
)

// errLeaseLapsed and errDeclaredDead are why a process's running jobs were
// cancelled (the cause of their contexts).
var (
	errLeaseLapsed  = errors.New("worker: process lease lapsed (no heartbeat reached Postgres in time); jobs handed back")
	errDeclaredDead = errors.New("worker: another process declared this one dead and took its jobs over")
)

// liveness is a process's row in memoryd_processes and the lease it gives.
type liveness struct {
	w          *Worker
	id         string
	fenceAfter time.Duration

	mu         sync.Mutex
	lease      context.Context // done once the lease lapsed
	cancel     context.CancelCauseFunc
	validUntil time.Time
	timer      *time.Timer
	// clockWarned is when checkClock last warned of this host's clock,
	// zero while it agrees with Postgres's.
	clockWarned time.Time
	// jumpWarned is when the jump of Postgres's clock holdTakeovers last
	// warned of was seen.
	jumpWarned time.Time

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// startLiveness registers the process (under its River client id) and starts
// the heartbeat loop. Call it before River starts fetching jobs.
func (w *Worker) startLiveness(ctx context.Context) error {
	l := &liveness{w: w, id: w.river.ID(), fenceAfter: w.cfg.ProcessTimeout * 2 / 3,
		stop: make(chan struct{}), done: make(chan struct{})}
	sent := time.Now()
	if err := w.cfg.Store.RegisterProcess(ctx, l.id, w.processRecord()); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	l.lease, l.cancel = context.WithCancelCause(context.Background())
	l.timer = time.AfterFunc(time.Hour, l.check)
	l.renewed(sent)
	w.live = l
	go l.loop()
	return nil
}

// stopLiveness stops the heartbeat once River has stopped (no job of this
// process runs any more), marks the process dead and takes over whatever it
// left running (nothing, unless River could not record a job's end).
// Past ctx's deadline it only marks the process dead, in at most
// endProcessLate: the takeover can wait on the turns table, and any
// other process's next heartbeat (or the next start) does it, since the
// record is marked dead.
func (w *Worker) stopLiveness(ctx context.Context) {
	l := w.live
	if l == nil || !w.abandonLiveness() {
		return
	}
	late := ctx.Err() != nil
	budget := 5 * time.Second
	if late {
		budget = endProcessLate
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
	defer cancel()
	if err := w.cfg.Store.EndProcess(ctx, l.id); err != nil {
		w.logger.Warn("cannot mark this process stopped; others will after the process timeout", "process", l.id, "error", err)
		return
	}
	if late {
		return
	}
	if _, _, jumped := w.cfg.Store.Clock().JumpedWithin(w.cfg.ProcessTimeout); jumped {
		return // see holdTakeovers
	}
	if err := w.takeOver(ctx); err != nil {
		w.logger.Warn("take over jobs of dead processes", "error", err)
	}
}

// endProcessLate bounds the write that marks a process dead when Stop is
// already past its deadline (one row of memoryd_processes, which nothing
// else locks for long).
const endProcessLate = time.Second

// abandonLiveness stops the heartbeat (once; it reports whether this call
// did) without ending the process's record: the record then expires after
// ProcessTimeout and others take over what it still names.
func (w *Worker) abandonLiveness() bool {
	l := w.live
	if l == nil {
		return false
	}
	stopped := false
	l.stopOnce.Do(func() {
		close(l.stop)
		<-l.done
		l.timer.Stop()
		stopped = true
	})
	return stopped
}

func (l *liveness) loop() {
	defer close(l.done)
	tick := time.NewTicker(l.w.cfg.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		l.beat()
	}
}

// beat renews the lease and takes over the jobs of dead processes.
func (l *liveness) beat() {
	w := l.w
	// Results kept for runs that never came (the job ran elsewhere,
	// ended, or its user was forgotten) go within a beat of their TTL,
	// also in a process that keeps no more.
	w.unsaved.sweep(time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), l.fenceAfter)
	defer cancel()
	sent := time.Now()
	alive, err := w.cfg.Store.Heartbeat(ctx, l.id)
	hold := false
	if err == nil {
		// The heartbeat read Postgres's clock into the store's Clock.
		if offset, uncertainty, ok := w.cfg.Store.Clock().Offset(); ok {
			l.checkClock(time.Now(), offset, uncertainty)
		}
		hold = l.holdTakeovers()
	}
	switch {
	case err != nil:
		w.logger.Debug("heartbeat", "process", l.id, "error", err)
		return // the lease lapses on its own if this goes on
	case !alive:
		// Declared dead while alive (it could not reach Postgres for
		// ProcessTimeout): its jobs were handed on, so stop them now, then
		// come back as a live process.
		l.lapse(errDeclaredDead)
		sent = time.Now()
		if err := w.cfg.Store.RegisterProcess(ctx, l.id, w.processRecord()); err != nil {
			w.logger.Debug("register process", "process", l.id, "error", err)
			return
		}
	}
	l.renewed(sent)
	if hold {
		return
	}
	if err := w.takeOver(ctx); err != nil {
		w.logger.Warn("take over jobs of dead processes", "error", err)
	}
	if err := w.takeOverLost(ctx, l.id); err != nil {
		w.logger.Warn("take over jobs whose fetch was lost", "error", err)
	}
}

// maxClockOffset is how far this host's clock may be from Postgres's
// before the heartbeat warns (beyond the round trip's uncertainty).
const maxClockOffset = 2 * time.Second

// clockWarnEvery is how often a clock that stays off is warned of again.
const clockWarnEvery = 10 * time.Minute

// checkClock warns, at now, when this host's clock is ahead of Postgres's
// by offset (behind when negative; store.Clock.Offset) and that is more
// than maxClockOffset beyond the reading's uncertainty, at once and then every clockWarnEvery while it stays
// off, and says so once it is back. memoryd's jobs follow Postgres's
// clock (store.Clock), so the offset no longer delays them; which of the
// two is off cannot be told from here, and either matters: Postgres's
// dates facts.set against turns stamped by the frontends, this host's its
// logs and turns stamped here (docs/operations.md, "Clocks").
func (l *liveness) checkClock(now time.Time, offset, uncertainty time.Duration) {
	off := max(offset, -offset) > maxClockOffset+uncertainty
	l.mu.Lock()
	warn := off && (l.clockWarned.IsZero() || now.Sub(l.clockWarned) >= clockWarnEvery)
	back := !off && !l.clockWarned.IsZero()
	switch {
	case warn:
		l.clockWarned = now
	case back:
		l.clockWarned = time.Time{}
	}
	l.mu.Unlock()
	switch {
	case warn:
		l.w.logger.Warn("this host's clock and Postgres's differ: memoryd schedules by Postgres's and judges turns, stamped by their frontends, against it; one of them is off: synchronise the clocks (NTP)",
			"offset", offset.Round(time.Millisecond).String(), "max_offset", maxClockOffset.String())
	case back:
		l.w.logger.Info("this host's clock agrees with Postgres's again", "offset", offset.Round(time.Millisecond).String())
	}
}

// holdTakeovers reports whether this process should take over no jobs
// now, its own lost ones included: Postgres's clock jumped forward within
// the last ProcessTimeout (store.Clock.JumpedWithin: an NTP step, an
// operator setting it, or this host suspended), and warns once a jump.
// Liveness is judged by Postgres's clock, so a step past the lease made
// every live process's heartbeat look old at once: a walk saw a live
// serve declared dead and its running jobs taken over (a job on its last
// attempt would have failed). By the end of the hold every live process
// has renewed its heartbeat on the new time; a process that died is taken
// over that much later. A step after the last reading is caught by
// store.TakeOverJobs itself.
func (l *liveness) holdTakeovers() bool {
	by, at, ok := l.w.cfg.Store.Clock().JumpedWithin(l.w.cfg.ProcessTimeout)
	if !ok {
		return false
	}
	l.mu.Lock()
	warn := !at.Equal(l.jumpWarned)
	l.jumpWarned = at
	l.mu.Unlock()
	if warn {
		l.w.logger.Warn("Postgres's clock moved ahead of this host's monotonic clock (Postgres's clock stepped, or this host was suspended); taking over no jobs until every live process has renewed its heartbeat",
			"jump", by.Round(time.Millisecond).String(), "hold", l.w.cfg.ProcessTimeout.String())
	}
	return true
}

// renewed extends the lease to fenceAfter past sent, the time the renewal
// that succeeded was sent; a lapsed lease is replaced by a new one.
func (l *liveness) renewed(sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lease.Err() != nil {
		l.lease, l.cancel = context.WithCancelCause(context.Background())
		l.w.logger.Info("process lease renewed; taking jobs again", "process", l.id)
	}
	l.validUntil = sent.Add(l.fenceAfter)
	l.timer.Reset(time.Until(l.validUntil))
}

// check lapses the lease when it has not been renewed in time.
func (l *liveness) check() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !time.Now().Before(l.validUntil) {
		l.lapseLocked(errLeaseLapsed)
	}
}

// lapse cancels the lease, and with it the contexts of the running jobs.
func (l *liveness) lapse(cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lapseLocked(cause)
}

func (l *liveness) lapseLocked(cause error) {
	if l.lease.Err() == nil {
		l.w.logger.Warn("process lease lost; handing running jobs back", "process", l.id, "reason", cause.Error())
		l.cancel(cause)
	}
}

// bind returns ctx cancelled also when the lease it runs under lapses.
func (l *liveness) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	if l == nil {
		return ctx, func() {}
	}
	l.mu.Lock()
	lease := l.lease
	l.mu.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(lease, func() { cancel(context.Cause(lease)) })
	return ctx, func() { stop(); cancel(nil) }
}

// metaReplaces is the job metadata key naming the job a takeover replaced.
const metaReplaces = "memoryd_replaces"

// takeOver ends the running extraction jobs of dead processes and inserts
// their replacements, or fails their turns when no attempt is left, in one
// transaction.
func (w *Worker) takeOver(ctx context.Context) error {
	return w.takeOverWith(ctx, false, func(q *store.Store) ([]store.TakenJob, error) {
		return q.TakeOverJobs(ctx, w.cfg.ProcessTimeout)
	})
}

// lostAfter is how long after its fetch a job River marks running in this
// process, and that the process does not run, counts as lost: River's
// executor starts a job as soon as its fetch returns, so a minute is far
// beyond any start.
const lostAfter = time.Minute

// takeOverLost ends the jobs River marks running in this process whose
// fetch never reached it (store.TakeOverLostJobs) and inserts their
// replacements, the attempt the fetch counted given back (the job never
// ran). Without it they waited for River's rescuer, 2 × JobTimeout (20
// minutes by default) after a Postgres cut.
func (w *Worker) takeOverLost(ctx context.Context, process string) error {
	// Read first, outside a transaction: on nearly every heartbeat there is
	// nothing to take over.
	ids, err := w.cfg.Store.RunningJobsOf(ctx, process, lostAfter)
	if err != nil {
		return fmt.Errorf("take over: %w", err)
	}
	lost := w.jobs.notHeld(ids)
	if len(lost) == 0 {
		return nil
	}
	return w.takeOverWith(ctx, true, func(q *store.Store) ([]store.TakenJob, error) {
		return q.TakeOverLostJobs(ctx, process, lost)
	})
}

// endedKept is how long the tracker remembers a job that ended: River's
// completer records a job's end in batches, retried while Postgres is
// away, and until then the job is still running in the table.
const endedKept = 5 * time.Minute

// jobsInProcess tracks the jobs this process runs, and those that ended
// within endedKept, by River job id: what takeOverLost must not end.
type jobsInProcess struct {
	river.MiddlewareDefaults

	mu      sync.Mutex
	running map[int64]int
	ended   map[int64]time.Time
}

func newJobsInProcess() *jobsInProcess {
	return &jobsInProcess{running: map[int64]int{}, ended: map[int64]time.Time{}}
}

// Work records job as running around its work.
func (t *jobsInProcess) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	t.mu.Lock()
	t.running[job.ID]++
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		if t.running[job.ID]--; t.running[job.ID] <= 0 {
			delete(t.running, job.ID)
		}
		t.ended[job.ID] = time.Now()
		t.mu.Unlock()
	}()
	return doInner(ctx)
}

// notHeld returns the ids that are neither running nor ended within
// endedKept, and forgets the jobs that ended before that.
func (t *jobsInProcess) notHeld(ids []int64) []int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, at := range t.ended {
		if time.Since(at) > endedKept {
			delete(t.ended, id)
		}
	}
	var out []int64
	for _, id := range ids {
		if _, ok := t.running[id]; ok {
			continue
		}
		if _, ok := t.ended[id]; ok {
			continue
		}
		out = append(out, id)
	}
	return out
}

// errProcessStopped is the failure of an extraction job's run whose process
// stopped during it, as outcome decides it (takeOverWith): an attempt.
var errProcessStopped = errors.New("its process stopped while running the job")

// takeOverWith is takeOver of the jobs find ends; lost tells jobs that
// never ran (their attempt is given back) from those of a dead process.
func (w *Worker) takeOverWith(ctx context.Context, lost bool, find func(q *store.Store) ([]store.TakenJob, error)) error {
	var (
		taken []store.TakenJob
		// discarded: the extraction jobs that stopped on their last
		// attempt (outcome), whose turns failed.
		discarded map[int64]bool
	)
	b := w.budget()
	err := w.cfg.Store.InTx(ctx, func(tx pgx.Tx, q *store.Store) error {
		var err error
		discarded = map[int64]bool{}
		taken, err = find(q)
		if err != nil || len(taken) == 0 {
			return err
		}
		if lost {
			for i := range taken {
				taken[i].Attempt = max(0, taken[i].Attempt-1)
			}
		}
		var reps []replacement
		var asIs []river.InsertManyParams
		for _, j := range taken {
			if replacedAsIs(j.Kind) {
				p, err := asIsReplacement(j, b.takenAttemptsLeft(j))
				if err != nil {
					// Its items are embedded by the next sweep; a document
					// stays pending until it is put again.
					w.logger.Error("job of a dead process has unreadable arguments", "job_id", j.ID, "kind", j.Kind, "error", err)
				} else if p != nil {
					asIs = append(asIs, *p)
				}
				continue
			}
			if j.Kind != ExtractJobKind {
				continue // periodic maintenance: the next period runs it again
			}
			var args ExtractArgs
			if err := json.Unmarshal(j.Args, &args); err != nil {
				// Left pending: the reconciler requeues them.
				w.logger.Error("job of a dead process has unreadable arguments", "job_id", j.ID, "error", err)
				continue
			}
			row := takenRow(j)
			if outcome(errProcessStopped, row, false, b).final {
				discarded[j.ID] = true
				reason := fmt.Sprintf("extraction job %d discarded after %d attempts: its process stopped while running the last one", j.ID, j.Attempt)
				if err := q.MarkFailed(ctx, args.UserID, args.EventIDs, reason, true); err != nil {
					return err
				}
				continue
			}
			reps = append(reps, replacement{args: args, queue: j.Queue, attemptsLeft: b.takenAttemptsLeft(j),
				replaces: j.ID, carried: carriedOf(j.Metadata)})
		}
		if err := w.enq.insertSkippingDuplicates(ctx, tx, asIs); err != nil {
			return err
		}
		return w.enq.enqueueReplacements(ctx, tx, reps)
	})
	if err != nil {
		return fmt.Errorf("take over: %w", err)
	}
	// Not "dead": a live process cut off from Postgres past its lease
	// hands its jobs back as they are taken (a Postgres walk read "dead
	// process" for a serve that ran on).
	whose := "took over the job of a process whose lease lapsed (stopped, or without Postgres for longer than its lease)"
	if lost {
		whose = "took over a job its fetch lost (a cut connection); its attempt given back"
	}
	for _, j := range taken {
		if replacedAsIs(j.Kind) {
			switch {
			case b.takenAttemptsLeft(j) > 0:
				w.logger.Info(whose, "job_id", j.ID, "kind", j.Kind, "process", j.Process, "attempt", j.Attempt)
			case j.Kind == IndexDocumentJobKind:
				w.logger.Error("ended the document chunking job of a dead process on its last attempt; the document stays pending until it is put again", "job_id", j.ID, "process", j.Process)
			default:
				w.logger.Warn("ended the embed job of a dead process on its last attempt; the next sweep embeds its items", "job_id", j.ID, "process", j.Process)
			}
			continue
		}
		if j.Kind != ExtractJobKind {
			w.logger.Info("ended the job of a dead process; it runs again in its next period", "job_id", j.ID, "kind", j.Kind, "process", j.Process)
			continue
		}
		var args ExtractArgs
		_ = json.Unmarshal(j.Args, &args) // read above
		// AttemptedAt is River's time: Postgres's.
		took := w.cfg.Store.Clock().Now().Sub(j.AttemptedAt)
		if discarded[j.ID] {
			w.logger.Error("extraction job discarded: its process stopped during the last attempt; turns marked failed",
				"job_id", j.ID, "process", j.Process, "attempt", j.Attempt, "turns", len(args.EventIDs))
			w.cfg.Observer.Extracted(took, len(args.EventIDs), outcomeDiscarded)
			continue
		}
		w.logger.Info(whose, "job_id", j.ID, "process", j.Process,
			"attempt", j.Attempt, "turns", len(args.EventIDs))
		w.cfg.Observer.Extracted(took, len(args.EventIDs), outcomeTakenOver)
	}
	return nil
}

// replacedAsIs tells the kinds of job a takeover replaces by the same job
// with the attempts it had left: embed and chunk embed jobs (without one,
// their items waited for the sweep, up to EmbedSweepInterval, an hour by
// default), and document chunking jobs (without one, the document stayed
// pending for good: nothing else enqueues its job).
func replacedAsIs(kind string) bool {
	return kind == EmbedJobKind || kind == ChunkEmbedJobKind || kind == IndexDocumentJobKind
}

// asIsReplacement is the job that replaces a job of a kind replacedAsIs
// taken over: the same arguments, on the same queue, with left attempts,
// those it had left (retryBudget.takenAttemptsLeft; nil when none is
// left), and, for an embed or chunk embed job, its metadata at the keys of
// carriedMeta.
func asIsReplacement(j store.TakenJob, left int) (*river.InsertManyParams, error) {
	var args river.JobArgs
	switch j.Kind {
	case ChunkEmbedJobKind:
		var a ChunkEmbedArgs
		if err := json.Unmarshal(j.Args, &a); err != nil {
			return nil, err
		}
		args = a
	case IndexDocumentJobKind:
		var a IndexDocumentArgs
		if err := json.Unmarshal(j.Args, &a); err != nil {
			return nil, err
		}
		args = a
	default:
		var a EmbedArgs
		if err := json.Unmarshal(j.Args, &a); err != nil {
			return nil, err
		}
		args = a
	}
	if left <= 0 {
		return nil, nil
	}
	m := map[string]any{metaSource: sourceTakeOver, metaReplaces: j.ID}
	if j.Kind != IndexDocumentJobKind {
		// An embed job's waits are bounded as an extraction job's
		// (outcome), and kept as its replacement's are (carriedMeta).
		// Before, a takeover restarted them: the credit of its snoozes,
		// its wakes, its waits for the embeddings server and the
		// database.
		for k, v := range carriedOf(j.Metadata) {
			m[k] = v
		}
	}
	if j.Claimed || unclaimable(j.Metadata) {
		// Its texts, or those it had claimed (now marked), may be what
		// stopped the process: like them, it runs alone.
		m[store.UnclaimableKey] = true
	}
	meta, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return &river.InsertManyParams{Args: args,
		InsertOpts: &river.InsertOpts{Queue: j.Queue, MaxAttempts: left, Metadata: meta}}, nil
}
