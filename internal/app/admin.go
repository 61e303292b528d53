package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/migrations"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// ReplayOptions selects what Replay reads; see worker.ReplayConfig for each
// field's meaning.
type ReplayOptions struct {
	Users         []string
	Since         time.Time
	FromSeq       uint64
	Reset, DryRun bool
	AllowLoss     bool
	// Work also runs extraction workers in this process (without the
	// ingest consumer) until Stop, so that the replayed turns are
	// extracted without a running serve.
	Work bool
	// Progress, when set, is called after every batch read.
	Progress func(worker.ReplayProgress)
}

// ReplayJobSize is the number of turns per job a replay enqueues:
// Worker.JobSize when set, else ReplayJobSizeLLM with an LLM and
// ReplayJobSizeRules with the offline rules; at most ReplayBatchSize, since
// a job's turns are recorded in its transaction, which holds at most
// ReplayBatchSize turns.
func (a *App) ReplayJobSize() int {
	switch {
	case !a.autoJobSize:
		return min(a.jobSize, ReplayBatchSize)
	case a.cfg.LLM.BaseURL != "":
		return ReplayJobSizeLLM
	}
	return ReplayJobSizeRules
}

// Replay rebuilds memory from the turn stream (worker.Replay) with the
// App's stream, store and replay batching. With o.Work it first starts
// extraction workers in this process; Stop stops them.
func (a *App) Replay(ctx context.Context, o ReplayOptions) (worker.ReplayProgress, error) {
	a.mu.Lock()
	var (
		s   *store.Store
		err error
	)
	// The stream first: a misspelt --stream or --prefix used to be found
	// only after the database was created, migrated and its deployment
	// claimed for them.
	if err = a.checkReplayStream(ctx); err != nil {
		a.mu.Unlock()
		return worker.ReplayProgress{}, err
	}
	if o.DryRun {
		// A dry run writes nothing: it neither creates the database nor
		// migrates it (before, it did both, and said nothing was written).
		s, err = a.openExisting(ctx, "replay --dry-run", "a dry run does not create it; the replay would, and would extract every turn it reads")
	} else {
		s, err = a.openStoreToWork(ctx)
	}
	if err == nil {
		use := claimPrefix
		if o.DryRun {
			use = checkPrefix
		}
		err = a.checkDeployment(ctx, s, nil, use)
	}
	if err == nil && o.Reset {
		// Before anything starts; ResetMemory checks again in its
		// transaction.
		if err = s.CheckSchema(ctx); err != nil {
			err = fmt.Errorf("replay --reset: %w", err)
		}
	}
	if err != nil {
		a.mu.Unlock()
		return worker.ReplayProgress{}, err
	}
	js, err := a.jetStream()
	if err == nil && o.Work && !o.DryRun && a.worker == nil {
		if err = a.startExtractionLocked(ctx, s); err == nil {
			a.warnUnembedded(ctx, s)
		}
	}
	// Jobs run by this process's workers carry their attempts; otherwise
	// the serving workers apply theirs (worker.jobAttempts).
	var enq *worker.Enqueuer
	if a.worker != nil {
		enq = a.worker.Enqueuer()
	}
	a.mu.Unlock()
	if err != nil {
		return worker.ReplayProgress{}, err
	}
	if !o.DryRun {
		// A database restored from before a forget: the forget first, or
		// the turns the user published after it, read back now, would
		// leave the forgotten memory beside them for good.
		worker.ReapplyForgets(ctx, js, s, a.cfg.Prefix, a.cfg.Stream, a.logger)
	}
	return worker.Replay(ctx, worker.ReplayConfig{
		Enqueuer:  enq,
		JetStream: js, Store: s, Prefix: a.cfg.Prefix, Stream: a.cfg.Stream,
		Users: o.Users, Since: o.Since, FromSeq: o.FromSeq, Reset: o.Reset, AllowLoss: o.AllowLoss, DryRun: o.DryRun,
		BatchSize: ReplayBatchSize, JobSize: a.ReplayJobSize(), MaxClockSkew: a.cfg.Worker.MaxClockSkew,
		Progress: o.Progress, Logger: a.logger,
	})
}

// checkReplayStream checks, before replay opens (creates, migrates) the
// database, that the turn stream exists and captures the prefix's turn
// subjects; a.mu is held. A stream that takes messages from others (a
// mirror, or one of sources, with or without subjects of its own) is not
// checked for the prefix.
func (a *App) checkReplayStream(ctx context.Context) error {
	js, err := a.jetStream()
	if err != nil {
		return err
	}
	// Info requests: nats-server 2.11 and later answer them last, and a
	// server busy with forgets late (events.InfoTimeout).
	wait := 10 * time.Second
	if events.InfoDeferred(js) {
		wait = events.InfoTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	st, err := js.Stream(ctx, a.cfg.Stream)
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("replay: stream %s: %w (check --stream and --prefix; nothing was read, and the database was not opened or migrated)", a.cfg.Stream, err)
		}
		return fmt.Errorf("replay: stream %s: %w", a.cfg.Stream, events.NoJetStream(err))
	}
	info, err := st.Info(ctx)
	if err != nil {
		return fmt.Errorf("replay: stream %s: %w", a.cfg.Stream, err)
	}
	if info.Config.Retention != jetstream.LimitsPolicy {
		// Ingest emptied it: replay cannot read it (JetStream refuses the
		// ordered consumer with a message that names no cause).
		return fmt.Errorf("replay: stream %s: its retention is %s, which deletes turns once consumed: nothing to replay (memoryd needs limits retention; create the stream again with it); nothing was read, and the database was not opened or migrated",
			a.cfg.Stream, info.Config.Retention)
	}
	want := events.TurnSubjects(a.cfg.Prefix)
	if info.Config.Mirror != nil || len(info.Config.Sources) > 0 {
		// Its messages keep the subjects they had in the streams it takes
		// them from, whatever subjects of its own it captures.
		return nil
	}
	if subj := info.Config.Subjects; len(subj) > 0 && !slices.ContainsFunc(subj, func(p string) bool { return subjectsOverlap(p, want) }) {
		return fmt.Errorf("replay: stream %s captures %s, not the turns of prefix %q (%s): check --prefix and --stream; nothing was read, and the database was not opened or migrated",
			a.cfg.Stream, strings.Join(subj, ", "), a.cfg.Prefix, want)
	}
	return nil
}

// subjectsOverlap reports whether some subject matches both NATS subject
// patterns a and b: token by token, "*" matches any one token and ">" one
// or more. A stream of "memory.turns.*" holds every turn (a user token is
// one token), as one of "memory.turns.>" does; one of "memoryx.turns.>"
// holds none of them.
func subjectsOverlap(a, b string) bool {
	p, q := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; ; i++ {
		switch {
		case i == len(p) || i == len(q):
			return len(p) == len(q)
		case p[i] == ">" || q[i] == ">":
			return true
		case p[i] != "*" && q[i] != "*" && p[i] != q[i]:
			return false
		}
	}
}

// warnUnembedded warns when this process is to extract without an
// embeddings endpoint in a database that holds vectors while no running
// worker embeds: the items it writes then get no embed jobs (with one
// running, they get jobs of its model: worker.EmbedFollower), so they are
// found by keywords only until a serve's sweep, or a backfill, embeds them.
func (a *App) warnUnembedded(ctx context.Context, s *store.Store) {
	if a.cfg.Embed.BaseURL != "" {
		return
	}
	models, err := s.EmbeddingModels(ctx)
	if err != nil || len(models) == 0 {
		return
	}
	live, err := s.LiveEmbedModels(ctx, cmp.Or(a.cfg.Worker.ProcessTimeout, 10*time.Second))
	if err != nil || len(live) > 0 {
		return
	}
	a.logger.WarnContext(ctx, "this process extracts without --embed-base-url, no running worker embeds, and the database holds vectors: the items it extracts get no embed jobs and are found by keywords only until a serve's embed sweep (hourly, and when a process becomes River's leader); give it the serve's --embed-base-url and --embed-model, or run embed --backfill afterwards",
		"embed_model", models[0])
}

// ErrOtherExtractor is returned when a command would run extraction jobs
// with another extractor than the running workers'.
var ErrOtherExtractor = errors.New("this process would extract with another extractor than the running workers")

// sameExtractor refuses to run extraction workers with ext while worker
// processes of another extractor run: the jobs these would take, the
// replayed turns' and any live turn's alike, would get memory of another
// extractor (the offline rules where the serves ask a model: a replay
// run without the serves' --llm-base-url). With none running, ext is the
// operator's choice. With workers of the same extractor running, it
// warns that this process's workers are not paced by the serves' enrich
// (back-pressure is each process's own): a replay's 20 workers beside a
// serve degraded 10.8 % of enrich replies in an audit, where --no-work,
// leaving the jobs to the serves, degraded none and finished sooner.
func (a *App) sameExtractor(ctx context.Context, s *store.Store, ext worker.Extractor) error {
	live, err := s.LiveExtractors(ctx, cmp.Or(a.cfg.Worker.ProcessTimeout, 10*time.Second))
	if err != nil {
		return err
	}
	own := worker.ExtractorID(ext.Info())
	for _, other := range live {
		if other != own {
			return fmt.Errorf("%w: it would extract with %q, the running workers with %q; give it the serves' --llm-base-url and --llm-model, or run it with --no-work to leave the extraction to them", ErrOtherExtractor, own, other)
		}
	}
	if len(live) > 0 {
		a.logger.WarnContext(ctx, "other processes' extraction workers are running: this process's workers run beside them unpaced by any serve's enrich latency (back-pressure is each process's own); while serves answer enrich, --no-work leaves the extraction to them, paced beside it")
	}
	return nil
}

// startEmbeddingLocked runs embed workers alone (worker.Config.EmbedOnly);
// a.mu is held.
func (a *App) startEmbeddingLocked(ctx context.Context, s *store.Store) error {
	ext, err := a.extractor()
	if err != nil {
		return err
	}
	nc, err := a.connect()
	if err != nil {
		return err
	}
	return a.startWorkerWithLocked(ctx, s, nc, ext, func(c *worker.Config) { c.DisableIngest, c.EmbedOnly = true, true })
}

// startExtractionLocked runs extraction workers without the ingest
// consumer; a.mu is held.
func (a *App) startExtractionLocked(ctx context.Context, s *store.Store) error {
	ext, err := a.extractor()
	if err != nil {
		return err
	}
	if err := a.sameExtractor(ctx, s, ext); err != nil {
		return err
	}
	nc, err := a.connect()
	if err != nil {
		return err
	}
	return a.startWorkerLocked(ctx, s, nc, ext, true)
}

// WaitExtracted waits until the users' turns (every user's when none is
// named) have no extraction pending, calling progress when the number
// pending changes. It returns ctx's error when ctx ends first.
func (a *App) WaitExtracted(ctx context.Context, users []string, progress func(pending int64)) error {
	return a.WaitExtractedUpTo(ctx, users, 0, progress)
}

// WaitExtractedUpTo is WaitExtracted for the turns stored in the stream at
// or before sequence maxSeq (0: all), what a replay that read up to it
// enqueued: turns ingest records meanwhile are not waited for.
func (a *App) WaitExtractedUpTo(ctx context.Context, users []string, maxSeq uint64, progress func(pending int64)) error {
	s, err := a.readStore(ctx)
	if err != nil {
		return err
	}
	last := int64(-1)
	check := func() (bool, error) {
		// Bounded: a database that stops answering without closing the
		// connection (a failover, a partition) would hold one check, and
		// the wait, past waitOutage.
		cctx, cancel := context.WithTimeout(ctx, a.waitCheckTimeout)
		defer cancel()
		n, err := s.PendingTurnsUpTo(cctx, users, maxSeq)
		if err != nil {
			return false, err
		}
		if n != last && progress != nil {
			progress(n)
		}
		last = n
		return n == 0, nil
	}
	return poll(ctx, 200*time.Millisecond, throughOutage(ctx, check, a.waitOutage, time.Now, a.logger))
}

// defaultWaitOutage is how long WaitExtracted polls through a database
// that does not answer (restarted, failed over) before it gives up: the
// extraction workers of the process wait it out too, and a replay that had
// read everything back should not end on a blip.
//
// defaultWaitCheckTimeout bounds each of its checks. An App's own fields
// (waitOutage, waitCheckTimeout), so that a test shortening them runs
// beside others.
const defaultWaitOutage, defaultWaitCheckTimeout = 2 * time.Minute, 15 * time.Second

// throughOutage is check, its errors taken for "not yet" until they have
// lasted bound without a success in between (then the last one is
// returned, saying how long); the first error of a run is logged.
func throughOutage(ctx context.Context, check func() (bool, error), bound time.Duration, now func() time.Time, logger *slog.Logger) func() (bool, error) {
	var failingSince time.Time
	return func() (bool, error) {
		done, err := check()
		switch {
		case err == nil:
			failingSince = time.Time{}
			return done, nil
		case ctx.Err() != nil || !store.IsUnavailable(err):
			// Cancelled, or refused for good (a missing table): no outage.
			return false, err
		case failingSince.IsZero():
			failingSince = now()
			logger.Warn("database does not answer; waiting for it", "error", err, "up_to", bound)
			return false, nil
		case now().Sub(failingSince) < bound:
			return false, nil
		}
		return false, fmt.Errorf("database did not answer for %s: %w", bound, err)
	}
}

// WaitProcessed waits until want of the user's turns are done (processed
// or failed), calling progress when that number changes. Failed turns are
// an error naming the command that lists them.
func (a *App) WaitProcessed(ctx context.Context, user string, want int, progress func(done int)) error {
	s, err := a.readStore(ctx)
	if err != nil {
		return err
	}
	last := -1
	err = poll(ctx, 100*time.Millisecond, func() (bool, error) {
		st, err := s.Stats(ctx, user)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return false, err
		}
		done := int(st.TurnsProcessed + st.TurnsFailed)
		if done != last && progress != nil {
			progress(done)
		}
		last = done
		if done >= want && st.TurnsFailed > 0 {
			return false, fmt.Errorf("%d turn(s) failed extraction; see 'memoryd failed --user %s'", st.TurnsFailed, user)
		}
		return done >= want, nil
	})
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return fmt.Errorf("turns were not processed in time (%d/%d done): is another memoryd with a different database consuming the stream?", max(last, 0), want)
	}
	return err
}

// poll calls check every interval until it reports done or fails, or ctx
// ends.
func poll(ctx context.Context, interval time.Duration, check func() (bool, error)) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		done, err := check()
		if done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// openExisting opens the store without creating the database or
// migrating it; a database that does not exist is an error naming cmd.
// a.mu is held.
func (a *App) openExisting(ctx context.Context, cmd, missingMeans string) (*store.Store, error) {
	if a.store == nil {
		missing, err := store.DatabaseMissing(ctx, a.cfg.Store)
		if err != nil {
			return nil, err
		}
		if missing {
			return nil, fmt.Errorf("%s: the database does not exist (%s)", cmd, missingMeans)
		}
	}
	return a.openStore(ctx, false)
}

// PendingMigrations is what migrate (or a serve that migrates) would apply
// to the database; it creates and applies nothing.
func (a *App) PendingMigrations(ctx context.Context) (store.Pending, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, err := a.openExisting(ctx, "migrate --status", "migrate creates it and applies every migration")
	if err != nil {
		return store.Pending{}, err
	}
	return s.PendingMigrations(ctx, migrations.FS)
}

// readStore opens the store without migrating.
func (a *App) readStore(ctx context.Context) (*store.Store, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.openStore(ctx, false)
}

// Forget deletes everything kept about a user (worker.Forget): memory,
// turns, jobs and the user's events in the turn and dead-letter streams. It
// answers what the forget endpoint answers (events.ForgetReply).
func (a *App) Forget(ctx context.Context, userID string) (events.ForgetReply, error) {
	a.mu.Lock()
	w := a.worker
	var (
		s   *store.Store
		js  jetstream.JetStream
		err error
	)
	if w == nil {
		if s, err = a.openStore(ctx, false); err == nil {
			err = a.checkDeployment(ctx, s, nil, checkPrefix)
		}
		if err == nil {
			js, err = a.jetStream()
		}
	}
	a.mu.Unlock()
	if err != nil {
		return events.ForgetReply{}, err
	}
	return a.forget(ctx, w, js, s, userID)
}

// forget runs a forget through the running worker w when there is one, so
// that it waits for the user's running jobs; else straight on the store and
// stream. The forget endpoint and Forget both come here.
//
// It takes no lock of the App's: Stop holds a.mu while it waits for the
// endpoint's running requests, this one among them.
func (a *App) forget(ctx context.Context, w *worker.Worker, js jetstream.JetStream, s *store.Store, userID string) (events.ForgetReply, error) {
	var (
		r   worker.ForgetResult
		err error
	)
	if w != nil {
		r, err = w.Forget(ctx, userID)
	} else {
		r, err = worker.ForgetLogged(ctx, js, s, a.cfg.Prefix, a.cfg.Stream, userID, a.logger)
	}
	return forgetReply(r), err
}

// Failed lists the turns whose extraction failed, of userID or of every
// user when empty, at most limit.
func (a *App) Failed(ctx context.Context, userID string, limit int) ([]store.Turn, error) {
	s, err := a.readStore(ctx)
	if err != nil {
		return nil, err
	}
	return s.FailedTurns(ctx, userID, limit)
}

// RetryFailed sets failed turns back to pending and enqueues their
// extraction again (worker.RetryFailed: those the model server went down
// with only with includeCrashed); running workers pick them up.
func (a *App) RetryFailed(ctx context.Context, userID string, limit int, includeCrashed bool) (n, crashed int, err error) {
	s, err := a.readStore(ctx)
	if err != nil {
		return 0, 0, err
	}
	return worker.RetryFailed(ctx, s, userID, limit, includeCrashed)
}

// Prune applies the configured size limits and turn retention once
// (worker.Prune), as the service does every Worker.PruneInterval.
// A missing database, or one not migrated to this release, is refused
// before anything is done (a prune neither creates nor migrates one).
func (a *App) Prune(ctx context.Context) (worker.PruneReport, error) {
	a.mu.Lock()
	s, err := a.openExisting(ctx, "prune", "there is nothing to prune; serve or migrate creates it")
	var pending store.Pending
	if err == nil {
		pending, err = s.PendingMigrations(ctx, migrations.FS)
	}
	a.mu.Unlock()
	if err != nil {
		return worker.PruneReport{}, err
	}
	if !pending.Empty() {
		return worker.PruneReport{}, pruneNotMigrated(pending)
	}
	limits := worker.PruneLimits{
		MaxBytes: a.cfg.Worker.MaxDBSize, MaxContextPerUser: a.cfg.Worker.MaxContextPerUser, TurnRetention: a.cfg.Worker.TurnRetention,
		ProcessTimeout: a.cfg.Worker.ProcessTimeout,
	}
	if a.cfg.Embed.BaseURL != "" {
		limits.EmbedModel = a.cfg.Embed.StoredModel()
	}
	return worker.Prune(ctx, s, limits)
}

// pruneNotMigrated is Prune's refusal of a database with pending
// migrations, River's and memoryd's counted together.
func pruneNotMigrated(pending store.Pending) error {
	return fmt.Errorf("prune: the database is not migrated to this release (%s pending): run memoryd migrate, or start serve, first",
		Plural(int64(len(pending.River)+len(pending.Memoryd)), "migration", "migrations"))
}

// GrantReader lets user read the shared scope's knowledge base collections
// from the user's own subjects (memory.docs.search), or with revoke takes
// that back; it reports whether anything changed. An operator's command:
// no NATS subject grants.
func (a *App) GrantReader(ctx context.Context, scope, user string, revoke bool) (bool, error) {
	s, err := a.readStore(ctx)
	if err != nil {
		return false, err
	}
	if revoke {
		return s.RevokeReader(ctx, scope, user)
	}
	return s.GrantReader(ctx, scope, user)
}
