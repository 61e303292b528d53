package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
)

// Retries of extraction jobs are River's alone: the extractor makes one
// attempt per call and returns a typed *extractor.Error, and outcome, below,
// is the one place that turns a failed run into what River does next.
//
// River's semantics (v0.51) that this relies on:
//   - A returned error is an attempt: River records it in the job row's
//     errors and retries after the retry policy's backoff, until MaxAttempts.
//   - river.JobCancel records the error and ends the job at once.
//   - river.JobSnooze reschedules the job after the duration without
//     spending an attempt (River decrements Attempt again) and without
//     recording an error; River counts snoozes in the "snoozes" metadata
//     key. Since a snooze is free, every kind of snooze here is counted in
//     a key of its own and bounded, so that no server or lock can keep a
//     job forever.

// Observer outcomes; see Observer.Extracted.
const (
	outcomeProcessed   = "processed"
	outcomeRetry       = "retry"
	outcomeFailed      = "failed"
	outcomeHandedBack  = "handed_back"
	outcomeLockWait    = "lock_wait"
	outcomeRateLimited = "rate_limited"
	outcomeQueued      = "queued"
	outcomeModelDown   = "model_unreachable"
	// outcomeModelRefused is a wait like outcomeModelDown's for a server
	// that refuses memoryd's configuration (extractor.IsMisconfigured,
	// embedding.IsMisconfigured: its key, its model): an operator, not
	// time, ends it. The job reads as waiting for the server all the same
	// (metaSnoozedFor), and is woken alike.
	outcomeModelRefused = "model_refused"
	outcomeDBDown       = "db_unreachable"
	// Recovery's (recover.go, reconcile.go).
	outcomeTakenOver = "taken_over"
	outcomeDiscarded = "discarded"
	outcomeRequeued  = "requeued"
)

// ExtractOutcomes are every outcome Observer.Extracted reports, so that a
// metrics layer can show each at 0 before it first happens: an alert on
// the increase of a series that does not exist yet misses its first
// increment.
func ExtractOutcomes() []string {
	return []string{outcomeProcessed, outcomeRetry, outcomeFailed, outcomeHandedBack, outcomeLockWait,
		outcomeRateLimited, outcomeQueued, outcomeModelDown, outcomeModelRefused, outcomeDBDown, outcomeTakenOver, outcomeDiscarded, outcomeRequeued}
}

// Job metadata keys counting free snoozes, and the reason of the last one
// (a snooze records no error in the job row, so it goes there instead).
const (
	metaLockWaits      = "memoryd_lock_waits"
	metaRateLimitWaits = "memoryd_rate_limit_waits"
	metaQueueWaits     = "memoryd_queue_waits"
	metaModelWaits     = "memoryd_model_waits"
	metaDBWaits        = "memoryd_db_waits"
	metaSnoozeReason   = "memoryd_snooze_reason"
	// metaSnoozedFor is the outcome label of a job's last counted snooze
	// (outcomeModelDown: waiting for the model server, or for the
	// embeddings server for an embed job), so that the server's waiters
	// can be woken when it answers (wakeWaiters).
	metaSnoozedFor = "memoryd_snoozed_for"
	// metaWoken is true on a job woken from its snooze for the model
	// server or the embeddings server (store.WakeWaiting) until its next
	// run ends.
	metaWoken = "memoryd_woken"
	// metaWokenHolds counts a woken job's waits held back uncounted
	// (outcome), at most maxWokenHolds.
	metaWokenHolds = "memoryd_woken_holds"
	// metaUnsentHolds counts a job's runs whose request was held back
	// unsent when the job could not wait for the server (past
	// --llm-max-outage, or none), at most maxUnsentHolds (outcome).
	metaUnsentHolds = "memoryd_unsent_holds"
	// metaModelWaitMillis is the length in milliseconds of the snooze
	// for the model server a job is in (0 once a wake credited it, or for
	// a snooze not counted), and metaModelUnwaitedMillis what was counted
	// of such snoozes and not waited, in all (their spread, and what
	// wakes cut short): a job's waits count toward
	// --llm-max-outage as long as they lasted, not as long as they were
	// to last (retryBudget.modelWait, store.WakeWaiting).
	metaModelWaitMillis     = "memoryd_model_wait_ms"
	metaModelUnwaitedMillis = "memoryd_model_unwaited_ms"
	// metaDBUnwaitedMillis is metaModelUnwaitedMillis for the snoozes
	// for an unreachable database (their spread: nothing wakes them), by
	// which maxDBOutage moves (retryBudget.dbWait).
	metaDBUnwaitedMillis = "memoryd_db_unwaited_ms"
	// metaWakes counts a job's wakes from its counted waits (not from
	// holds: store.Wake.CountKey), at most maxWakes, one for all the
	// wakes within wakeCountEvery of the last one counted, which
	// metaWakeCountedAt dates.
	metaWakes         = "memoryd_wakes"
	metaWakeCountedAt = "memoryd_wake_counted_at"
	// metaModelCrashes counts the runs of a job whose request the model
	// server went down with (extractor.IsCrashed), at most maxCrashes.
	metaModelCrashes = "memoryd_model_crashes"
	// metaInvalidReply is the extractor.ReplyDigestOf of the job's last
	// attempt that failed with invalid output: the same digest at a later
	// attempt is the model repeating its replies to the same request
	// (outcome).
	metaInvalidReply = "memoryd_invalid_reply"
	// metaBurstSplit is true on a conversation's burst job whose request
	// got invalid replies at two attempts (the same: metaInvalidReply, or
	// not: metaBurstInvalid, or another job's: the turns' attempts that
	// failed so, invalidReplies) or at its last (splits): its turns are sent one a request from then on, each by a
	// job of its own (workBurst), which carries it too, and which claims
	// its own turns alone.
	metaBurstSplit = "memoryd_burst_split"
	// metaBurstInvalid is true on a conversation's burst job whose request
	// got invalid replies at an attempt: at a second, whatever the
	// replies, its turns are sent one a request (workBurst). The digest
	// alone missed a sampling model's, whose short replies have none.
	metaBurstInvalid = "memoryd_burst_invalid"
	// metaAloneHolds counts a job's runs held back unsent because another
	// serve was sending a request alone (errAloneElsewhere), at most
	// maxAloneHolds.
	metaAloneHolds = "memoryd_alone_holds"
)

// errAloneElsewhere is a run's error when its request, to be sent alone
// (the model server went down with it: metaModelCrashes), was held back
// unsent because a request of another serve of the deployment is being
// sent alone (modelAloneLock): outcome snoozes the job without spending
// an attempt, at most maxAloneHolds times.
var errAloneElsewhere = errors.New("another job, in this serve or another, is sending its request alone to the model server (one it went down with); this one, to be sent alone too, waits its turn")

// maxAloneHolds bounds the runs of a job held back for another serve's
// request sent alone (errAloneElsewhere), snoozed lockWaitBase doubling up
// to maxAloneWait (about 9.5 minutes in all with the default
// JobRetryBase, 2 s: lockWaitBase 1 s): enough for the requests a crash
// cut on every serve (serves × --llm-concurrency of them) to be sent
// again one at a time, in no set order, each taking up to a model call's
// time (12, about a minute and a half, would have let a busy crash's last
// ones fall back).
// Past it the job's request is sent alone in its own serve only, as
// before there was a lock (extract.go).
const maxAloneHolds = 60

// maxAloneWait caps one snooze of a job held back for another serve's
// request sent alone: that request ends within --llm-timeout.
const maxAloneWait = 10 * time.Second

// snoozedForAlone is what metaSnoozedFor says of a job held back for
// another job's request sent alone (errAloneElsewhere), which that job
// wakes when it lets the lock go (aloneInDeployment).
const snoozedForAlone = "queued_for_alone"

// snoozedAfterCrash is what metaSnoozedFor says of a job waiting for the
// model server after it went down with the job's request in flight:
// nothing wakes it (wakeWaiters wakes outcomeModelDown), so it comes back
// when its snooze ends, spread at random, and not in step with every job
// the server cut with it.
const snoozedAfterCrash = "model_unreachable_after_crash"

// maxCrashes is how many times the model server may go down with a job's
// request in flight (cut mid-request, then refusing connections:
// extractor.IsCrashed) before the job's turns fail for good, whatever
// attempts are left. A supervised server (vLLM, llama.cpp under systemd or
// Kubernetes) that crashes on one input is restarted, and without a bound
// of its own that input was sent at every attempt (--max-attempts: 5 by
// default, as many restarts, each an outage for every user: a crash-loop
// test). Two, not one: a crash cuts every request in flight, so one cut
// says nothing of which brought it down; the jobs cut with it are not
// woken with the others (snoozedAfterCrash), which makes an innocent
// request's being in flight at a second crash of the same input unlikely.
const maxCrashes = 2

// crashedReason begins the error of turns failed for maxCrashes (outcome):
// RetryFailed leaves them out unless asked.
const crashedReason = "the model server went down with this turn's request in flight"

// maxWakes bounds how often a job is woken (wakeWaiters); past it
// the job waits its snoozes out. A job whose own request the server fails
// while it answers the others (a gateway's 502 for that one prompt) was
// otherwise run at every wake, about once a second, and with its waits
// counted as long as they lasted (modelWait) for all of
// --llm-max-outage: some 1,800 requests where its doubling snoozes make
// about 35. A real outage wakes a job once, a crash loop once an answer:
// the wakes that follow an answer for wakeLinger, and those of other
// serves, count as one when within wakeCountEvery (so a job the server
// fails alone is run about once a second for some 40 s, then waits its
// snoozes out), and the wakes that end a woken job's holds
// (maxWokenHolds: another process yet to see the server answer) are not
// counted, since a hold sends no request.
const (
	maxWakes       = 5
	wakeCountEvery = 10 * time.Second
)

// maxWokenHolds bounds the waits of a woken job that are not counted
// toward --llm-max-outage: a wake sets metaWoken again, and a process
// that answers and snoozes in turn beside one that holds back could
// otherwise keep a job waiting uncounted.
const maxWokenHolds = 3

// maxUnsentHolds bounds the runs of a job that may not wait for the
// server (past --llm-max-outage, or none) whose request was held back
// unsent and spent no attempt (outcome): enough for the probe then due to
// be answered, and a job meeting a server still down ends after its
// attempts, a few probe gaps later than it did.
const maxUnsentHolds = 3

// maxSnoozeReason bounds the reason stored in a job's metadata: River
// saves the metadata with every snooze, and an error may quote a long
// server message.
const maxSnoozeReason = 512

// snoozeReason is err's message, at most maxSnoozeReason bytes of it (cut
// at a rune boundary).
func snoozeReason(err error) string {
	msg := err.Error()
	if len(msg) <= maxSnoozeReason {
		return msg
	}
	cut := maxSnoozeReason - len("…")
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}

// retryBudget is what outcome needs of the worker's configuration.
type retryBudget struct {
	// maxAttempts is Config.MaxAttempts; it caps the job's own MaxAttempts
	// (jobs inserted with River's default carry more).
	maxAttempts int
	// maxLockWaits, maxRateLimitWaits and maxQueueWaits bound the free
	// snoozes of a job (Config.MaxLockWaits, Config.MaxRateLimitWaits,
	// Config.MaxQueueWaits).
	maxLockWaits, maxRateLimitWaits, maxQueueWaits int
	// lockWaitBase is the first lock-wait snooze; it doubles per wait, up
	// to 30s.
	lockWaitBase time.Duration
	// maxModelOutage is Config.MaxModelOutage: how long in all a job's
	// snoozes for an unreachable model server may last (see modelWait);
	// negative for none.
	maxModelOutage time.Duration
	// maxUnsentHolds bounds a job's runs held back unsent where it may not
	// wait (outcome): the constant maxUnsentHolds, 0 where a snooze cannot
	// be counted (countSnooze).
	maxUnsentHolds int
	// maxDBOutage is how long in all a job's snoozes for an unreachable
	// database may last (dbUnreachable; maxDBOutage; see dbWait); 0 for
	// none.
	maxDBOutage time.Duration
	// maxAloneHolds bounds a job's runs held back for another serve's
	// request sent alone (errAloneElsewhere): the constant maxAloneHolds,
	// 0 where a snooze cannot be counted (countSnooze).
	maxAloneHolds int
	// modelWaitBase is the first snooze for an unreachable model server
	// (and an unreachable database); it doubles per wait, up to
	// maxModelWait.
	modelWaitBase time.Duration
	// spread lengthens a snooze by a random part, so that jobs snoozed
	// together do not all come back at once; identity in tests.
	spread func(time.Duration) time.Duration
}

// budget returns the worker's retryBudget.
func (w *Worker) budget() retryBudget {
	return retryBudget{
		maxAttempts:       w.cfg.MaxAttempts,
		maxLockWaits:      w.cfg.MaxLockWaits,
		maxRateLimitWaits: w.cfg.MaxRateLimitWaits,
		maxQueueWaits:     w.cfg.MaxQueueWaits,
		lockWaitBase:      min(w.cfg.JobRetryBase, time.Second),
		maxModelOutage:    w.cfg.MaxModelOutage,
		maxUnsentHolds:    maxUnsentHolds,
		maxDBOutage:       maxDBOutage,
		maxAloneHolds:     maxAloneHolds,
		modelWaitBase:     w.cfg.JobRetryBase,
		spread:            spread,
	}
}

// verdict is what outcome decided for a failed run.
type verdict struct {
	// river is what the run returns to River: a *river.JobSnoozeError, a
	// *river.JobCancelError, or a plain error (an attempt, retried with
	// River's backoff).
	river error
	// label is the run's Observer outcome.
	label string
	// crashes, when above 0, is the job's new count of runs the model
	// server went down with (metaModelCrashes).
	crashes int
	// cause, when set, is the error to record and log instead of the
	// run's own (a turn failed for its crashes says so).
	cause error
	// invalidReply, when set, is the digest of the run's invalid output
	// (metaInvalidReply), kept for the next attempt.
	invalidReply string
	// record says to record the error on the turns (store.MarkFailed); a
	// snooze leaves them pending without one. final marks them failed for
	// good.
	record, final bool
	// count is the metadata key of the snooze counter to set to n, or "".
	count string
	n     int
	// wait is the length of a counted snooze for the model server or
	// the database as counted toward its bound (--llm-max-outage,
	// maxDBOutage: modelWait, dbWait): the snooze itself is shorter by
	// its spread (spreadBelow), and countSnooze credits the difference to the
	// job's metadata at unwaited (metaModelUnwaitedMillis,
	// metaDBUnwaitedMillis), so that the job's waits add up to the bound
	// of real time.
	wait     time.Duration
	unwaited string
}

// waitsForServer reports whether v snoozes a job for the model server or
// the embeddings server, down or refusing the configuration: the waits a
// wake ends (wakeWaiters).
func (v verdict) waitsForServer() bool {
	return v.label == outcomeModelDown || v.label == outcomeModelRefused
}

// hold reports whether v snoozes a job whose request was held back unsent
// without counting it as a wait for the server (metaWokenHolds,
// metaUnsentHolds): logged at debug, since it sent nothing.
func (v verdict) hold() bool { return v.count == metaWokenHolds || v.count == metaUnsentHolds }

// aloneHold reports whether v snoozes a job held back for another serve's
// request sent alone (errAloneElsewhere).
func (v verdict) aloneHold() bool { return v.count == metaAloneHolds }

// rateLimitBackoffMax bounds the doubling of a job's waits on a server's
// 429s (outcome); a longer Retry-After is honoured as given.
const rateLimitBackoffMax = time.Minute

// outcome is the one place that decides what River does with a failed run
// of an extraction job or an embed job (embed.go), from the error and the
// job's row; the embedding client's kinds (embedding.Kind) count as the
// extractor's of the same name. A run that panicked (lastAttemptHandler)
// or whose process stopped during it (takeOverWith) is decided here too,
// as an error of no kind. It changes nothing itself (fail and countSnooze
// apply its verdict), so a burst asks it whether invalid replies would fail
// its turns for good (splits). In order:
//
//   - shutdown (the run's context was cancelled): snooze 1s, handing the
//     job back without spending an attempt.
//   - a lock timeout or deadlock (store.IsLockWait), fewer than
//     maxLockWaits times: snooze with a short, doubling delay.
//   - a request held back unsent for another serve's request sent alone
//     (errAloneElsewhere), fewer than maxAloneHolds times: snooze as for a
//     lock wait, up to maxAloneWait, labelled outcomeQueued (the request
//     waits its turn at the model server).
//   - extractor.KindRetryAfter (and no extractor.KindPermanent anywhere in
//     the error), fewer than maxRateLimitWaits times: snooze
//     for the server's delay (at most extractor.MaxRetryAfter), and no
//     less than 1s, 2s, 4s, ... as the job's waits go on (up to a
//     minute: rateLimitBackoffMax). Past the
//     bound it is an ordinary transient failure, which spends attempts, so
//     a server that always answers 429 ends the job after MaxAttempts.
//   - an unreachable model server (extractor.IsUnreachable: no connection,
//     or a 502, 503 or 504; or one refusing memoryd's key or model, a 401
//     or 404), or an unreachable embeddings server for an embed job
//     (embedding.IsUnreachable: no connection, or a 502, 503 or 504; or
//     one refusing memoryd's key or model, a 401 or 404, and a 403 to
//     two requests of no text in common in a row: embedding.IsMisconfigured), and
//     no permanent error anywhere in the error, while the job's snoozes for it total less than
//     maxModelOutage, as long as they lasted (the parts wakes cut short
//     not counted): snooze with a doubling delay (modelWait). A server
//     restarting or loading a model fails every request for minutes;
//     spending attempts then would fail every turn of the outage. Past the
//     bound (or with maxModelOutage negative) a request held back unsent
//     (heldBackFor) still spends no attempt, fewer than maxUnsentHolds
//     times: snooze until the client's next probe is due; otherwise it is
//     an ordinary transient failure.
//   - an unreachable database (dbUnreachable: the job's connection refused,
//     cut or terminated, the server shutting down or starting, out of
//     connection slots, 53300, out of disk space, 53100, or taking no
//     writes, 25006) while the job's snoozes for it total less
//     than maxDBOutage, as long as they lasted: snooze as for a model
//     server (dbWait). The turn is not
//     at fault: before, each such run spent an attempt, and a minute of
//     "too many clients" (River fetching on the connections it held, the
//     job unable to open one) failed turns for good with --max-attempts 3
//     (a Postgres walk: 15 of 1,480 turns), a restart or a terminated
//     backend one attempt each.
//   - a request the model server went down with (extractor.IsCrashed: cut
//     mid-request, then connections refused) for the maxCrashes-th time
//     (metaModelCrashes): river.JobCancel, the turns failed for good with
//     a reason saying so; before that, an attempt spent as below, the
//     count kept, and the job's next request sent alone (extract.go; a
//     conversation's burst then sends its turns one a request, each
//     alone, so that the second crash fails the turn that causes it and
//     not the whole burst: workBurst).
//   - extractor.KindPermanent anywhere in the error, or the job's last attempt
//     (attemptsLeft 0): river.JobCancel,
//     and the turns are marked failed for good (memoryd failed lists them;
//     RetryFailed re-runs them).
//   - extractor.KindInvalidOutput whose replies are those of an earlier
//     attempt, to the same request (extractor.ReplyDigestOf equal to the
//     job's metaInvalidReply): river.JobCancel, the turns failed for good
//     with a reason saying so (repeatedReplyReason). A model that answers
//     a prompt one way (a local model at temperature 0) repeats its
//     mistake at every attempt: before, each spent two calls, ten for a
//     turn with --max-attempts 5, where two attempts (four calls) show
//     it. (A conversation's burst whose one request repeats its replies,
//     or gets invalid ones at two attempts, of any job of its turns, or
//     at its job's last, is not failed: workBurst sends its turns one a
//     request instead.)
//   - anything else: the error itself, so that River retries with its
//     backoff. That includes extractor.KindTransient, errors that are not
//     the extractor's (Postgres refusing a statement), and extractor.KindInvalidOutput
//     of other replies (its digest kept in metaInvalidReply): the
//     model already had its one correction within the attempt, but a model
//     call is not deterministic (sampling, a server under load truncating
//     its reply, a model swapped behind the same name), and the attempt
//     budget bounds the cost at two calls per attempt.
func outcome(err error, job *rivertype.JobRow, shutdown bool, b retryBudget) verdict {
	if shutdown {
		return verdict{river: river.JobSnooze(time.Second), label: outcomeHandedBack}
	}
	if waits := metaCount(job.Metadata, metaLockWaits); store.IsLockWait(err) && waits < b.maxLockWaits {
		d := b.spreadWithin(b.lockWaitBase<<min(waits, 5), maxLockWait)
		return verdict{river: river.JobSnooze(d), label: outcomeLockWait, count: metaLockWaits, n: waits + 1}
	}
	if holds := metaCount(job.Metadata, metaAloneHolds); errors.Is(err, errAloneElsewhere) && holds < b.maxAloneHolds {
		d := b.spreadWithin(b.lockWaitBase<<min(holds, 5), maxAloneWait)
		return verdict{river: river.JobSnooze(d), label: outcomeQueued, count: metaAloneHolds, n: holds + 1}
	}
	// Any permanent error in the tree decides: a joined error of several
	// turns must not be snoozed or retried for one that cannot succeed.
	permanent := isPermanent(err)
	if d, ok := retryAfterOf(err); ok && !permanent {
		// A wait for this process's own model limits (nothing was sent;
		// the jobs ahead are being served) has a budget of its own, apart
		// from the server's rate limits.
		label, key, budget := outcomeRateLimited, metaRateLimitWaits, b.maxRateLimitWaits
		if extractor.IsLocalWait(err) {
			label, key, budget = outcomeQueued, metaQueueWaits, b.maxQueueWaits
		}
		if waits := metaCount(job.Metadata, key); waits < budget {
			if key == metaRateLimitWaits {
				// A server still refusing after the delay it asked for
				// (or 1s, without a Retry-After) is waited for longer each
				// time, up to a minute, the window most rate limits count
				// in: at 1s each the job's waits ended within some 10 s
				// of 429s, and every turn spent its attempts (a walk:
				// 12 of 12 failed in 81 s).
				d = max(d, min(time.Second<<min(waits, 6), rateLimitBackoffMax))
			}
			d = b.spreadWithin(d, min(extractor.MaxRetryAfter, embedding.MaxRetryAfter))
			return verdict{river: river.JobSnooze(d), label: label, count: key, n: waits + 1}
		}
	}
	if waits := metaCount(job.Metadata, metaModelWaits); serverDown(err) && !permanent {
		waited := outcomeModelDown
		if extractor.IsMisconfigured(err) || embedding.IsMisconfigured(err) {
			waited = outcomeModelRefused
		}
		if d, ok := b.modelWait(waits, job.Metadata); ok {
			if probeIn, held := heldBackFor(err); held && metaTrue(job.Metadata, metaWoken) {
				if holds := metaCount(job.Metadata, metaWokenHolds); holds < maxWokenHolds {
					// Woken because the server answered another process
					// (or this one, just before it learnt so), and held
					// back by this process, which has yet to see it
					// answer: its probe is due within probeIn, so the job
					// waits that long rather than a whole snooze (up to a
					// minute), and the wait is not counted as one for the
					// server (the job did not find it down) but as a hold,
					// a few of which a job may have: each wake sets
					// metaWoken again.
					return verdict{river: river.JobSnooze(b.spreadWithin(max(probeIn, minWokenWait), d)), label: waited, count: metaWokenHolds, n: holds + 1}
				}
			}
			return verdict{river: river.JobSnooze(b.spreadBelow(d)), label: waited, count: metaModelWaits, n: waits + 1,
				wait: d, unwaited: metaModelUnwaitedMillis}
		}
		if probeIn, held := heldBackFor(err); held {
			if holds := metaCount(job.Metadata, metaUnsentHolds); holds < b.maxUnsentHolds {
				// Past the outage bound, or with no waiting
				// (--llm-max-outage negative): the request was not sent,
				// so it is no attempt; the job waits for the probe due
				// within probeIn, whose outcome says whether the server
				// is still down (its wake runs the job at once if not).
				// Before, a turn retried with retry-failed just after
				// the server was fixed, the process yet to probe it,
				// spent its attempt unsent and failed again.
				return verdict{river: river.JobSnooze(b.spreadWithin(max(probeIn, minWokenWait), maxModelWait)), label: waited,
					count: metaUnsentHolds, n: holds + 1}
			}
		}
	}
	if waits := metaCount(job.Metadata, metaDBWaits); dbUnreachable(err) && !permanent {
		if d, ok := b.dbWait(waits, job.Metadata); ok {
			return verdict{river: river.JobSnooze(b.spreadBelow(d)), label: outcomeDBDown, count: metaDBWaits, n: waits + 1,
				wait: d, unwaited: metaDBUnwaitedMillis}
		}
	}
	var crashes int
	if extractor.IsCrashed(err) && !permanent {
		if crashes = metaCount(job.Metadata, metaModelCrashes) + 1; crashes >= maxCrashes {
			cause := fmt.Errorf(crashedReason+" %d times: taken for a failure of the turn's own (an input that crashes the server?), not retried: %w", crashes, err)
			return verdict{river: river.JobCancel(cause), label: outcomeFailed, record: true, final: true, crashes: crashes, cause: cause}
		}
	}
	digest := replyDigestOf(err)
	if repeatsInvalidReply(err, job) {
		cause := fmt.Errorf(repeatedReplyReason+", not retried (it fails alike until --llm-model, its server's settings or --llm-response-format change; then memoryd retry-failed): %w", err)
		return verdict{river: river.JobCancel(cause), label: outcomeFailed, record: true, final: true, crashes: crashes, cause: cause}
	}
	if permanent || b.attemptsLeft(job) == 0 {
		return verdict{river: river.JobCancel(err), label: outcomeFailed, record: true, final: true, crashes: crashes}
	}
	return verdict{river: err, label: outcomeRetry, record: true, crashes: crashes, invalidReply: digest}
}

// attemptsLeft is how many attempts job has after the run that is ending:
// the attempts it runs (jobAttempts: its own, or the worker's) less
// River's count, this run's included; 0 on its last. outcome alone tells
// a last attempt by it, for every way a run ends: an error (fail), a panic
// (lastAttemptHandler), a process that stopped during it (takeOverWith),
// and a burst's invalid replies (splits), which ask outcome.
func (b retryBudget) attemptsLeft(job *rivertype.JobRow) int {
	return max(jobAttempts(job.MaxAttempts, job.Metadata, b.maxAttempts)-job.Attempt, 0)
}

// takenAttemptsLeft is how many attempts a job that a takeover ends has
// left after the run it ends (j.Attempt, given back already for a fetch
// that was lost): attemptsLeft's, for the kinds whose runs outcome ends
// (extraction, embed and chunk embed jobs), so that a replacement runs
// the attempts the job's own failed run would have left it (an embed job
// enqueued without memoryd's source, by an older memoryd, runs the
// worker's attempts within its own, jobAttempts: its replacement had all
// of its own); River's count for the others (document chunking, which
// River retries as it is). takeOverWith replaces a job with these, or
// ends it on none (TestTakenOverJobsAttemptsLeft).
func (b retryBudget) takenAttemptsLeft(j store.TakenJob) int {
	switch j.Kind {
	case ExtractJobKind, EmbedJobKind, ChunkEmbedJobKind:
		return b.attemptsLeft(takenRow(j))
	}
	return max(j.MaxAttempts-j.Attempt, 0)
}

// takenRow is a job a takeover ends as outcome reads a job.
func takenRow(j store.TakenJob) *rivertype.JobRow {
	return &rivertype.JobRow{ID: j.ID, Kind: j.Kind, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, Metadata: j.Metadata}
}

// repeatsInvalidReply reports whether err, a failed run's, is invalid
// output with the replies of the job's last attempt that failed so, to the
// same request (metaInvalidReply), and nothing permanent.
func repeatsInvalidReply(err error, job *rivertype.JobRow) bool {
	digest := replyDigestOf(err)
	return digest != "" && !isPermanent(err) && digest == metaString(job.Metadata, metaInvalidReply)
}

// repliesError is the error of a job several of whose turns failed
// (extractEach): the worst of their errors (worse), which outcome decides
// by, but for its ReplyDigest: digest stands for every failed turn's
// replies, "" unless each failed with invalid output of its own digest.
// The worst is the first turn's among equals, and a digest of its alone
// cancelled the job when that turn repeated its replies, failing for good
// the others with it: a turn whose replies differed at each attempt, or
// that met a 500, which a later attempt would have extracted.
type repliesError struct {
	error
	digest string
}

func (e *repliesError) Unwrap() error { return e.error }

// repliesOf is err, the worst error of a job's failed turns (their event
// ids failed, and the extractor.ReplyDigestOf of each turn's error,
// digests), with the digest of them all when there are several: a
// repeat is of every failed turn's replies, or none.
func repliesOf(err error, failed, digests []string) error {
	if len(failed) < 2 || len(digests) != len(failed) {
		return err
	}
	h := sha256.New()
	for i, d := range digests {
		if d == "" {
			return &repliesError{error: err}
		}
		fmt.Fprintf(h, "%d:%s=%s\n", len(failed[i]), failed[i], d)
	}
	return &repliesError{error: err, digest: hex.EncodeToString(h.Sum(nil)[:16])}
}

// replyDigestOf is the digest outcome compares with the job's
// metaInvalidReply: a repliesError's, or the extractor's of err.
func replyDigestOf(err error) string {
	if r := (*repliesError)(nil); errors.As(err, &r) {
		return r.digest
	}
	return extractor.ReplyDigestOf(err)
}

// repeatedReplyReason begins the error of turns failed because the model
// gave the same invalid replies to the same request at two attempts
// (outcome). The error goes on to name what mends the turn: memoryd failed
// shows it, and retry-failed alone fails it alike (an operations walk: the
// error said only "not retried").
const repeatedReplyReason = "the model gave the same invalid replies to the same request as at an earlier attempt"

// metaString reads a string from a job's metadata; absent or not a string
// reads as "".
func metaString(metadata []byte, key string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(metadata, &m) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(m[key], &s) != nil {
		return ""
	}
	return s
}

// maxDBOutage bounds the snoozes of one job for an unreachable database,
// as long as they lasted (dbWait): past it the job spends attempts again,
// so that no job waits forever. Five minutes covers a restart or a
// failover (9 snoozes: 2, 4, 8, 16, 32 s, then a minute; up to 11 with
// their spread credited). Not more: a run that meets the database only at
// its save has asked the model already, so in an outage that lets reads
// through every snooze costs a model call (a review: 30 minutes was up to
// 39 calls a turn where 5 attempts make 5), and the tokens of calls whose
// usage cannot be saved do not count toward the spend caps.
const maxDBOutage = 5 * time.Minute

// dbUnreachable reports whether err says the job could not reach Postgres
// rather than that Postgres refused its statements: a connection that
// could not be made (connection refused, the server shutting down or
// starting, 57P03, or out of connection slots, 53300), or one lost under
// it (terminated by an administrator or a restart, 57P01/57P02, class 08,
// a connection closed or cut). A full disk (53100 disk_full, "could not
// extend file ...: No space left on device") counts too: the server
// refuses every write, not the turn, and takes them again once space is
// freed (a disk-full walk: with attempts spent, a job ran its 5 attempts
// in 30 s of a full disk and was cancelled; its turns ended failed where
// the failure could be recorded). An error of the model or embedding server
// (extractor.Error, embedding.Error, which may wrap a network error of
// their own) is not: outcome decides those by their kind. A missing
// database (3D000) is not either: waiting does not mend it. A new
// connection refused for its credentials (28P01 a password, 28000 a
// client certificate or pg_hba.conf) is: the pool's live connections run
// on meanwhile, and the store reads the password file and certificates
// again for each new connection, so an operator rotating them mends it
// without a restart (a rotation walk: as the pool replaced connections
// after a password rotation, 18 jobs spent 25 attempts in 15 s). An
// authentication error on a connection already made is not a
// connection's and spends an attempt.
func dbUnreachable(err error) bool {
	if extractor.KindOf(err) != 0 || embedding.KindOf(err) != 0 {
		return false
	}
	var (
		pgErr      *pgconn.PgError
		connectErr *pgconn.ConnectError
		netErr     *net.OpError
	)
	if errors.As(err, &pgErr) {
		// Not 08P01 (a protocol violation) or 57P04 (the database was
		// dropped): waiting mends neither.
		c := pgErr.Code
		// A database that takes no writes (a standby after a failover,
		// or set read-only), as ingest's unreachable reads it.
		if (strings.HasPrefix(c, "08") && c != "08P01") || (strings.HasPrefix(c, "57P") && c != "57P04") || c == "53300" || store.IsReadOnly(err) || store.IsDiskFull(err) {
			return true
		}
		// A connection the server (or a pooler) answered with another
		// error, but for the role's privileges (42: no CONNECT privilege)
		// or a missing database: a server on a full disk refuses every
		// new connection with XX000 "could not write init file" (a
		// disk-full walk), PgBouncer a full pool with 08P01 "no more
		// connections allowed", and a rotation in progress the
		// credentials (28, above): passing states, not the job's.
		return errors.As(err, &connectErr) && !strings.HasPrefix(c, "42") && c != "3D000" && c != "57P04"
	}
	return errors.As(err, &connectErr) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &netErr)
}

// maxModelWait caps one snooze for an unreachable model server: a server
// back up is used again within a minute.
const maxModelWait = time.Minute

// maxLockWait caps one snooze for a lock wait.
const maxLockWait = 30 * time.Second

// modelWait returns the snooze after waits earlier ones for an unreachable
// model server, for a job of the given metadata: modelWaitBase doubling
// per wait up to maxModelWait, the last one cut so that the snoozes total
// maxModelOutage exactly, and false once they do. (Before, the last
// doubling went past it: with --llm-max-outage 40s the waits were
// 2+4+8+16+32 s.) The bound is lengthened by what the job's metadata
// records as counted and not waited (metaModelUnwaitedMillis: the spread
// that shortened its snoozes, spreadBelow, and what wakes cut short), so
// that its waits add up to maxModelOutage of real time. Before, a job
// woken early had its snooze counted whole: with a server that answered
// now and then (crash-looping, each answer waking the waiting jobs to
// find it down again) a job spent --llm-max-outage in a fraction of that
// time and then its attempts.
func (b retryBudget) modelWait(waits int, metadata []byte) (time.Duration, bool) {
	return b.creditedWait(waits, b.maxModelOutage, metadata, metaModelUnwaitedMillis)
}

// dbWait is modelWait for an unreachable database: the bound is
// maxDBOutage, lengthened by metaDBUnwaitedMillis (the spread that
// shortened the job's snoozes). Before, the spread counted as waited, so
// a job's waits lasted 0.75 to 1 times maxDBOutage of real time.
func (b retryBudget) dbWait(waits int, metadata []byte) (time.Duration, bool) {
	return b.creditedWait(waits, b.maxDBOutage, metadata, metaDBUnwaitedMillis)
}

// creditedWait is outageWait for a bound of maxOutage lengthened by the
// milliseconds a job's metadata holds at unwaitedKey; none when
// maxOutage is not above 0, whatever the credit (countSnooze decides with the
// bounds at 0 when it cannot count a snooze).
func (b retryBudget) creditedWait(waits int, maxOutage time.Duration, metadata []byte, unwaitedKey string) (time.Duration, bool) {
	if maxOutage <= 0 {
		return 0, false
	}
	return b.outageWait(waits, maxOutage+time.Duration(metaCount(metadata, unwaitedKey))*time.Millisecond)
}

// outageWait is modelWait for an outage of at most maxOutage in all (a
// model server's, or the database's: dbUnreachable).
func (b retryBudget) outageWait(waits int, maxOutage time.Duration) (time.Duration, bool) {
	if maxOutage <= 0 || b.modelWaitBase <= 0 {
		return 0, false
	}
	var total time.Duration
	for i := 0; ; i++ {
		if total >= maxOutage {
			return 0, false
		}
		// Doubled only while under maxModelWait: base<<i overflows
		// (a base over ~8.6s at i = 30) and a negative d never ends.
		d := maxModelWait
		if i < 30 && b.modelWaitBase <= maxModelWait>>i {
			d = b.modelWaitBase << i
		}
		d = min(d, maxOutage-total)
		if i == waits {
			return d, true
		}
		total += d
	}
}

// spreadWithin is the snooze for a delay d of which limit is the most
// waited: d spread (lengthened by up to a quarter), but never past limit.
// A d at or over limit (a server asking for an hour) is cut to limit and
// then spread below it, so that jobs snoozed together still come back
// apart. Before, the spread came after the cap: a 429 with Retry-After
// 3600 snoozed jobs for up to 12.5 minutes, not the documented 10. A d
// less than a quarter under limit has its spread scaled into the room
// left, not cut at limit: cut, most of the jobs paused together came back
// at limit together (a misbehaving-model walk: 4 of 6 at exactly 10m).
func (b retryBudget) spreadWithin(d, limit time.Duration) time.Duration {
	if d >= limit {
		return b.spreadBelow(limit)
	}
	extra, most := b.spread(d)-d, d/4
	if room := limit - d; most > room && most > 0 {
		extra = time.Duration(float64(extra) * float64(room) / float64(most))
	}
	return min(d+extra, limit)
}

// spreadBelow is d shortened by what spread would lengthen it by.
func (b retryBudget) spreadBelow(d time.Duration) time.Duration {
	return max(d-(b.spread(d)-d), 0)
}

// serverDown reports whether err says the model server (extractor.IsUnreachable)
// or the embeddings server (embedding.IsUnreachable) is down: the job
// waits for it (outcome). Before, an embed job spent an attempt on each
// failure of an embeddings server that was down, and waited out River's
// backoff after it was back (up to 10 minutes), or was given up after 10.
func serverDown(err error) bool {
	return extractor.IsUnreachable(err) || embedding.IsUnreachable(err)
}

// heldBackFor is extractor.HeldBackFor or embedding.HeldBackFor: a
// request not sent because its server counts as down, and how long until
// the client's next probe.
func heldBackFor(err error) (time.Duration, bool) {
	if d, ok := extractor.HeldBackFor(err); ok {
		return d, true
	}
	return embedding.HeldBackFor(err)
}

// isPermanent reports whether err holds a permanent error of the extractor
// or of the embedding client (embed jobs go through outcome too).
func isPermanent(err error) bool {
	return errors.Is(err, extractor.ErrPermanent) || errors.Is(err, embedding.ErrPermanent)
}

// retryAfterOf is the server's delay of an extractor or embedding error of
// the retry-after kind.
func retryAfterOf(err error) (time.Duration, bool) {
	if d, ok := extractor.RetryAfterOf(err); ok {
		return d, true
	}
	return embedding.RetryAfterOf(err)
}

// worse returns whichever of two turns' errors should decide for a job that
// extracts several turns: a permanent error over any other, so that a
// batch with a permanently failing turn is not retried for it, and any
// other over a retry-after, so that a failure spends an attempt rather than
// hide behind a free snooze.
func worse(have, next error) error {
	rank := func(err error) int {
		switch {
		case errors.Is(err, extractor.ErrPermanent):
			return 2
		case errors.Is(err, extractor.ErrRetryAfter):
			return 0
		}
		return 1
	}
	if have == nil || rank(next) > rank(have) {
		return next
	}
	return have
}

// callTimeout is the longest one call of ext may take (*extractor.LLM's
// CallTimeout), or 0 when it does not say.
func callTimeout(ext Extractor) time.Duration {
	if t, ok := ext.(interface{ CallTimeout() time.Duration }); ok {
		return t.CallTimeout()
	}
	return 0
}

// embedCallTimeout is the longest one embed job's attempt may wait on the
// embeddings server: its request (*embedding.Client's Timeout) and, when
// that fails, the control request; 0 when emb does not say its timeout.
func embedCallTimeout(emb Embedder) time.Duration {
	if t, ok := emb.(interface{ Timeout() time.Duration }); ok {
		return t.Timeout() + controlTimeout
	}
	return 0
}

// minWokenWait is the shortest wait of a woken job held back (outcome):
// the probe that let the others through is answered meanwhile.
const minWokenWait = time.Second

// metaTrue reports whether a job's metadata holds true at key.
func metaTrue(metadata []byte, key string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(metadata, &m) != nil {
		return false
	}
	var b bool
	return json.Unmarshal(m[key], &b) == nil && b
}

// metaCount reads a snooze counter from a job's metadata; absent or
// unreadable counts as none.
func metaCount(metadata []byte, key string) int {
	var m map[string]json.RawMessage
	if json.Unmarshal(metadata, &m) != nil {
		return 0
	}
	var n int
	if json.Unmarshal(m[key], &n) != nil {
		return 0
	}
	return n
}

// countSnooze applies outcome's verdict v for a failed run (err) of job
// to the job's metadata, which River saves with the run's end, and
// returns the verdict to return: v, or, when a snooze cannot be counted,
// outcome's decision with the bounds at 0. The one bookkeeping of
// extraction jobs (extractWorker.fail) and embed and chunk-embed jobs
// alike: a snooze's count and reason, what it is snoozed for (for a wake:
// wakeWaiters), the credit of its spread (v.unwaited) and its length
// (metaModelWaitMillis); an attempt spent clears the last two. Before,
// embed jobs wrote the count alone: their waits counted their spread as
// waited, and a snooze whose count failed was decided again with
// maxModelOutage still set.
func countSnooze(ctx context.Context, job *rivertype.JobRow, err error, v verdict, b retryBudget) verdict {
	if metaTrue(job.Metadata, metaWoken) {
		// Woken once: a later hold-back is an ordinary wait again.
		_ = river.MetadataSet(ctx, metaWoken, false)
	}
	if v.crashes > 0 {
		_ = river.MetadataSet(ctx, metaModelCrashes, v.crashes)
	}
	if v.invalidReply != "" {
		_ = river.MetadataSet(ctx, metaInvalidReply, v.invalidReply)
	}
	if v.count != "" {
		merr := river.MetadataSet(ctx, v.count, v.n)
		if merr == nil {
			merr = river.MetadataSet(ctx, metaSnoozeReason, snoozeReason(err))
		}
		if merr == nil {
			// What a wake looks for: a refusal's wait too (an answer ends
			// it as it ends an outage); not a job the server went down
			// with (it waits its snooze out, apart from the others).
			snoozedFor := v.label
			if v.aloneHold() {
				snoozedFor = snoozedForAlone // apart from the local queue's waits, also queued
			}
			if v.waitsForServer() {
				snoozedFor = outcomeModelDown
				if metaCount(job.Metadata, metaModelCrashes) > 0 {
					snoozedFor = snoozedAfterCrash
				}
			}
			merr = river.MetadataSet(ctx, metaSnoozedFor, snoozedFor)
		}
		if merr == nil && v.unwaited != "" {
			// The snooze counts v.wait toward its bound (--llm-max-outage,
			// maxDBOutage), and its spread shortened it (spreadBelow):
			// that part is credited now, in the metadata River's
			// completer saves with the snooze (on River's connections,
			// not the job's: a job that could not reach Postgres has it
			// saved as its count is). Before, a snooze counted whole,
			// spread and all, so a job's waits lasted 0.75 to 1 times
			// its bound (a walk with --llm-max-outage 3m: first attempts
			// 146-175 s into an outage).
			if cut := v.wait.Milliseconds() - snoozeOf(v.river).Milliseconds(); cut > 0 {
				merr = river.MetadataSet(ctx, v.unwaited, metaCount(job.Metadata, v.unwaited)+int(cut))
			}
		}
		if merr == nil && (v.count == metaModelWaits || metaCount(job.Metadata, metaModelWaitMillis) != 0) {
			// The snooze's length, for a wake to credit what was not
			// waited of it (store.WakeWaiting); 0 for one not counted as
			// a wait for the server (a woken job's hold). Before, a wake
			// credited from the snooze, which counted its spread as
			// waited at each wake (a crash-loop walk: 92-168 s).
			var ms int64
			if v.count == metaModelWaits {
				ms = snoozeOf(v.river).Milliseconds()
			}
			merr = river.MetadataSet(ctx, metaModelWaitMillis, ms)
		}
		if merr != nil {
			// Not run by River, so the snooze could not be counted: an
			// uncounted snooze could repeat forever, so decide as if the
			// budget were spent.
			b.maxLockWaits, b.maxRateLimitWaits, b.maxQueueWaits, b.maxModelOutage, b.maxUnsentHolds, b.maxDBOutage, b.maxAloneHolds = 0, 0, 0, 0, 0, 0, 0
			v = outcome(err, job, false, b)
		}
	} else if metaCount(job.Metadata, metaModelWaitMillis) != 0 || metaHas(job.Metadata, metaSnoozedFor) {
		// An attempt spent (or the job's end): it no longer waits for the
		// server, and the length of its last snooze must not be credited
		// again. River leaves a retry due within 5 s available, and with
		// its metadata still saying it waits for the server a wake ran it
		// before its backoff ended (a crash-loop walk: attempts 1.0 s
		// apart where the backoff said about 4 s) and credited the
		// snooze's length less the time since this run began.
		_ = river.MetadataSet(ctx, metaModelWaitMillis, 0)
		_ = river.MetadataSet(ctx, metaSnoozedFor, nil)
	}
	return v
}

// jobEnd is a failed run as fail decided it: River sees the verdict's error
// through Unwrap (a snooze, a cancel, or a plain error), the Observer its
// label, and the job row's errors its text, which is the cause's after the
// job's kind of work (op: "extract", "embed"), so that River's errors and
// its "Job errored" log lines say which.
type jobEnd struct {
	op, label    string
	river, cause error
	// turns, when marked, is how many of the job's turns a final failure
	// was recorded for (the job's metrics count those failed).
	turns  int
	marked bool
}

func (j *jobEnd) Error() string   { return j.op + ": " + j.cause.Error() }
func (j *jobEnd) Unwrap() []error { return []error{j.river, j.cause} }

// spread lengthens d by up to 25%.
func spread(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d + rand.N(d/4+1)
}
