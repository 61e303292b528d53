package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/memoryd/memoryd/store"
)

// ExtractJobKind is River's kind of extraction jobs (ExtractArgs).
const ExtractJobKind = "memoryd_extract"

// extractJobs is ExtractArgs's shape for the SQL on River's job table that
// the store runs for the worker (forget, reconcile); the store knows no job
// of its own. TestExtractJobsShape checks it against ExtractArgs's JSON.
var extractJobs = store.RiverJobs{Kind: ExtractJobKind, UserField: "user_id", EventIDsField: "event_ids"}

// DefaultBacklogTurns is Config.BacklogTurns's default.
const DefaultBacklogTurns = 100

// backlogPriority is the River priority (1 is the highest, River's
// default) of the extraction jobs of a user with a backlog: River fetches
// the jobs of a queue by priority, then scheduled time, then id, so they run
// after every other user's waiting job and before none.
const backlogPriority = 2

// DefaultMaxAttempts is Config.MaxAttempts's default.
const DefaultMaxAttempts = 5

// metaSource is the job metadata key saying what enqueued an extraction job
// (one of the source* values). Its presence also marks a job that carries
// its attempts (see jobAttempts).
const metaSource = "memoryd_source"

// metaWorkerAttempts marks a job whose Enqueuer did not know the workers'
// MaxAttempts: the worker that runs it applies its own (see jobAttempts).
const metaWorkerAttempts = "memoryd_worker_attempts"

// What enqueued an extraction job.
const (
	sourceIngest    = "ingest"
	sourceReplay    = "replay"
	sourceRetry     = "retry_failed"
	sourceReconcile = "reconcile"
	sourceTakeOver  = "takeover"
	// sourceBurstSplit: a turn of a conversation's burst whose job sends
	// its turns one a request (workBurst) from then on.
	sourceBurstSplit = "burst_split"
)

// Enqueuer inserts extraction jobs. It is the one place that builds them: the
// arguments (one user's turns per job), the queue, the attempts (the workers'
// MaxAttempts, carried by the job, so that River's row says how often it
// runs) and the metadata (metaSource). Every insert joins the caller's
// transaction, the one that records the turns or sets them pending, so that
// a pending turn always has a job.
//
// Extraction jobs are not unique jobs: a turn gets a job only in the
// transaction that makes it pending (ingest records it, replay and
// retry-failed set it back, the reconciler finds it without one), so the
// turns table already keeps one live job per turn, and a unique key would
// only cost an index probe per insert.
//
// A Worker has one (Worker.Enqueuer) on its own River client; NewEnqueuer
// builds one on an insert-only client for a process that runs no Worker.
type Enqueuer struct {
	store  *store.Store
	client *river.Client[pgx.Tx]
	// maxAttempts is the jobs' attempts; 0 when not known: then the jobs
	// are marked with metaWorkerAttempts.
	maxAttempts int
}

// EnqueuerConfig configures NewEnqueuer.
type EnqueuerConfig struct {
	// Store records the turns; River shares its pool. Required.
	Store *store.Store
	// MaxAttempts is how often each job runs before its turns are marked
	// failed: the workers' Config.MaxAttempts. Zero, for a process that does
	// not know the workers' setting (memoryd retry-failed), leaves it to the
	// worker that runs each job: it applies its own MaxAttempts, up to
	// River's default of 25 that the job row then carries.
	MaxAttempts int
	// Logger receives River's logs. Default slog.Default().
	Logger *slog.Logger
}

// NewEnqueuer returns an Enqueuer on an insert-only River client (it works
// no jobs), for a process that enqueues without running a Worker
// (replay --no-work, retry-failed). With a Worker, use Worker.Enqueuer.
func NewEnqueuer(cfg EnqueuerConfig) (*Enqueuer, error) {
	if cfg.Store == nil {
		return nil, errors.New("worker: EnqueuerConfig.Store is required")
	}
	if cfg.MaxAttempts < 0 {
		return nil, fmt.Errorf("worker: EnqueuerConfig.MaxAttempts must not be negative, not %d", cfg.MaxAttempts)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// MaxAttempts (0: River's default) is also that of the jobs inserted
	// without their own, such as a document's chunking job.
	// Its jobs are stamped by Postgres's clock, not this host's
	// (store.Clock; insert refreshes it).
	client, err := river.NewClient(riverpgxv5.New(cfg.Store.Pool()), &river.Config{Logger: cfg.Logger.With("component", "river"),
		MaxAttempts: cfg.MaxAttempts, Test: river.TestConfig{Time: cfg.Store.Clock()}})
	if err != nil {
		return nil, fmt.Errorf("worker: river: %w", err)
	}
	return &Enqueuer{store: cfg.Store, client: client, maxAttempts: cfg.MaxAttempts}, nil
}

// opts are the insert options of an extraction job from source.
func (e *Enqueuer) opts(source string) (*river.InsertOpts, error) {
	meta := map[string]any{metaSource: source}
	if e.maxAttempts == 0 {
		meta[metaWorkerAttempts] = true
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, fmt.Errorf("enqueue extraction: %w", err)
	}
	// MaxAttempts 0 is River's default.
	return &river.InsertOpts{Queue: QueueExtract, MaxAttempts: e.maxAttempts, Metadata: b}, nil
}

// insertSkippingDuplicates inserts jobs of which some may have unique
// options (document chunking): a job whose unique key a waiting or running
// job holds is skipped, where insert's COPY would fail the transaction.
// Jobs of the same kind and arguments in params are inserted once.
func (e *Enqueuer) insertSkippingDuplicates(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) error {
	seen := map[string]bool{}
	var once []river.InsertManyParams
	for _, p := range params {
		b, err := json.Marshal(p.Args)
		if err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
		if k := p.Args.Kind() + " " + string(b); !seen[k] {
			seen[k] = true
			once = append(once, p)
		}
	}
	if len(once) == 0 {
		return nil
	}
	if err := e.store.WithTx(tx).RefreshClock(ctx); err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	if _, err := e.client.InsertManyTx(ctx, tx, once); err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	return nil
}

func (e *Enqueuer) insert(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) error {
	if len(params) == 0 {
		return nil
	}
	// River stamps the jobs by the store's clock (NewEnqueuer, New): a
	// process without a heartbeat reads it here when it is stale.
	if err := e.store.WithTx(tx).RefreshClock(ctx); err != nil {
		return fmt.Errorf("enqueue extraction: %w", err)
	}
	if _, err := e.client.InsertManyFastTx(ctx, tx, params); err != nil {
		return fmt.Errorf("enqueue extraction: %w", err)
	}
	return nil
}

// insertSoon is insert for jobs scheduled later: River inserts them as
// scheduled, which its scheduler makes available only every 5 s, so those
// due within that wait as available instead (store.AvailableSoon), and a
// debounce of a few seconds is not up to 5 s longer.
func (e *Enqueuer) insertSoon(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) error {
	if len(params) == 0 {
		return nil
	}
	q := e.store.WithTx(tx)
	if err := q.RefreshClock(ctx); err != nil {
		return fmt.Errorf("enqueue extraction: %w", err)
	}
	res, err := e.client.InsertManyTx(ctx, tx, params)
	if err != nil {
		return fmt.Errorf("enqueue extraction: %w", err)
	}
	ids := make([]int64, 0, len(res))
	for _, r := range res {
		ids = append(ids, r.Job.ID)
	}
	if _, err := q.AvailableSoon(ctx, ids); err != nil {
		return fmt.Errorf("enqueue extraction: %w", err)
	}
	return nil
}

// enqueueTurns inserts extraction jobs for turns, up to jobSize turns per
// job, in order. Every job holds the turns of one user and names that user:
// event ids are unique per user only, so a job's (user, event ids) are its
// turns' keys.
// The jobs of the users in behind get backlogPriority.
func (e *Enqueuer) enqueueTurns(ctx context.Context, tx pgx.Tx, turns []store.Turn, jobSize int, source string, behind map[string]bool) error {
	var users []string
	idsOf := make(map[string][]string)
	for _, t := range turns {
		if _, ok := idsOf[t.UserID]; !ok {
			users = append(users, t.UserID)
		}
		idsOf[t.UserID] = append(idsOf[t.UserID], t.EventID)
	}
	jobSize = max(jobSize, 1)
	opts, err := e.opts(source)
	if err != nil {
		return err
	}
	low := *opts
	low.Priority = backlogPriority
	var params []river.InsertManyParams
	for _, user := range users {
		o := opts
		if behind[user] {
			o = &low
		}
		for chunk := range slices.Chunk(idsOf[user], jobSize) {
			params = append(params, river.InsertManyParams{Args: ExtractArgs{UserID: user, EventIDs: slices.Clone(chunk)}, InsertOpts: o})
		}
	}
	return e.insert(ctx, tx, params)
}

// enqueueDebounced inserts one job per newly ingested turn, scheduled at at
// and tagged with the turn's conversation: the first job of a burst to run
// takes every pending turn of the conversation; the others then find theirs
// processed and stop. One job per turn still, so that no turn can be left
// without one.
// The jobs of the users in behind get backlogPriority.
func (e *Enqueuer) enqueueDebounced(ctx context.Context, tx pgx.Tx, turns []store.Turn, at time.Time, behind map[string]bool) error {
	base, err := e.opts(sourceIngest)
	if err != nil {
		return err
	}
	params := make([]river.InsertManyParams, len(turns))
	for i, t := range turns {
		opts := *base
		opts.ScheduledAt = at
		if behind[t.UserID] {
			opts.Priority = backlogPriority
		}
		params[i] = river.InsertManyParams{
			Args:       ExtractArgs{UserID: t.UserID, EventIDs: []string{t.EventID}, ConversationID: t.ConversationID},
			InsertOpts: &opts,
		}
	}
	return e.insertSoon(ctx, tx, params)
}

// enqueueSplit inserts a job for each of turns, the turns of one user's
// conversation's burst that its job hands over as it sends its turns one
// a request (workBurst): each job claims its own turn alone (metaBurstSplit)
// and extracts it with its own attempts, available at once.
func (e *Enqueuer) enqueueSplit(ctx context.Context, tx pgx.Tx, turns []store.Turn) error {
	base, err := e.opts(sourceBurstSplit)
	if err != nil {
		return err
	}
	var meta map[string]any
	if err := json.Unmarshal(base.Metadata, &meta); err != nil {
		return fmt.Errorf("enqueue extraction: %w", err)
	}
	meta[metaBurstSplit] = true
	if base.Metadata, err = json.Marshal(meta); err != nil {
		return fmt.Errorf("enqueue extraction: %w", err)
	}
	params := make([]river.InsertManyParams, len(turns))
	for i, t := range turns {
		params[i] = river.InsertManyParams{Args: ExtractArgs{UserID: t.UserID, EventIDs: []string{t.EventID}, ConversationID: t.ConversationID}, InsertOpts: base}
	}
	return e.insert(ctx, tx, params)
}

// replacement is a new job for the running job of a dead process.
type replacement struct {
	args ExtractArgs
	// queue is the old job's; attemptsLeft what it had left.
	queue        string
	attemptsLeft int
	// replaces is the old job's id; carried its metadata at the keys of
	// carriedMeta, as they were.
	replaces int64
	carried  map[string]json.RawMessage
}

// carriedMeta are the keys of a job's metadata that its replacement (an
// extraction job's, or an embed or chunk embed job's: asIsReplacement)
// keeps, so that a takeover restarts none of the job's bounds: the counts
// of its free snoozes; what was counted of its waits for the model server
// and the database and not waited (which moves their bounds: modelWait,
// dbWait); its woken, unsent and alone holds (maxWokenHolds, maxUnsentHolds, maxAloneHolds), its wakes (maxWakes) and when
// the last wake was counted (in the database's clock, so that a wake of
// the replacement within wakeCountEvery of it counts as one with it, as
// it would have for the job); its crashes (maxCrashes: so that it is sent
// alone, and fails at the next); the digest of its last invalid output
// (metaInvalidReply: a repeat fails it), and whether its burst's request
// got invalid replies (metaBurstInvalid) and its turns are sent one a
// request (metaBurstSplit). Not the state of the snooze the job was in
// (metaSnoozedFor, metaModelWaitMillis, metaWoken): the replacement runs
// at once, neither snoozed nor woken.
var carriedMeta = []string{metaLockWaits, metaRateLimitWaits, metaQueueWaits, metaModelWaits, metaDBWaits,
	metaModelUnwaitedMillis, metaDBUnwaitedMillis, metaWokenHolds, metaUnsentHolds, metaAloneHolds, metaWakes, metaWakeCountedAt, metaModelCrashes,
	metaInvalidReply, metaBurstInvalid, metaBurstSplit}

// carriedOf is the metadata of carriedMeta that a job's replacement keeps:
// the keys present in metadata.
func carriedOf(metadata []byte) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(metadata, &m) != nil {
		return nil
	}
	carried := make(map[string]json.RawMessage)
	for _, k := range carriedMeta {
		if v, ok := m[k]; ok {
			carried[k] = v
		}
	}
	return carried
}

// enqueueReplacements inserts the replacements of jobs taken over.
func (e *Enqueuer) enqueueReplacements(ctx context.Context, tx pgx.Tx, reps []replacement) error {
	params := make([]river.InsertManyParams, 0, len(reps))
	for _, r := range reps {
		meta := map[string]any{metaSource: sourceTakeOver, metaReplaces: r.replaces}
		for k, v := range r.carried {
			meta[k] = v
		}
		metaJSON, err := json.Marshal(meta)
		if err != nil {
			return fmt.Errorf("enqueue extraction: %w", err)
		}
		params = append(params, river.InsertManyParams{Args: r.args,
			InsertOpts: &river.InsertOpts{Queue: r.queue, MaxAttempts: r.attemptsLeft, Metadata: metaJSON}})
	}
	return e.insert(ctx, tx, params)
}

// jobAttempts is how many attempts an extraction job runs: the MaxAttempts it
// carries, when its Enqueuer knew the workers' setting. Otherwise the
// worker's own MaxAttempts (workerMax), within the job's: for a job marked
// metaWorkerAttempts, and for one without metaSource, enqueued by a memoryd
// from before the Enqueuer (its replay and retry-failed jobs carry River's
// default of 25, which the worker's MaxAttempts capped then too).
func jobAttempts(maxAttempts int, metadata []byte, workerMax int) int {
	var m map[string]json.RawMessage
	if json.Unmarshal(metadata, &m) == nil {
		_, enqueued := m[metaSource]
		_, workers := m[metaWorkerAttempts]
		if enqueued && !workers {
			return maxAttempts
		}
	}
	return min(maxAttempts, workerMax)
}

// RetryFailed sets failed turns (of userID, or of every user when empty; at
// most limit) back to pending and enqueues one extraction job each, in one
// transaction. It returns the number of turns re-enqueued, and of those
// left failed because the model server went down with their requests
// (crashed: maxCrashes; all of userID's, and none of them counted in
// limit), which it retries only with includeCrashed: each
// would bring the server down twice more, an outage for every user (a
// crash walk: 11 crashes in 3 minutes when retry-failed took 6 such turns
// with the outage's other failures). Any process with workers picks the
// jobs up.
func (e *Enqueuer) RetryFailed(ctx context.Context, userID string, limit int, includeCrashed bool) (n, crashed int, err error) {
	s := e.store
	// Left out in the query, not after it: the oldest failed turns being
	// crashed ones, a filter after the limit re-enqueued none, run after
	// run.
	skip := crashedReason
	if includeCrashed {
		skip = ""
	}
	failed, crashed, err := s.FailedTurnsExcept(ctx, userID, limit, skip)
	if err != nil || len(failed) == 0 {
		return 0, crashed, err
	}
	keys := make([]store.TurnKey, len(failed))
	for i, t := range failed {
		keys[i] = t.Key()
	}
	err = s.InTx(ctx, func(tx pgx.Tx, q *store.Store) error {
		reset, err := q.ResetFailed(ctx, keys)
		if err != nil || len(reset) == 0 {
			return err
		}
		n = len(reset)
		return e.enqueueTurns(ctx, tx, withKeys(failed, reset), 1, sourceRetry, nil)
	})
	if err != nil {
		return 0, crashed, fmt.Errorf("retry failed: %w", err)
	}
	return n, crashed, nil
}

// RetryFailed is (*Enqueuer).RetryFailed on an Enqueuer of s that does not
// know the workers' MaxAttempts: each job runs the MaxAttempts of the worker
// that takes it. To give the jobs their attempts, use NewEnqueuer or
// Worker.Enqueuer.
func RetryFailed(ctx context.Context, s *store.Store, userID string, limit int, includeCrashed bool) (n, crashed int, err error) {
	e, err := NewEnqueuer(EnqueuerConfig{Store: s})
	if err != nil {
		return 0, 0, fmt.Errorf("retry failed: %w", err)
	}
	return e.RetryFailed(ctx, userID, limit, includeCrashed)
}

// withKeys returns the turns whose keys are in keys, each key once.
func withKeys(turns []store.Turn, keys []store.TurnKey) []store.Turn {
	want := make(map[store.TurnKey]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	out := make([]store.Turn, 0, len(keys))
	for _, t := range turns {
		if want[t.Key()] {
			want[t.Key()] = false
			out = append(out, t)
		}
	}
	return out
}

// EnqueueIndexDocument inserts, in the put's transaction tx, the job that
// chunks a document stored pending: Worker.EnqueueIndexDocument for a
// process that runs no Worker (serve's enrich role). The workers of other
// processes run it.
func (e *Enqueuer) EnqueueIndexDocument(ctx context.Context, tx pgx.Tx, collectionID int64, docID, hash string) (int64, error) {
	if err := e.store.WithTx(tx).RefreshClock(ctx); err != nil {
		return 0, fmt.Errorf("enqueue document index: %w", err)
	}
	return insertIndexDocument(ctx, e.client, tx, collectionID, docID, hash)
}
