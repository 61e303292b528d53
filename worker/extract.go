package worker

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/attribute"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
)

// extractWorker is the River worker for ExtractArgs.
type extractWorker struct {
	river.WorkerDefaults[ExtractArgs]
	w *Worker
}

// extracted is one turn's extraction, held until the write transaction.
type extracted struct {
	turn   store.Turn
	result extractor.Result
	// input is the digest of the extraction's input (inputKey), keyed
	// whether there is one: a result a wait kept from being stored is
	// held under it for the job's next run (unsavedResults).
	input [sha256.Size]byte
	keyed bool
}

// Work extracts each unprocessed turn of the job, then stores the results.
// Turns that fail are handled by fail; the others are stored even when some
// fail, so one poison turn in a batch does not hold back the rest.
func (e *extractWorker) Work(ctx context.Context, job *river.Job[ExtractArgs]) error {
	// Stopped when the process's lease lapses: another process may then take
	// the job over (recover.go); fail hands it back.
	ctx, release := e.w.live.bind(ctx)
	defer release()
	// Held back while enrich is slow (Config.Pacer): the job waits for its
	// turn among the batches and jobs running (at most MaxPause).
	// Deferred too, so that a panic (recovered by River) frees the turn.
	leave := e.w.pace.enter(ctx)
	defer leave()
	start := time.Now()
	err := e.work(ctx, job)
	took := time.Since(start)
	leave()
	label := outcomeProcessed
	turns := len(job.Args.EventIDs)
	var end *jobEnd
	switch {
	case errors.As(err, &end):
		label = end.label
		if end.marked {
			// Those the failure was recorded for: not a turn another
			// job's claim held, which that job counts.
			turns = end.turns
		}
	case err != nil:
		label = outcomeRetry
	}
	e.w.cfg.Observer.Extracted(took, turns, label)
	return err
}

func (e *extractWorker) work(ctx context.Context, job *river.Job[ExtractArgs]) error {
	if job.Args.OverCap {
		return e.workOverCap(ctx, job)
	}
	crashed := metaCount(job.Metadata, metaModelCrashes) > 0
	if crashed {
		// The model server went down with this job's request in flight:
		// sent alone now, so that a second crash is its own (maxCrashes):
		// alone in this serve, and across the serves while it holds
		// modelAloneLock (aloneInDeployment, below); a burst's turns one
		// a request, each alone (workBurst).
		ctx = extractor.Alone(ctx)
	}
	w := e.w
	s := w.cfg.Store
	turns, err := s.UnprocessedTurns(ctx, job.Args.UserID, job.Args.EventIDs)
	if err != nil {
		return e.fail(ctx, job.JobRow, job.Args.UserID, job.Args.EventIDs, err)
	}
	// The users' current facts, shown to the extractor with their values.
	// One user, but for a job enqueued before migration 012.
	byUser := make(map[string][]store.Turn, 1)
	for _, t := range turns {
		byUser[t.UserID] = append(byUser[t.UserID], t)
	}
	if len(turns) == 0 {
		// Done by an earlier run of this job, or by its burst. A burst
		// sent one a request gave its other turns jobs of their own
		// (workBurst).
		return nil
	}
	known := make(map[string]*knownFacts, len(byUser))
	for user, ts := range byUser {
		if known[user], err = loadKnownFacts(ctx, s, user, ts); err != nil {
			return e.fail(ctx, job.JobRow, job.Args.UserID, job.Args.EventIDs, err)
		}
	}
	// Over a spend cap, the offline extractor (spend.go).
	ex, over := w.cfg.Extractor, false
	if over, err = w.overCap(ctx, job.Args.UserID); err != nil {
		return e.fail(ctx, job.JobRow, job.Args.UserID, job.Args.EventIDs, err)
	} else if over {
		ex = w.cfg.OverCapExtractor
	}
	run := func() error {
		if job.Args.ConversationID != "" {
			if batcher, ok := ex.(BatchExtractor); ok {
				return e.workBurst(ctx, job, ex, batcher, over, known)
			}
		}
		return e.extractClaimed(ctx, job, ex, over, turns, known)
	}
	if crashed && !over {
		return e.aloneInDeployment(ctx, job, run)
	}
	return run()
}

// modelAloneLock is the lock (store.Exclusively) that a job sending its
// requests alone holds across the serves of the deployment
// (aloneInDeployment).
const modelAloneLock = "model-alone"

// aloneInDeployment runs run, the run of a job whose requests are sent
// alone in this serve (work: the model server went down with one), while
// holding modelAloneLock, so that no request another serve sends alone is
// in flight beside them: a crash cuts the requests of every serve, and
// each serve sending its cut ones again alone in its own process put an
// innocent request of one beside the poison one of another, which the
// second crash failed for good. The lock is a session advisory lock on a
// connection of its own, outside the pool (store.Exclusively: the run's
// statements need the pool's), held for the run (one connection, in one
// serve at a time, for the rare jobs a crash cut), and released with the
// connection if the process dies. When another serve holds it, the job is
// snoozed unsent without spending an attempt (errAloneElsewhere), at most
// maxAloneHolds times, and the job letting the lock go wakes the one that
// has waited longest (aloneReleased); past that its requests are sent
// alone in this serve only, as they were before the lock.
func (e *extractWorker) aloneInDeployment(ctx context.Context, job *river.Job[ExtractArgs], run func() error) error {
	if holds := metaCount(job.Metadata, metaAloneHolds); holds >= maxAloneHolds {
		e.w.logger.Warn("extraction held back for other serves' requests sent alone past its bound; sending its own alone in this serve only",
			"job_id", job.ID, "user_id", job.Args.UserID, "alone_holds", holds, "turns", len(job.Args.EventIDs))
		return run()
	}
	ran, err := e.w.cfg.Store.Exclusively(ctx, modelAloneLock, false, func() error {
		e.w.aloneHolding.Add(1)
		defer e.w.aloneHolding.Add(-1)
		return run()
	})
	if ran {
		e.w.aloneReleased(ctx)
		return err
	}
	if err == nil {
		err = errAloneElsewhere
	}
	return e.fail(ctx, job.JobRow, job.Args.UserID, job.Args.EventIDs, err)
}

// extractClaimed is extractEach for a job that is no conversation's burst
// (turns are its unprocessed turns). A job of retry-failed or of the
// reconciler (a crash's requeue included), or a takeover's replacement,
// first claims those of its turns a burst could claim (store.ClaimTurns),
// and leaves those another job holds to it: such a job took no claim, and
// the burst of a new turn of the conversation that came while its request
// was with the model claimed and extracted the turn too
// (TestRetriedTurnIsNotTakenByANewBurst). Every way out but success
// releases the claim, as workBurst's does. Ingest's jobs claim nothing:
// without --extract-debounce they are every turn's, and there is no
// burst; with it they are bursts. Nor do replay's: a write more for every
// turn replayed, against a burst of the same conversation during its job
// (docs/operations.md says so).
//
// They claim whatever this serve's --extract-debounce: a burst's job runs
// as one in any serve (work: its ConversationID), and one may be queued
// when this serve's is 0: from a serve with it on (serves configured
// apart, or a rolling change of the flag), or from before a restart that
// turned it off (a burst snoozed through an outage runs when the server
// is back, beside the retry-failed of the outage's failed turns). A claim
// is one short transaction a job (5-6 ms each for 1,000 jobs on a loaded
// 2-core machine), beside its model call.
func (e *extractWorker) extractClaimed(ctx context.Context, job *river.Job[ExtractArgs], ex Extractor, over bool, turns []store.Turn, known map[string]*knownFacts) (err error) {
	a := job.Args
	burstable := slices.ContainsFunc(turns, func(t store.Turn) bool { return t.ConversationID != "" })
	source := metaString(job.Metadata, metaSource)
	if a.UserID == "" || !burstable || (source != sourceRetry && source != sourceReconcile && source != sourceTakeOver) {
		return e.extractEach(ctx, job, ex, over, turns, a.EventIDs, known)
	}
	lockTimeout := e.w.jobLockTimeout(ctx)
	held, err := e.w.cfg.Store.ClaimTurns(ctx, store.Claim{JobID: job.ID, UserID: a.UserID, Own: unprocessed(turns),
		TTL: e.w.cfg.JobTimeout, LockTimeout: lockTimeout})
	if err != nil {
		return e.fail(ctx, job.JobRow, a.UserID, a.EventIDs, err)
	}
	turns = slices.DeleteFunc(turns, func(t store.Turn) bool { return slices.Contains(held, t.EventID) })
	if len(turns) == 0 {
		return nil
	}
	ids := unprocessed(turns)
	defer func() {
		if err != nil {
			e.release(ctx, job.JobRow, a.UserID, ids)
		}
	}()
	return e.extractEach(ctx, job, ex, over, turns, ids, known)
}

// extractEach extracts turns one a request with ex (the offline extractor
// when over) and stores the results: the turns of a job that is not a
// conversation's burst, and those of a burst whose request the model
// server went down with (workBurst). ids are the turns failed on the ways
// out that fail them all; known holds the current facts of the turns'
// users.
func (e *extractWorker) extractEach(ctx context.Context, job *river.Job[ExtractArgs], ex Extractor, over bool, turns []store.Turn, ids []string, known map[string]*knownFacts) error {
	w := e.w
	// Earlier turns of each turn's conversation, by default (not only in
	// debounced bursts), so that "there" or "that one" can be resolved.
	prior, err := priorTurnsOf(ctx, w.cfg.Store, turns)
	if err != nil {
		return e.fail(ctx, job.JobRow, job.Args.UserID, ids, err)
	}
	info := ex.Info()
	prov := store.Provenance{Extractor: info.Name, Model: info.Model, PromptVersion: info.PromptVersion}
	// Tokens spent are stored with the results they gave (save), and on
	// their own on every other way out.
	usage := w.newUsage(info.Model)
	defer e.flushUsage(ctx, usage) // the ways out below that do not
	var (
		done     []extracted
		firstErr error
		failed   []string
		// digests: of each failed turn's error (extractor.ReplyDigestOf),
		// in failed's order; see repliesOf.
		digests []string
		// rest: the turns a crash left unsent (and those failed before
		// it), for a job of their own when this one ends (below).
		rest []store.Turn
	)
	for i, t := range turns {
		facts, order := known[t.UserID].input()
		in := extractor.Input{UserID: t.UserID, Turn: extractorTurn(t), Prior: prior[i], Facts: facts, FactKeys: order}
		key, keyed := inputKey(info, over, in)
		var (
			res  extractor.Result
			call store.CallID // a new one but for a kept result's
		)
		if kept, ok := w.unsaved.take(job.ID, key, keyed); ok {
			res, err, call = kept.result, nil, kept.call // its tokens, if not stored yet, are added below, under their call's id
		} else {
			res, err = ex.Extract(ctx, in)
			if err == nil && info.Model != "" {
				w.modelAnswered()
			}
		}
		usage.addCall(t, res.Usage, call)
		if err != nil {
			if ctx.Err() != nil {
				// Keep what this run extracted before the timeout or
				// shutdown; the rest is retried.
				saveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), afterCancelTimeout)
				serr := e.save(saveCtx, done, prov, over, usage)
				cancel()
				if serr != nil {
					w.logger.Warn("cannot save partial extraction", "job_id", job.ID, "error", serr)
				}
				e.flushUsage(ctx, usage)
				return e.fail(ctx, job.JobRow, job.Args.UserID, unprocessed(turns[i:]), ctx.Err())
			}
			if extractor.IsCrashed(err) {
				// The server went down with this turn's request: the
				// later turns would only find it down, and failed with
				// this crash's error, which decides the job's end
				// (maxCrashes), innocent turns failed for good with it.
				// The job fails for this turn alone; its other turns stay
				// pending, for its next run or a job of their own.
				for _, f := range turns[:i] {
					if slices.Contains(failed, f.EventID) {
						rest = append(rest, f)
					}
				}
				rest = append(rest, turns[i+1:]...)
				failed, digests, firstErr = []string{t.EventID}, nil, err
				break
			}
			failed, digests = append(failed, t.EventID), append(digests, extractor.ReplyDigestOf(err))
			firstErr = worse(firstErr, err)
			continue
		}
		done = append(done, extracted{turn: t, result: res, input: key, keyed: keyed})
		known[t.UserID].apply(res) // later turns of the job see what this one changed
		// Save as we go in large jobs (replay batches), so that a timeout
		// loses at most one chunk of model calls.
		if len(done) == saveEvery {
			if err := e.save(ctx, done, prov, over, usage); err != nil {
				e.keepUnsaved(job.ID, done, e.flushUsage(ctx, usage), err)
				return e.fail(ctx, job.JobRow, job.Args.UserID, unprocessed(turns[i+1-len(done):]), err)
			}
			done = done[:0]
		}
	}
	if err := e.save(ctx, done, prov, over, usage); err != nil {
		e.keepUnsaved(job.ID, done, e.flushUsage(ctx, usage), err)
		return e.fail(ctx, job.JobRow, job.Args.UserID, ids, err)
	}
	if len(failed) > 0 {
		// Recorded before the turns are marked failed, as they would be
		// with results.
		e.flushUsage(ctx, usage)
		err := e.fail(ctx, job.JobRow, job.Args.UserID, failed, repliesOf(firstErr, failed, digests))
		if end := (*jobEnd)(nil); len(rest) > 0 && errors.As(err, &end) && end.label == outcomeFailed {
			// A burst's leftover turns get a job each, as its split's and
			// its panic's do: one job of them all that panicked on one at
			// its last attempt failed the others with it, unsent
			// (TestCrashLeftoverTurnPanicFailsAlone). A job of several
			// turns of its own (a replay's) gives its turns one job.
			e.w.requeue(ctx, job.JobRow, rest, job.Args.ConversationID != "")
		}
		return err
	}
	return nil
}

// requeue gives turns of job, which ends without them (a crash failed it
// for another turn, or it panicked at its last attempt: lastAttemptHandler),
// jobs of their own (alone, for a burst's turns: a job each, claiming its
// turn alone, as a burst's split gives them, so that a turn that panics
// again cannot take another along; otherwise one job): those still there and not
// processed, locked in the transaction that inserts them. A forget of the
// user committed during the job's run deleted them, and one under way
// waits for them and then deletes the job in its second pass over her
// jobs; before, a job named the forgotten user's event ids after her
// forget (TestCrashRequeueAfterAForgetGivesNoJobs). On failure they are
// left pending to the reconciler, which gives them one within a minute.
func (w *Worker) requeue(ctx context.Context, job *rivertype.JobRow, turns []store.Turn, alone bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), afterCancelTimeout)
	defer cancel()
	// The job's user; none for a legacy job of several users' turns,
	// whose lock by event id alone is narrowed to them by key below.
	user := turns[0].UserID
	for _, t := range turns {
		if t.UserID != user {
			user = ""
		}
	}
	err := w.cfg.Store.InTx(ctx, func(tx pgx.Tx, q *store.Store) error {
		// Locked first, in (turn_at, event_id) order as a forget, a
		// claim and a save lock them; the hand-over below then waits
		// for none.
		locked, err := q.LockUnprocessedTurns(ctx, user, unprocessed(turns))
		if err != nil {
			return err
		}
		left := slices.DeleteFunc(slices.Clone(turns), func(t store.Turn) bool {
			return !slices.ContainsFunc(locked, func(l store.Turn) bool { return l.Key() == t.Key() })
		})
		if len(left) == 0 {
			return nil
		}
		// The job's claim on them ends first (a burst's, or
		// extractClaimed's: a job that claims names its one user), or
		// the new job would find them held.
		if _, err := q.HandOverClaims(ctx, job.ID, left[0].UserID, unprocessed(left)); err != nil {
			return err
		}
		if alone {
			// As read locked: with their conversation, which the
			// split's jobs name.
			return w.enq.enqueueSplit(ctx, tx, locked)
		}
		return w.enq.enqueueTurns(ctx, tx, left, len(left), sourceReconcile, nil)
	})
	if err != nil {
		w.logger.Warn("cannot give the turns a failed job leaves a job of their own; the reconciler will", "job_id", job.ID, "turns", len(turns), "error", err)
	}
}

// saveEvery is how many extracted turns a job stores per transaction.
const saveEvery = 20

func unprocessed(turns []store.Turn) []string {
	ids := make([]string, len(turns))
	for i, t := range turns {
		ids[i] = t.EventID
	}
	return ids
}

// BatchExtractor extracts a burst of turns of one conversation in one call.
// *extractor.LLM and *extractor.Rules implement it.
type BatchExtractor interface {
	ExtractBatch(ctx context.Context, in extractor.BatchInput) (extractor.BatchResult, error)
}

// priorTurns is how many earlier turns of a conversation a burst gets as
// read-only context.
const priorTurns = 4

// workBurst claims the pending turns of the job's conversation (its own
// first, then the oldest, up to extractor.MaxBatchTurns; a longer burst
// leaves the rest to the jobs of those turns), extracts them in one call and
// stores what each turn gave. The jobs of the other claimed turns find them
// claimed or processed and stop, so a burst costs one model call.
//
// Every way out but success releases the claim (deferred, the one place), so
// that the job's next run, or the job of another turn, can take the turns at
// once: a job handed back at shutdown would otherwise find its turns claimed
// and stop, leaving them pending. A claim records the job, so a run of the
// same job takes back a claim it could not release (its process died).
//
// A released turn still names the job (store.ReleaseClaims), so that the
// reconciler leaves it to the job's next run while the job is live.
//
// Once the model gave the burst's request invalid replies at two attempts,
// the same or not, of this job or another's, or at this job's last (splits),
// the burst's turns are sent one a request: the job keeps its own turns
// (metaBurstSplit: its next runs claim those alone) and gives each other
// turn a job of its own as it releases it (splitBurst). A turn of it that
// derails the model, or a model that cannot follow the batch prompt, then
// fails that turn alone, or none, where it failed every turn of the burst
// for good.
//
// Once the model server went down with the burst's request in flight
// (metaModelCrashes), the burst's turns are extracted one a request
// instead (extractEach), each sent alone (work): a second crash of the
// whole burst would fail every turn of it for good, the innocent ones
// with the one that brings the server down; one a request, it fails that
// turn alone, and the turns after it get a job of their own.
//
// ex is the extractor (batcher is it as a BatchExtractor); over says it is
// the offline one, run because of a spend cap; known holds the current
// facts of the job's user.
func (e *extractWorker) workBurst(ctx context.Context, job *river.Job[ExtractArgs], ex Extractor, batcher BatchExtractor, over bool, known map[string]*knownFacts) (err error) {
	s := e.w.cfg.Store
	a := job.Args
	info := ex.Info()
	lockTimeout := e.w.jobLockTimeout(ctx)
	// A job sending its burst's turns one a request claims its own turns
	// alone: it handed the others over (split), and the conversation's
	// later turns are their own jobs' burst.
	split := metaTrue(job.Metadata, metaBurstSplit)
	burst, err := s.ClaimConversationTurns(ctx, store.Claim{JobID: job.ID, UserID: a.UserID, ConversationID: a.ConversationID,
		Own: a.EventIDs, OnlyOwn: split, Limit: extractor.MaxBatchTurns, TTL: e.w.cfg.JobTimeout, LockTimeout: lockTimeout})
	if err != nil {
		return e.fail(ctx, job.JobRow, a.UserID, a.EventIDs, err)
	}
	if len(burst) == 0 {
		return nil // this job's turns are done, or claimed by the job of an earlier turn of the burst
	}
	ids := unprocessed(burst)
	defer func() {
		if err != nil {
			e.release(ctx, job.JobRow, a.UserID, ids)
		}
	}()
	if metaCount(job.Metadata, metaModelCrashes) > 0 || split {
		// Each turn with the conversation's earlier ones as context, as
		// in a job of several turns; the claim keeps the jobs of the
		// burst's other turns off them meanwhile.
		return e.extractEach(ctx, job, ex, over, burst, ids, known)
	}
	prior, err := s.PriorConversationTurns(ctx, a.UserID, a.ConversationID, burst[0].TurnAt, priorTurns)
	if err != nil {
		return e.fail(ctx, job.JobRow, a.UserID, a.EventIDs, err)
	}
	in := extractor.BatchInput{UserID: a.UserID}
	in.Facts, in.FactKeys = known[a.UserID].input()
	for _, t := range burst {
		in.Turns = append(in.Turns, extractorTurn(t))
	}
	for _, t := range prior {
		in.Prior = append(in.Prior, extractorTurn(t))
	}
	key, keyed := inputKey(info, over, in)
	var (
		res  extractor.BatchResult
		call store.CallID
	)
	if kept, ok := e.w.unsaved.take(job.ID, key, keyed); ok {
		res, call = kept.batch, kept.call // its tokens, if not stored yet, are added below, under their call's id
	} else {
		res, err = batcher.ExtractBatch(ctx, in)
		if err == nil && info.Model != "" {
			e.w.modelAnswered()
		}
	}
	// Stored with the burst's results, or on its own if they are not.
	// Counted on the newest turn (the highest sequence: a burst's turns
	// were read from one stream): a forget covers the call only if it
	// covers every turn of the burst.
	newest := slices.MaxFunc(burst, func(a, b store.Turn) int { return cmp.Compare(a.Placed.Seq, b.Placed.Seq) })
	usage := e.w.newUsage(info.Model)
	usage.addCall(newest, res.Usage, call)
	defer e.flushUsage(ctx, usage)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		e.flushUsage(ctx, usage)
		invalid := extractor.KindOf(err) == extractor.KindInvalidOutput && !isPermanent(err)
		if len(burst) > 1 && invalid && e.splits(job.JobRow, burst, err) {
			// Failing the burst again would fail every turn of it for
			// good at its repeat or its last attempt. Its turns are sent
			// one a request from now on, and a turn fails for good only
			// for its own request's replies: this job keeps its own
			// turns (this run, and its next ones: metaBurstSplit), and
			// the others get a job each, with their own attempts, in the
			// transaction that releases them (splitBurst).
			e.w.logger.Info("model gave invalid replies to a burst's request; sending its turns one a request",
				"job_id", job.ID, "user_id", a.UserID, "turns", len(burst), "attempt", job.Attempt, "error", err)
			own, serr := e.splitBurst(ctx, job, burst)
			if serr != nil {
				return e.fail(ctx, job.JobRow, a.UserID, ids, serr)
			}
			_ = river.MetadataSet(ctx, metaBurstSplit, true)
			ids = unprocessed(own) // the others' claims ended with the split
			if len(own) == 0 {
				return nil
			}
			return e.extractEach(ctx, job, ex, over, own, ids, known)
		}
		if invalid && len(burst) > 1 {
			_ = river.MetadataSet(ctx, metaBurstInvalid, true)
		}
		return e.fail(ctx, job.JobRow, a.UserID, ids, err)
	}
	done := make([]extracted, len(burst))
	for i, t := range burst {
		r := extractor.Result{Facts: res.Facts[i], Context: res.Context[i]}
		if i < len(res.Changes) {
			r.Changes = res.Changes[i] // a BatchExtractor of before fact operations leaves Changes nil
		}
		done[i] = extracted{turn: t, result: r}
	}
	if err := e.save(ctx, done, store.Provenance{Extractor: info.Name, Model: info.Model, PromptVersion: res.PromptVersion}, over, usage); err != nil {
		unstored := e.flushUsage(ctx, usage)
		if keyed && isWait(err) {
			// Held redacted, as keepUnsaved's (done is the burst's
			// results, in its turns' order).
			kept := res
			kept.Facts, kept.Context, kept.Changes = make([]map[string]string, len(done)), make([][]extractor.QA, len(done)), make([][]extractor.FactChange, len(done))
			for i, d := range done {
				r, _ := extractor.RedactResult(d.result)
				kept.Facts[i], kept.Context[i], kept.Changes[i] = r.Facts, r.Context, r.Changes
			}
			id, ok := unstored[newest.Key()]
			if !ok {
				kept.Usage = extractor.Usage{}
			}
			e.w.unsaved.keep(job.ID, key, unsavedEntry{batch: kept, call: id})
		}
		return e.fail(ctx, job.JobRow, a.UserID, ids, err)
	}
	return nil
}

// splits reports whether a burst job whose burst's request (of burst, its
// claimed turns) got invalid replies (err) sends the burst's turns one a
// request: when the burst got invalid replies before, at an attempt of
// this job (metaBurstInvalid) or of another (a turn of it whose last
// attempt failed so, invalidReplies: the jobs of a burst's turns take it
// in turn, each with metadata of its own, and a second attempt seen by no
// one job failed every turn at the last attempt), and when failing the
// burst now would fail its turns for good (outcome: the replies of its
// last attempt repeated, metaInvalidReply, or its job's last attempt):
// sent one a request, each turn gets an attempt of its own first. Only
// attempts with invalid replies count: a 500, or a server down past
// --llm-max-outage, says nothing of the burst's size, and before, such an
// attempt sent the burst's turns one a request at its first invalid
// replies (one call a turn where a next attempt of the burst could do
// with one).
func (e *extractWorker) splits(job *rivertype.JobRow, burst []store.Turn, err error) bool {
	if metaTrue(job.Metadata, metaBurstInvalid) || slices.ContainsFunc(burst, invalidReplies) {
		return true
	}
	return outcome(err, job, false, e.w.budget()).final
}

// invalidReplies reports whether t's last attempt that failed (its
// LastError) got the model's invalid replies: the error recorded then is
// the extractor's of that kind, alone or wrapped (repeatedReplyReason's).
// An attempt that failed otherwise since hides it, and the burst gets one
// more attempt before it splits.
func invalidReplies(t store.Turn) bool {
	return t.Attempts > 0 && strings.Contains(t.LastError, extractor.ErrInvalidOutput.Error())
}

// splitBurst hands the turns of burst that are not job's own over to a job
// each (Enqueuer.enqueueSplit), in the transaction that releases the job's
// claim on them, and returns the job's own. Before, the job went on to
// send them all itself, and a turn of them that failed was left released
// and named by no job: the reconciler gave it one, beside the job's next
// run, which claimed it again (two extractions of the turn), and that
// run claimed the conversation's later turns too.
func (e *extractWorker) splitBurst(ctx context.Context, job *river.Job[ExtractArgs], burst []store.Turn) (own []store.Turn, err error) {
	args := job.Args
	var others []store.Turn
	for _, t := range burst {
		if slices.Contains(args.EventIDs, t.EventID) {
			own = append(own, t)
		} else {
			others = append(others, t)
		}
	}
	if len(others) == 0 {
		return own, nil
	}
	err = e.w.cfg.Store.InTx(ctx, func(tx pgx.Tx, q *store.Store) error {
		released, err := q.HandOverClaims(ctx, job.ID, args.UserID, unprocessed(others))
		if err != nil {
			return err
		}
		// Only the turns released: a forget or reset of the user since the
		// claim deleted the others (a job would name a forgotten user's
		// turn after her forget), or another job took them. No user lock:
		// a forget that has not locked her turns yet waits for those
		// locked here and deletes the jobs inserted here in its second
		// pass over her jobs (TestBurstSplitDuringAForgetGivesNoJobs).
		handed := slices.DeleteFunc(slices.Clone(others), func(t store.Turn) bool { return !slices.Contains(released, t.EventID) })
		if len(handed) == 0 {
			return nil
		}
		return e.w.enq.enqueueSplit(ctx, tx, handed)
	})
	if err != nil {
		return nil, fmt.Errorf("split burst: %w", err)
	}
	return own, nil
}

// keepUnsaved holds the results of done, which a save could not store
// (err), for the job's next run in this process (unsavedResults), when err
// is a wait (isWait): a failure of another kind may be the result's own,
// and the next run asks the model again. unstored are the turns whose
// calls' tokens flushUsage dropped, with the calls' ids: their results
// keep the tokens and the id, to be stored with them (once: the save that
// failed may have stored them, its COMMIT's connection lost; a call kept
// behind a held user lock is in the usage backlog too, and whichever
// stores it second adds nothing, its id recorded); the others' do not
// (stored, or in the backlog alone: the database out of reach).
func (e *extractWorker) keepUnsaved(job int64, done []extracted, unstored map[store.TurnKey]store.CallID, err error) {
	if !isWait(err) {
		return
	}
	for _, d := range done {
		if !d.keyed {
			continue
		}
		// Held redacted (save redacts again, finding nothing): a secret
		// a model reconstructed stays in this process's memory no longer
		// than the run. Not counted: save counted it (Observer.Redacted).
		res, _ := extractor.RedactResult(d.result)
		id, ok := unstored[d.turn.Key()]
		if !ok {
			res.Usage = extractor.Usage{}
		}
		e.w.unsaved.keep(job, d.input, unsavedEntry{result: res, call: id})
	}
}

// isWait reports whether err is one outcome snoozes for without blaming
// the job: a lock wait or the database out of reach.
func isWait(err error) bool { return store.IsLockWait(err) || dbUnreachable(err) }

// jobLockTimeout is how long a job's write transaction may wait for a lock
// (the lock_timeout of its claim, its save, its over-cap re-extraction):
// Config.LockTimeout, kept under half of the time ctx's deadline (the
// job's timeout) leaves, so that a wait ends as a lock timeout, which is
// retried, rather than as the job's own timeout, which costs an attempt.
// At least a millisecond: a lock_timeout of 0 would be no bound at all.
func (w *Worker) jobLockTimeout(ctx context.Context) time.Duration {
	d := w.cfg.LockTimeout
	if deadline, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(deadline)/2)
	}
	return max(d, time.Millisecond)
}

// release ends the job's claim on a burst it did not store, also when ctx
// is cancelled (shutdown), bounded. If it fails the claim expires after
// JobTimeout, and a run of the same job takes it back before.
func (e *extractWorker) release(ctx context.Context, job *rivertype.JobRow, userID string, ids []string) {
	relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := e.w.cfg.Store.ReleaseClaims(relCtx, job.ID, userID, ids); err != nil {
		e.w.logger.Warn("cannot release a burst's claim; it expires after the job timeout", "job_id", job.ID, "turns", len(ids), "error", err)
	}
}

// afterCancelTimeout bounds the writes a job still makes once its context is
// done (partial results, token usage), like fail's and release's.
const afterCancelTimeout = 5 * time.Second

// save writes the extracted memory and marks the turns processed in one
// transaction. The turns are re-locked first: a turn another run of this job
// processed meanwhile is skipped, so memory is written once. With overCap
// (an offline extraction because of a spend cap), the same transaction
// enqueues the job that extracts the turns again with the model once the
// caps reset. The same transaction adds usage (the tokens spent since the
// last save, nil for none) and, once it commits, empties it: one
// transaction a job instead of one more a model call.
func (e *extractWorker) save(ctx context.Context, done []extracted, prov store.Provenance, overCap bool, usage *jobUsage) error {
	if len(done) == 0 {
		return nil
	}
	// Every extraction, of either extractor and either path, is stored
	// through here: the one place sensitive data is taken out of memory.
	done = e.redact(done)
	// The job's user; none for a job enqueued before migration 012 that
	// holds several users' turns (see store.UnprocessedTurns).
	user := done[0].turn.UserID
	for _, d := range done {
		if d.turn.UserID != user {
			user = ""
		}
	}
	// A lock wait ends well before the job's deadline, as a lock timeout
	// that outcome snoozes without spending an attempt (jobLockTimeout).
	lockTimeout := e.w.jobLockTimeout(ctx)
	ctx, span := e.w.startSaveSpan(ctx, len(done))
	var (
		written   struct{ facts, items int }
		forgotten []store.UsageCall
	)
	err := e.w.cfg.Store.InTx(ctx, func(tx pgx.Tx, q *store.Store) error {
		// The lock timeout first, then the users' locks before the turns'
		// (a forget takes them in that order too), in one round trip; what
		// a forget covers is not written, and its usage is everyone's.
		done, ids, calls, err := keepRemembered(ctx, q, lockTimeout, done, usage)
		if err != nil {
			return err
		}
		forgotten = slices.DeleteFunc(slices.Clone(calls), func(c store.UsageCall) bool { return !c.Forgotten })
		if err := addUsage(ctx, q, usage.model, e.w.spendDay(), calls); err != nil {
			return err
		}
		locked, err := q.LockUnprocessedTurns(ctx, user, ids)
		if err != nil {
			return err
		}
		// Only this job's turns: a legacy job (no user) locks by event id
		// alone, which may also lock another user's turn with the same id.
		mine := make(map[store.TurnKey]bool, len(done))
		for _, d := range done {
			mine[d.turn.Key()] = true
		}
		open := make(map[store.TurnKey]bool, len(locked))
		for _, t := range locked {
			open[t.Key()] = mine[t.Key()]
		}
		var kept []extracted
		for _, d := range done {
			if open[d.turn.Key()] {
				kept = append(kept, d)
			}
		}
		facts, items := memoryWrites(kept, prov)
		written.facts, written.items = len(facts), len(items)
		if err := dropEarlierExtractions(ctx, q, kept, facts, items); err != nil {
			return err
		}
		if err := q.SaveMemory(ctx, facts, items); err != nil {
			return err
		}
		// Marked by user and id, so that a legacy job never marks another
		// user's turn that shares an id.
		processed := make(map[string][]string)
		for k, ok := range open {
			if ok {
				processed[k.UserID] = append(processed[k.UserID], k.EventID)
			}
		}
		for u, ids := range processed {
			if err := q.MarkProcessed(ctx, u, ids, prov); err != nil {
				return err
			}
		}
		if overCap {
			if err := e.w.enq.enqueueOverCap(ctx, tx, processed, e.w.cfg.Store.Clock().Now().Add(e.w.untilReset())); err != nil {
				return err
			}
			for _, ids := range processed {
				e.w.overCapTurns.Add(int64(len(ids)))
			}
		}
		return nil
	})
	if err == nil {
		usage.reset()
		e.w.logForgottenUsage(forgotten)
		if span.IsRecording() {
			span.SetAttributes(attribute.Int("memoryd.facts.written", written.facts), attribute.Int("memoryd.context.written", written.items))
		}
	}
	endSpan(span, err, "save_failed")
	return err
}

// dropEarlierExtractions deletes, user by user, the context items earlier
// extractions saved from those of done's turns that were processed before
// (a replay without --reset extracts them again), in the save's
// transaction before its writes: a model wording a turn otherwise left
// the user both items of it (store.DropExtraction, which keeps the user's
// own writes and what imports brought).
func dropEarlierExtractions(ctx context.Context, q *store.Store, done []extracted, facts []store.FactWrite, items []store.ContextWrite) error {
	again := make(map[string][]string)
	var users []string
	for _, d := range done {
		if d.turn.ProcessedAt == nil {
			continue
		}
		u := d.turn.UserID
		if again[u] == nil {
			users = append(users, u)
		}
		again[u] = append(again[u], d.turn.EventID)
	}
	// In user order, as a reset of several users takes their clear locks.
	slices.Sort(users)
	for _, u := range users {
		var fs []store.FactWrite
		var is []store.ContextWrite
		for _, f := range facts {
			if f.UserID == u {
				fs = append(fs, f)
			}
		}
		for _, it := range items {
			if it.UserID == u {
				is = append(is, it)
			}
		}
		if err := q.DropExtraction(ctx, u, again[u], fs, is); err != nil {
			return err
		}
	}
	return nil
}

// memoryWrites is what done's results write, each fact and context item
// with its turn's provenance: the one place extraction output becomes
// writes (save, and the re-extraction after a spend cap's reset). The user
// id comes from the turn, never from model output, so a hostile turn
// cannot write another user's memory. Each write carries its turn's place
// in the stream (placed), so that a clear covers the turns the stream held
// when it was made, however late they are stamped.
func memoryWrites(done []extracted, prov store.Provenance) (facts []store.FactWrite, items []store.ContextWrite) {
	for _, d := range done {
		t := d.turn
		write := func(op store.FactOp, key, value string) {
			_, list := events.CanonicalFactKey(key)
			facts = append(facts, store.FactWrite{UserID: t.UserID, Key: key, Value: value, SourceAt: t.TurnAt, EventID: t.EventID,
				ConversationID: t.ConversationID, Op: op, List: list, Placed: t.Placed, Provenance: prov})
		}
		for k, v := range d.result.Facts {
			if _, list := events.CanonicalFactKey(k); list {
				// A list stated whole: each item is set at the turn's time,
				// which replaces the items stated before.
				for _, item := range extractor.SplitItems(v) {
					write(store.FactSet, k, item)
				}
				continue
			}
			write(store.FactSet, k, v)
		}
		for _, c := range d.result.Changes {
			switch c.Op {
			case extractor.OpAdd:
				write(store.FactAdd, c.Key, c.Value)
			case extractor.OpRemove:
				write(store.FactRemove, c.Key, c.Value)
			case extractor.OpDelete:
				write(store.FactDelete, c.Key, c.Value)
			}
		}
		for _, qa := range d.result.Context {
			items = append(items, store.ContextWrite{UserID: t.UserID, Question: qa.Q, Answer: qa.A, CreatedAt: t.TurnAt,
				EventID: t.EventID, ConversationID: t.ConversationID, Placed: t.Placed, Provenance: prov})
		}
	}
	return facts, items
}

// redact returns done with every fact value and context pair redacted
// (extractor.RedactResult): what a model returns is not trusted to be free
// of secrets even though turns are recorded redacted, since a model may
// reconstruct or invent one. Facts left without content are dropped.
func (e *extractWorker) redact(done []extracted) []extracted {
	out := make([]extracted, len(done))
	for i, d := range done {
		res, kinds := extractor.RedactResult(d.result)
		for _, k := range kinds {
			e.w.cfg.Observer.Redacted(string(k), RedactedInMemory)
		}
		out[i] = d
		out[i].result = res
	}
	return out
}

// fail ends a failed run: outcome decides (the one place), fail applies
// the decision. It counts a snooze in the job's metadata, which River saves
// with the snooze, and records the error on the turns unless the job is
// snoozed, even when ctx is cancelled (shutdown), bounded.
//
// A statement cancelled by the job's own deadline (SQLSTATE 57014, or the
// context's error) says nothing about what it waited for, so it is an
// ordinary failure; save bounds lock waits well below the deadline, so a
// statement waiting on a lock fails with a lock timeout first.
func (e *extractWorker) fail(ctx context.Context, job *rivertype.JobRow, userID string, eventIDs []string, err error) error {
	b := e.w.budget()
	v := outcome(err, job, errors.Is(ctx.Err(), context.Canceled), b)
	v = countSnooze(ctx, job, err, v, b)
	if v.cause != nil {
		err = v.cause
	}
	// The job's own attempts, or this worker's for a job enqueued without
	// them (see jobAttempts).
	maxAttempts := jobAttempts(job.MaxAttempts, job.Metadata, b.maxAttempts)
	switch v.label {
	case outcomeLockWait:
		e.lockWaited(job, userID, eventIDs, v, b, err)
	case outcomeQueued:
		if v.aloneHold() {
			e.w.logger.Log(ctx, waitLevel(v.n, slog.LevelInfo), "extraction to be sent alone (the model server went down with it) waits for another job's request sent alone (in this serve or another); snoozing", "job_id", job.ID, "user_id", userID,
				"alone_holds", v.n, "max_alone_holds", b.maxAloneHolds, "turns", len(eventIDs), "retry_in", snoozeOf(v.river).String())
			break
		}
		// Like the waits for a server that is down (below): every wait at
		// info was a line per job every few seconds under a rate limit
		// (a retries walk: 291 lines for 66 jobs in 54 s of 429s).
		e.w.logger.Log(ctx, waitLevel(v.n, slog.LevelInfo), "extraction waited for this process's model request slots or rate limit; snoozing", "job_id", job.ID, "user_id", userID, "queue_waits", v.n,
			"max_queue_waits", b.maxQueueWaits, "turns", len(eventIDs), "retry_in", snoozeOf(v.river).String())
	case outcomeRateLimited:
		e.w.logger.Log(ctx, waitLevel(v.n, slog.LevelInfo), "model server rate limited extraction; snoozing", "job_id", job.ID, "user_id", userID, "rate_limit_waits", v.n,
			"max_rate_limit_waits", b.maxRateLimitWaits, "turns", len(eventIDs), "retry_in", snoozeOf(v.river).String(), "error", err)
	case outcomeModelDown, outcomeModelRefused:
		e.w.modelWaiting()
		// A warning at a job's first wait, so that an outage shows in the
		// log, and the job's later waits at debug: with a model every turn
		// is a job, so an outage of a minute at 3 turns a second logged
		// 178 warnings and 532 info lines of this (each job waits again
		// every few seconds). The warnings are in OutageRepeats, which the
		// process's log handler holds back to one every 30 s.
		msg := msgModelUnreachable
		if v.label == outcomeModelRefused {
			msg = msgModelRefuses
			e.w.modelRefusing.fail(err)
		} else {
			// The server's errors are no longer refusals (the key fixed,
			// and the server restarting): /readyz stops blaming the key.
			// Before, it did until the server answered.
			e.w.modelRefusing.end()
		}
		level, waits := waitLevel(v.n, slog.LevelWarn), "model_waits"
		if v.hold() {
			// Held back for this process's probe (outcome): woken, or
			// where the job may not wait (an attempt spent after its
			// holds is logged as such).
			level, waits = slog.LevelDebug, "woken_holds"
			if v.count == metaUnsentHolds {
				waits = "unsent_holds"
			}
		}
		e.w.logger.Log(ctx, level, msg, "job_id", job.ID, "user_id", userID,
			waits, v.n, "max_model_outage", b.maxModelOutage.String(), "turns", len(eventIDs), "retry_in", snoozeOf(v.river).String(), "error", err)
	case outcomeDBDown:
		// As for a model server that is down: a warning at a job's first
		// wait (held back to one every 30 s, OutageRepeats), later ones
		// at debug.
		msg := msgDBUnreachable
		switch {
		case store.IsDiskFull(err):
			msg = msgDBDiskFull
		case store.IsReadOnly(err):
			msg = msgDBReadOnly
		}
		e.w.logger.Log(ctx, waitLevel(v.n, slog.LevelWarn), msg, "job_id", job.ID, "user_id", userID,
			"db_waits", v.n, "max_db_outage", b.maxDBOutage.String(), "turns", len(eventIDs), "retry_in", snoozeOf(v.river).String(), "error", err)
	}
	end := &jobEnd{op: "extract", label: v.label, river: v.river, cause: err}
	if v.record {
		markCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), afterCancelTimeout)
		defer cancel()
		n, merr := e.w.cfg.Store.MarkJobFailed(markCtx, job.ID, userID, eventIDs, err.Error(), v.final)
		if merr != nil {
			e.w.logger.Error("cannot record extraction failure", "job_id", job.ID, "user_id", userID, "error", merr)
		} else if v.final {
			end.turns, end.marked = int(n), true
		}
		level, msg := e.w.logger.Warn, "extraction failed"
		switch {
		case v.final:
			level = e.w.logger.Error
		case extractor.IsUnreachable(err) && !isPermanent(err):
			e.w.modelFailing()
			// Past --llm-max-outage every job's attempt failed alike: a
			// crash-loop walk logged up to 320 of these a minute. A line
			// of its own, which the log handler holds back with the
			// outage lines; a turn failed for good is an error each.
			msg = msgModelUnreachableAttempts
			if extractor.IsMisconfigured(err) {
				// The server answers, refusing the key or the model: the
				// operator's to fix, not the server's to come back.
				msg = msgModelRefusesAttempts
			}
		}
		level(msg, "job_id", job.ID, "user_id", userID, "event_ids", logIDs(eventIDs), "attempt", job.Attempt, "max_attempts", maxAttempts,
			"final", v.final, "kind", kindName(err), "turns", len(eventIDs), "error", err)
	}
	return end
}

// lockWaited counts and logs a run snoozed for a lock wait (outcomeLockWait).
func (e *extractWorker) lockWaited(job *rivertype.JobRow, userID string, eventIDs []string, v verdict, b retryBudget, err error) {
	e.w.lockWaits.Add(1)
	e.w.logger.Info("extraction waited on a lock; retrying", "job_id", job.ID, "user_id", userID, "lock_waits", v.n,
		"max_lock_waits", b.maxLockWaits, "turns", len(eventIDs), "retry_in", snoozeOf(v.river).String(), "error", err)
}

// msgModelUnreachable is logged when an extraction job waits for a model
// server that does not answer (outcomeModelDown).
const msgModelUnreachable = "model server unreachable; extraction waiting for it without spending attempts"

// msgModelUnreachableAttempts is logged when an extraction job spends an
// attempt on a model server that does not answer: it waited
// --llm-max-outage for it (or may not wait).
const msgModelUnreachableAttempts = "model server unreachable past --llm-max-outage; extraction failed, spending attempts"

// msgModelRefusesAttempts is logged instead when the server refuses the
// configuration (extractor.IsMisconfigured).
const msgModelRefusesAttempts = "model server refuses memoryd's API key or model past --llm-max-outage (--llm-api-key or --llm-api-key-file, --llm-model, --llm-base-url); extraction failed, spending attempts"

// msgDBUnreachable is logged when an extraction job waits for Postgres
// (outcomeDBDown).
const msgDBUnreachable = "database unreachable; extraction waiting for it without spending attempts"

// msgDBDiskFull is logged instead when Postgres refuses the job's writes
// for a full disk (SQLSTATE 53100).
const msgDBDiskFull = "database disk full (Postgres cannot write: free space on its data volume); extraction waiting for it without spending attempts"

// msgDBReadOnly is logged instead when Postgres takes no writes
// (SQLSTATE 25006).
const msgDBReadOnly = "database takes no writes (a standby, or default_transaction_read_only); extraction waiting for it without spending attempts"

// msgModelRefuses is logged instead when the server refuses the
// configuration (a 401, 403 or 404: extractor.IsMisconfigured).
const msgModelRefuses = "model server refuses memoryd's API key or model (--llm-api-key or --llm-api-key-file, --llm-model, --llm-base-url); extraction waiting for it to be fixed without spending attempts"

// kindName is the extractor's kind of err for the log, "other" when the
// extractor did not fail (the store did, or the job's context ended).
func kindName(err error) string {
	if extractor.IsMisconfigured(err) {
		return "misconfigured"
	}
	if k := extractor.KindOf(err); k != 0 {
		return k.String()
	}
	return "other"
}

// maxLoggedIDs bounds the event ids a log line lists: a replay job holds
// up to a hundred turns.
const maxLoggedIDs = 10

// logIDs is ids, at most maxLoggedIDs of them ("turns" gives the count).
func logIDs(ids []string) []string {
	return ids[:min(len(ids), maxLoggedIDs)]
}

// snoozeOf returns the duration of a snooze error, or 0.
func snoozeOf(err error) time.Duration {
	var s *river.JobSnoozeError
	if errors.As(err, &s) {
		return s.Duration
	}
	return 0
}

// jitter spreads d by ±25%.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()-0.5)*0.5*float64(d))
}

// retryPolicy backs off exponentially from base, with ±25% jitter, capped,
// from Postgres's time by clock (which runs the retry by its own).
type retryPolicy struct {
	base, max time.Duration
	clock     *store.Clock
}

func (p *retryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	d := p.base << min(max(job.Attempt-1, 0), 20)
	if d <= 0 || d > p.max {
		d = p.max
	}
	return p.clock.Now().Add(jitter(d))
}

// waitLevel is the level of the log line of a job's nth free snooze of one
// kind: the first at first, the later ones at debug, since a job waits
// again every few seconds and each wait at info or above was a line per
// job that often.
func waitLevel(n int, first slog.Level) slog.Level {
	if n == 1 {
		return first
	}
	return slog.LevelDebug
}

// ModelRefusing reports the model server refusing memoryd's configuration
// (its API key, or the model: a 401, 403 or 404) since its first refusal
// that no answer followed, nil while it answers (or before it refused).
// Jobs wait meanwhile (--llm-max-outage), and nothing else shows it: a
// rotation walk revoked the key and /readyz said 200 for as long.
func (w *Worker) ModelRefusing() *Outage { return w.modelRefusing.load() }
