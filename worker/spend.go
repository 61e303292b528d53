package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
)

// Spend caps.
//
// Before a job calls the model, it reads the day's spend (store.SpendOn: the
// user's and everyone's tokens of the UTC day by Config.Now). At or over
// Config.DailyTokensPerUser or Config.DailyTokens, the job's turns are
// extracted by Config.OverCapExtractor (offline) instead, so that memory
// still works, and in the transaction that stores that memory an OverCap job
// for the turns is enqueued, scheduled at the next UTC midnight. That job
// extracts them again with the model (when the caps allow it then; else it
// is snoozed to the next midnight) and replaces the offline memory of those
// turns by the model's (store.ReplaceOffline), so nothing is stored twice.
//
// The cap is checked before the call, not reserved: jobs that start while
// the spend is just under a cap all call the model. The overshoot is
// therefore at most one job's tokens per job running at that moment (with
// two workers near the cap, one job each), plus the call that crosses it.

// sourceOverCap is the metaSource of the jobs that extract again with the
// model the turns a spend cap sent offline.
const sourceOverCap = "over_cap"

// capsOn reports whether any spend cap is set and the model is what the
// caps limit (an offline extractor spends no tokens).
func (w *Worker) capsOn() bool {
	return (w.cfg.DailyTokensPerUser > 0 || w.cfg.DailyTokens > 0) &&
		w.cfg.Extractor.Info().Name != w.cfg.OverCapExtractor.Info().Name
}

// overCap reports whether userID's turns may not call the model now: the
// user's or everyone's spend of today reached its cap. An empty userID (a
// job from before migration 012) is checked against the global cap alone.
func (w *Worker) overCap(ctx context.Context, userID string) (bool, error) {
	if !w.capsOn() {
		return false, nil
	}
	sp, err := w.cfg.Store.SpendOn(ctx, w.cfg.Now(), userID)
	if err != nil {
		return false, err
	}
	return overCap(sp, w.cfg.DailyTokensPerUser, w.cfg.DailyTokens), nil
}

// overCap is the rule: a cap of 0 is none; a spend equal to the cap is over
// it (the cap is what may be spent).
func overCap(sp store.Spend, perUser, all int64) bool {
	return (perUser > 0 && sp.User >= perUser) || (all > 0 && sp.All >= all)
}

// nextDay is the start of the UTC day after t's: when the caps reset.
func nextDay(t time.Time) time.Time { return store.Day(t).AddDate(0, 0, 1) }

// untilReset is the time left until the caps reset, by Config.Now. River
// schedules by the store's clock (Postgres's), so jobs wait this long from
// its now.
func (w *Worker) untilReset() time.Duration {
	now := w.cfg.Now()
	return nextDay(now).Sub(now)
}

// enqueueOverCap inserts, in the transaction tx, one job per user for the
// turns a cap sent offline, scheduled at at (see untilReset).
func (e *Enqueuer) enqueueOverCap(ctx context.Context, tx pgx.Tx, processed map[string][]string, at time.Time) error {
	base, err := e.opts(sourceOverCap)
	if err != nil {
		return err
	}
	var params []river.InsertManyParams
	for user, ids := range processed {
		opts := *base
		opts.ScheduledAt = at
		params = append(params, river.InsertManyParams{Args: ExtractArgs{UserID: user, EventIDs: ids, OverCap: true}, InsertOpts: &opts})
	}
	return e.insert(ctx, tx, params)
}

// workOverCap runs an OverCap job: it extracts again with the model the
// job's turns that are still the offline extractor's and replaces their
// offline memory. Its failures are River's ordinary retries: the turns keep
// their offline memory meanwhile, and if every attempt fails, for good. A
// lock wait is not the job's failure (overCapEnd).
func (e *extractWorker) workOverCap(ctx context.Context, job *river.Job[ExtractArgs]) error {
	w := e.w
	s := w.cfg.Store
	a := job.Args
	offline := w.cfg.OverCapExtractor.Info().Name
	info := w.cfg.Extractor.Info()
	if info.Name == offline {
		return nil // this process runs the offline extractor: nothing better to do
	}
	turns, err := s.OfflineTurns(ctx, a.UserID, a.EventIDs, offline)
	if err != nil || len(turns) == 0 {
		return err
	}
	over, err := w.overCap(ctx, a.UserID)
	if err != nil {
		return err
	}
	if over {
		return river.JobSnooze(max(w.untilReset(), time.Second))
	}
	// Filled as work fills them: the user's current facts (the offline
	// extraction's included) and the conversation's earlier turns.
	known, err := loadKnownFacts(ctx, s, turns[0].UserID, turns)
	if err != nil {
		return err
	}
	prior, err := priorTurnsOf(ctx, s, turns)
	if err != nil {
		return err
	}
	prov := store.Provenance{Extractor: info.Name, Model: info.Model, PromptVersion: info.PromptVersion}
	var done []extracted
	for i, t := range turns {
		facts, order := known.input()
		res, err := w.cfg.Extractor.Extract(ctx, extractor.Input{UserID: t.UserID, Turn: extractorTurn(t), Prior: prior[i], Facts: facts, FactKeys: order})
		// On its own (spent also when the call failed), as flushUsage
		// stores every call whose results are not saved with them.
		usage := w.newUsage(info.Model)
		usage.add(t, res.Usage)
		e.flushUsage(ctx, usage)
		if err != nil {
			return fmt.Errorf("extract again with the model: %w", err)
		}
		done = append(done, extracted{turn: t, result: res})
		known.apply(res)
	}
	err = s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
		done, ids, _, err := keepRemembered(ctx, q, w.jobLockTimeout(ctx), done, nil)
		if err != nil || len(done) == 0 {
			return err
		}
		// Redacted and mapped as save does: the model's output is no more
		// trusted here than there.
		r := store.Reextraction{UserID: a.UserID, EventIDs: ids, Offline: offline, Provenance: prov}
		r.Facts, r.Context = memoryWrites(e.redact(done), prov)
		_, err = q.ReplaceOffline(ctx, r)
		return err
	})
	return e.overCapEnd(ctx, job, err)
}

// overCapEnd is what an over-cap job's run returns for its write's err. A
// lock timeout or a deadlock (store.IsLockWait: a forget or a clear held
// the user's lock past jobLockTimeout) is snoozed as the normal path
// snoozes it (outcome's lock wait: counted in metaLockWaits, up to
// Config.MaxLockWaits), spending no attempt; before, it was an ordinary
// retry, each wait an attempt. Past that bound, and any other error, it
// is River's ordinary retry as before. The job's turns are never marked
// failed (fail would): they keep their offline memory.
func (e *extractWorker) overCapEnd(ctx context.Context, job *river.Job[ExtractArgs], err error) error {
	if err == nil || !store.IsLockWait(err) {
		return err
	}
	b := e.w.budget()
	v := outcome(err, job.JobRow, false, b)
	if v.label != outcomeLockWait {
		return err
	}
	// Not counted (no River run to set the metadata): an ordinary retry,
	// so that the wait stays bounded.
	if v = countSnooze(ctx, job.JobRow, err, v, b); v.label != outcomeLockWait {
		return err
	}
	e.lockWaited(job.JobRow, job.Args.UserID, job.Args.EventIDs, v, b, err)
	return &jobEnd{op: "extract", label: v.label, river: v.river, cause: err}
}

// SpendReport is today's model spend against the caps.
type SpendReport struct {
	// Day is the UTC day (midnight) the report is of.
	Day time.Time
	// Tokens is every user's tokens spent on Day.
	Tokens int64
	// DailyTokens and DailyTokensPerUser are the caps (0: none).
	DailyTokens, DailyTokensPerUser int64
	// OverCapTurns counts turns this worker extracted offline because of a
	// cap since it started.
	OverCapTurns int64
}

// Spend reports today's spend against the caps.
func (w *Worker) Spend(ctx context.Context) (SpendReport, error) {
	day := store.Day(w.cfg.Now())
	sp, err := w.cfg.Store.SpendOn(ctx, day, "")
	if err != nil {
		return SpendReport{}, err
	}
	return SpendReport{Day: day, Tokens: sp.All, DailyTokens: w.cfg.DailyTokens, DailyTokensPerUser: w.cfg.DailyTokensPerUser,
		OverCapTurns: w.overCapTurns.Load()}, nil
}

// spendDay is the day usage is counted on: Config.Now's.
func (w *Worker) spendDay() time.Time { return store.Day(w.cfg.Now()) }

// dropOldSpend deletes the daily token counts of days before yesterday (the
// caps read today's; yesterday's is kept for a look back), and the ids of
// model calls made store.UsageCallsKept ago (a batch a run: a run a
// minute deletes far more than a minute's calls), from the leader's
// periodic reconcile. A failure is logged: the next run retries.
func (w *Worker) dropOldSpend(ctx context.Context) {
	if _, err := w.cfg.Store.DeleteSpendBefore(ctx, w.spendDay().AddDate(0, 0, -1)); err != nil {
		w.logger.Warn("cannot delete old daily token counts", "error", err)
	}
	if _, err := w.cfg.Store.DeleteUsageCallsBefore(ctx, w.cfg.Store.Clock().Now().Add(-store.UsageCallsKept)); err != nil {
		w.logger.Warn("cannot delete old model call ids", "error", err)
	}
}
