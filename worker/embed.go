package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// Embedding (issue 17): every context item gets a vector of the configured
// model, as River work apart from extraction.
//
//   - The transaction that writes context items (extraction's save, the
//     enricher's memory.store, a context edit) inserts their EmbedArgs jobs,
//     through the store's context hook (embedHook, installed by the EmbedFollower): an item never exists
//     without a job, and a write never waits for the model server.
//   - An embed job reads its items still lacking a current vector, embeds
//     them in requests of the client's BatchSize and saves the vectors. It
//     takes the items of waiting jobs along, up to
//     EmbedJobSize in all (claimEmbeds): under live ingest each write's
//     job holds an item or two, and one request each drained a backlog at
//     a text per round trip. Its
//     failures go through outcome (retry.go) like extraction's: a
//     Retry-After snoozes it, a transient error (server down, slow) is
//     retried with River's backoff, a permanent one cancels it. Meanwhile the
//     items are searchable lexically; nothing else waits.
//   - A process that embeds nothing itself (a replay or a worker without
//     --embed-base-url) gives its items jobs of the model the running
//     workers embed with (EmbedFollower, follow.go).
//   - The embed sweep (EmbedSweepArgs, periodic, and once at start on the
//     leader) enqueues jobs for every item without a vector of each model a
//     running worker embeds with: after a model change it re-embeds
//     everything in the background while the old model's vectors stay in
//     place, and it picks up items whose jobs ran out of attempts. `memoryd embed --backfill` does the same on demand
//     (Enqueuer.EnqueueMissingEmbeddings). Both do the same for document
//     chunks (chunkembed.go).

// Embedder embeds texts; *embedding.Client implements it.
type Embedder interface {
	// Embed returns one vector per text, in order; errors are
	// *embedding.Error.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Model is the model's name, stored with its vectors.
	Model() string
}

// Embedding job kinds and their queue.
const (
	EmbedJobKind      = "memoryd_embed"
	EmbedSweepJobKind = "memoryd_embed_sweep"
	// QueueEmbed is the embed queue of jobs inserted before each model had
	// its own (QueueEmbedFor), and by processes of such a release: every
	// embedding process works it, one job at a time.
	QueueEmbed = "embed"
)

// QueueEmbedFor is the queue of model's embed jobs, apart from extraction
// so that a backlog of either never delays the other, and apart from other
// models' so that only workers of the model fetch them: in one queue, a
// job fetched by a worker of another model (both models' serves run during
// a change of model, and every item gets both models' jobs) failed and
// used up an attempt each time, and was given up before one of its model
// took it. "embed_" and the first 12 hex digits of the model name's
// SHA-256: River's queue names are short and plain.
func QueueEmbedFor(model string) string {
	sum := sha256.Sum256([]byte(model))
	return "embed_" + hex.EncodeToString(sum[:6])
}

// embedJobs is EmbedArgs's shape for a forget, which deletes the user's
// embed jobs (they name the user and item ids, no text) with the rest.
var embedJobs = store.RiverJobs{Kind: EmbedJobKind, UserField: "user_id"}

// embedItemJobs is EmbedArgs's shape for the sweep, which leaves out the
// items a live job already holds.
func embedItemJobs(model string) store.ItemJobs {
	return store.ItemJobs{Kind: EmbedJobKind, Queues: []string{QueueEmbedFor(model), QueueEmbed},
		UserField: "user_id", ModelField: "model", ItemsField: "context_ids"}
}

// DefaultEmbedJobSize is Config.EmbedJobSize's default.
const DefaultEmbedJobSize = 64

// What enqueued an embed job (metaSource): the write of its items, or a
// sweep or backfill.
const (
	sourceEmbedWrite = "embed_write"
	sourceSweep      = "embed_sweep"
)

// EmbedArgs is the River job that embeds context items of one user.
type EmbedArgs struct {
	UserID     string  `json:"user_id"`
	ContextIDs []int64 `json:"context_ids"`
	// Model is the model the job embeds with; the job is on the model's
	// queue (QueueEmbedFor). A worker configured with another model (one
	// that took a job of the old shared queue) does not run it: the run
	// fails, is retried with River's backoff, and a worker of the model
	// takes it; when none is left the job gives up, harmlessly.
	Model string `json:"model"`
}

// Kind is River's job kind.
func (EmbedArgs) Kind() string { return EmbedJobKind }

// InsertOpts puts embed jobs on their model's queue.
func (a EmbedArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueEmbedFor(a.Model)}
}

// EmbedSweepArgs is the periodic job that enqueues embed jobs for every
// item without a vector of the current model.
type EmbedSweepArgs struct{}

// Kind is River's job kind.
func (EmbedSweepArgs) Kind() string { return EmbedSweepJobKind }

// embedText is what an item's vector is of: its question, and its answer on
// a line of its own.
func embedText(t store.EmbeddingTarget) string {
	if strings.TrimSpace(t.Answer) == "" {
		return t.Question
	}
	return t.Question + "\n" + t.Answer
}

// embedOpts are the insert options of embed jobs from source; unique makes
// a job a no-op insert while one with the same arguments is waiting,
// retrying or running (a sweep repeated while the server is down adds no
// jobs).
func (e *Enqueuer) embedOpts(source string, maxAttempts int, unique bool) (*river.InsertOpts, error) {
	meta, err := json.Marshal(map[string]any{metaSource: source})
	if err != nil {
		return nil, fmt.Errorf("enqueue embedding: %w", err)
	}
	// No queue: River takes the args' (EmbedArgs.InsertOpts), the model's.
	o := &river.InsertOpts{MaxAttempts: maxAttempts, Metadata: meta}
	if unique {
		o.UniqueOpts = river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{rivertype.JobStateAvailable,
			rivertype.JobStatePending, rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled}}
	}
	return o, nil
}

// embedParams cuts refs into jobs of one user and at most jobSize items.
func embedParams(refs []store.ContextRef, model string, jobSize int, opts *river.InsertOpts) []river.InsertManyParams {
	var users []string
	idsOf := map[string][]int64{}
	for _, r := range refs {
		if _, ok := idsOf[r.UserID]; !ok {
			users = append(users, r.UserID)
		}
		idsOf[r.UserID] = append(idsOf[r.UserID], r.ID)
	}
	var params []river.InsertManyParams
	for _, u := range users {
		for chunk := range slices.Chunk(idsOf[u], max(jobSize, 1)) {
			params = append(params, river.InsertManyParams{Args: EmbedArgs{UserID: u, ContextIDs: slices.Clone(chunk), Model: model}, InsertOpts: opts})
		}
	}
	return params
}

// embedHook returns the store.ContextHook (Store.SetContextHook) that
// inserts, in the writing transaction, embed jobs of the items written for
// each of the models models returns at the write (none: no job): at most
// jobSize items per job, each job running maxAttempts times (0: River's
// default).
func (e *Enqueuer) embedHook(models func() []string, jobSize, maxAttempts int) (store.ContextHook, error) {
	opts, err := e.embedOpts(sourceEmbedWrite, maxAttempts, false)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx, items []store.ContextRef) error {
		var params []river.InsertManyParams
		for _, m := range models() {
			params = append(params, embedParams(items, m, jobSize, opts)...)
		}
		if len(params) == 0 {
			return nil
		}
		if err := e.store.WithTx(tx).RefreshClock(ctx); err != nil {
			return fmt.Errorf("enqueue embedding: %w", err)
		}
		if _, err := e.client.InsertManyFastTx(ctx, tx, params); err != nil {
			return fmt.Errorf("enqueue embedding: %w", err)
		}
		return nil
	}, nil
}

// EnqueueMissingEmbeddings inserts embed jobs for model for every item of
// userID (every user's when empty) without a current vector of it, at most
// jobSize items per job, and returns how many items it found. An item a
// job of the model still to run or running already holds is not enqueued
// again (store.NotQueued), but is counted: a backfill run again waits for
// it (returning 0, it ended at once, its items waiting on jobs of a run
// with --no-work that nothing may work).
func (e *Enqueuer) EnqueueMissingEmbeddings(ctx context.Context, userID, model string, jobSize, maxAttempts int) (int, error) {
	opts, err := e.embedOpts(sourceSweep, maxAttempts, true)
	if err != nil {
		return 0, err
	}
	const page = 1000
	var n int
	for after := int64(0); ; {
		// One transaction a page, holding its users' locks (LockUsers) while
		// it inserts their jobs: a forget of one of them waits for the
		// commit and deletes the jobs, or committed before the items were
		// read again, which leaves its items out. Not row locks: the
		// unique insert can wait on a job row a forget is deleting, and
		// that forget would wait on them.
		var page1, refs []store.ContextRef
		var found int
		err := e.store.InTx(ctx, func(tx pgx.Tx, q *store.Store) error {
			var err error
			if page1, err = q.MissingEmbeddings(ctx, userID, model, after, page); err != nil || len(page1) == 0 {
				return err
			}
			tokens := make([]string, 0, 1)
			seen := map[string]bool{}
			for i, r := range page1 {
				if !seen[r.UserID] {
					if len(seen) == sweepUsersPerTx {
						// The rest is the next page's: a transaction
						// holds few locks (Postgres's lock table is
						// shared), and a forget waits on few users.
						page1 = page1[:i]
						break
					}
					seen[r.UserID] = true
					tokens = append(tokens, events.UserToken(r.UserID))
				}
			}
			if _, err := q.LockUsers(ctx, tokens); err != nil {
				return err
			}
			if refs, err = q.ExistingContext(ctx, page1); err != nil || len(refs) == 0 {
				return err
			}
			found = len(refs)
			// An item a waiting or running job already holds (a write's,
			// after a restart; a sweep's, beside a backfill) would have
			// its text sent twice.
			if refs, err = q.NotQueued(ctx, embedItemJobs(model), model, refs); err != nil || len(refs) == 0 {
				return err
			}
			if err := q.RefreshClock(ctx); err != nil {
				return err
			}
			_, err = e.client.InsertManyTx(ctx, tx, embedParams(refs, model, jobSize, opts))
			return err
		})
		if err != nil {
			return n, fmt.Errorf("enqueue embedding: %w", err)
		}
		if len(page1) == 0 {
			return n, nil
		}
		after = page1[len(page1)-1].ID
		n += found
	}
}

// RetryWaitingEmbeds makes every embed and chunk embed job of model that
// waits out River's retry backoff available at once, and returns how many
// it found. For an operator's backfill once the embeddings server is back:
// the backfill's unique insert adds no job beside one waiting for the same
// items, which would otherwise run when its backoff ends, up to 10 minutes
// later. The periodic sweep does not do this: a backoff it meets is the
// server still failing.
func (e *Enqueuer) RetryWaitingEmbeds(ctx context.Context, model string) (int, error) {
	const page = 1000
	params := river.NewJobListParams().Kinds(EmbedJobKind, ChunkEmbedJobKind).States(rivertype.JobStateRetryable).First(page)
	n := 0
	for {
		res, err := e.client.JobList(ctx, params)
		if err != nil {
			return n, fmt.Errorf("retry waiting embed jobs: %w", err)
		}
		for _, j := range res.Jobs {
			var args struct {
				Model string `json:"model"`
			}
			if err := json.Unmarshal(j.EncodedArgs, &args); err != nil || args.Model != model {
				continue // another model's, left to its workers
			}
			if _, err := e.client.JobRetry(ctx, j.ID); err != nil {
				return n, fmt.Errorf("retry waiting embed job %d: %w", j.ID, err)
			}
			n++
		}
		if len(res.Jobs) < page {
			return n, nil
		}
		params = params.After(res.LastCursor)
	}
}

// otherModelError is a job of another model than the worker's: left to a
// worker of that model (a rolling change of --embed-model), retried with
// River's backoff and given up when none takes it.
type otherModelError struct{ job, worker string }

func (e *otherModelError) Error() string {
	return fmt.Sprintf("embed job for model %q left to a worker of that model (this one embeds with %q)", e.job, e.worker)
}

// sweepUsersPerTx bounds the users whose locks one transaction of the
// embed sweep holds.
const sweepUsersPerTx = 64

// embedWorker is the River worker for EmbedArgs.
type embedWorker struct {
	river.WorkerDefaults[EmbedArgs]
	w *Worker
}

// Work embeds the job's items that still lack a current vector, with
// those of the waiting jobs it claims (claimEmbeds), and saves the vectors;
// a failure is decided by outcome, for the job itself.
func (e *embedWorker) Work(ctx context.Context, job *river.Job[EmbedArgs]) error {
	if metaHas(job.Metadata, store.ClaimedByKey) {
		// Claimed once, its lease ended (the claimer stalled or died
		// unseen) and River runs it: the claim is over. Cleared with
		// this run's end, so that a snoozed job neither reads as claimed
		// nor can be completed by the old claimer's late finish.
		_ = river.MetadataSet(ctx, store.ClaimedByKey, nil)
	}
	claimed := e.w.claimEmbeds(ctx, job)
	ended, blame, wait := errEmbedPanicked, blamed, time.Duration(0)
	defer func() {
		// Deferred so that a panic (River recovers it and fails the job)
		// gives the claims back too, rather than after their lease, and
		// marks the job as a failure for a text would.
		if errors.Is(ended, errEmbedPanicked) {
			_ = river.MetadataSet(ctx, store.UnclaimableKey, true)
		}
		if len(claimed) > 0 {
			e.w.endClaims(ctx, job.ID, claimed, ended, blame, wait)
		}
	}()
	// A job already suspected (marked unclaimable: it, or a batch it was
	// in, failed in a way one of its texts may have caused) finds the
	// text the server fails on, so that its other items get their
	// vectors (embedTexts).
	n, err := e.w.embed(ctx, job.Args, claimed, unclaimable(job.Metadata))
	blame, excuses := blameOf(err, job.Metadata, claimed)
	ended = err
	if err == nil {
		e.w.logger.Debug("embedded context items", "job_id", job.ID, "items", n, "claimed_jobs", len(claimed))
		return nil
	}
	b := e.w.budget()
	v := outcome(err, job.JobRow, errors.Is(ctx.Err(), context.Canceled), b)
	v = countSnooze(ctx, job.JobRow, err, v, b)
	if v.waitsForServer() {
		e.w.embedWaiting(err)
	}
	// A failure no text caused (the server down or overloaded), or one
	// excused (blameOf), leaves the job claimable: it batches again once
	// the server is back, its retries and those of the backlog.
	if blame == excused {
		// The claimer and its claims wait alike (endClaims), for the
		// batch's excuses so far.
		wait = excusedWait(e.w.cfg.JobRetryBase, excuses+1)
		_ = river.MetadataSet(ctx, metaExcused, excusesOf(job.Metadata)+1)
		if len(claimed) > 0 {
			// As for a blamed batch (below): the text that brought the
			// server down may be a claimed job's, and a claimer on its
			// last attempt was given up for it. Bounded: counted, its
			// failures are blamed past blameOf's limit.
			v = verdict{river: river.JobSnooze(wait), label: outcomeHandedBack}
		}
	}
	if blame == blamed {
		// One of its texts may be the cause: from now on it runs alone,
		// neither claiming nor claimed, like the jobs it had claimed.
		_ = river.MetadataSet(ctx, store.UnclaimableKey, true)
		if len(claimed) > 0 {
			// The batch held other jobs' texts: like them, it runs alone
			// next without spending an attempt (it can no longer claim,
			// so this happens once), and only a failure of its own texts
			// spends its attempts or gives it up. Charged here, a job on
			// its last attempt, or one whose batch the server refused
			// (embedSplitting's probe), was given up for another's text.
			v = verdict{river: river.JobSnooze(b.spread(b.modelWaitBase)), label: outcomeHandedBack}
		}
	}
	level, msg := embedFailureLog(v, err, "embedding failed; the items stay lexical-only until it succeeds")
	e.w.logger.Log(ctx, level, msg, "job_id", job.ID, "attempt", job.Attempt,
		"outcome", v.label, "kind", embedKindName(err), "items", len(job.Args.ContextIDs), "saved", n, "claimed_jobs", len(claimed), "error", err)
	return &jobEnd{op: "embed", label: v.label, river: v.river, cause: err}
}

// msgEmbedWaiting is the line of an embed or chunk-embed job that snoozes
// for a counted wait (outcome: the embeddings server down or rate
// limiting, the database out of reach, a lock).
const msgEmbedWaiting = "embedding waiting without spending attempts; the items or chunks stay lexical-only until it succeeds"

// msgEmbedRefuses is logged instead when the embeddings server refuses
// memoryd's configuration (a 401 or 404, or 403s: embedding.IsMisconfigured),
// as msgModelRefuses is for the model server.
const msgEmbedRefuses = "embeddings server refuses memoryd's API key or model (--embed-api-key or --embed-api-key-file, --embed-model, --embed-base-url, --embed-dimensions); embedding waiting for it to be fixed without spending attempts; the items or chunks stay lexical-only until then"

// embedKindName is the embedding client's kind of err for the log,
// "misconfigured" for a refusal of the configuration, "other" when the
// client did not fail (the store did, or the job's context ended).
func embedKindName(err error) string {
	if embedding.IsMisconfigured(err) {
		return "misconfigured"
	}
	if k := embedding.KindOf(err); k != 0 {
		return k.String()
	}
	return "other"
}

// embedWaiting notes that an embed or chunk embed job is being snoozed
// for the embeddings server (err: down, or refusing the configuration,
// which /readyz shows once it lasts: EmbedRefusing). A wait for another
// error ends the refusal: the server's errors are no longer refusals (a
// key fixed, and the server restarting), and /readyz blamed the key
// until the server answered.
func (w *Worker) embedWaiting(err error) {
	w.embedWaits.waiting()
	if embedding.IsMisconfigured(err) {
		w.embedRefusing.fail(err)
	} else {
		w.embedRefusing.end()
	}
}

// EmbedRefusing reports the embeddings server refusing memoryd's
// configuration (its API key, or the model) since its first refusal that
// no answer followed, nil while it answers (or before it refused), as
// ModelRefusing does for the model server: embed jobs wait meanwhile
// (--llm-max-outage), and new items are searched lexically only.
func (w *Worker) EmbedRefusing() *Outage { return w.embedRefusing.load() }

// msgEmbedGivenUp ends the line of an embed or chunk-embed job that gave
// up (its attempts spent, a refusal past --llm-max-outage, a text the
// server refuses): what brings the texts their vectors then. A
// key-rotation walk (before refusals waited) was told only "until it
// succeeds", which no job would retry.
const msgEmbedGivenUp = "; this job gave up: the hourly embed sweep enqueues them again, or run memoryd embed --backfill once the cause is fixed"

// msgEmbedRefusedRecorded ends the line of an embed job that gave up on
// texts recorded as refused (refusalsRecorded).
const msgEmbedRefusedRecorded = "; this job gave up: the embeddings server refused their texts as input, recorded as refused, which the hourly embed sweep and memoryd embed --backfill leave out until the text or the model changes (memoryd embed --backfill --retry-refused sends them again, once the server takes longer texts)"

// embedFailureLog is the level and message of an embed or chunk-embed
// job's failure line (failed is its message). A counted wait is logged as
// extraction's are: at the job's first wait a warning for the database out
// of reach (the process's handler holds msgEmbedWaiting back to one every
// 30 s: OutageRepeats), an info line for a lock or a rate limit, and the
// later waits at debug; with embeddings on every write is a job, and each
// wait of each was a warning.
func embedFailureLog(v verdict, err error, failed string) (slog.Level, string) {
	switch {
	case errors.As(err, new(*otherModelError)):
		// Not a failure: a rolling model change, or the previous model's
		// jobs after one; the sweep of this model covers their items.
		return slog.LevelDebug, failed
	case v.final && errors.As(err, new(*refusalsRecorded)):
		// Not an error to act on: the server does not take those texts,
		// and the sweep and a backfill leave them out (an operations
		// walk: this line said the sweep would enqueue them again, and
		// told the operator to run the backfill, which left them out).
		return slog.LevelWarn, failed + msgEmbedRefusedRecorded
	case v.final:
		return slog.LevelError, failed + msgEmbedGivenUp
	case v.label == outcomeModelRefused:
		level := waitLevel(v.n, slog.LevelWarn)
		if v.hold() {
			level = slog.LevelDebug // held back for this process's probe
		}
		return level, msgEmbedRefuses
	case v.label == outcomeDBDown || v.waitsForServer():
		if v.hold() {
			return slog.LevelDebug, msgEmbedWaiting
		}
		return waitLevel(v.n, slog.LevelWarn), msgEmbedWaiting
	case v.count != "": // a lock or a rate limit, as extraction's
		return waitLevel(v.n, slog.LevelInfo), msgEmbedWaiting
	}
	return slog.LevelWarn, failed
}

// claimedEmbed is a waiting embed job an embed job claimed.
type claimedEmbed struct {
	id   int64
	args EmbedArgs
	// excused is the count in its metadata's metaExcused (blameOf).
	excused int
}

// claimLeaseMargin is how long claimed jobs outlast their claimer's
// deadline before River takes them back (the claimer's process died
// without a takeover, e.g. the last one).
const claimLeaseMargin = time.Minute

// claimEmbeds claims, for job, waiting embed jobs of its model (store.ClaimJobs)
// up to EmbedJobSize items in all, so that a backlog of small jobs (one per
// write under live ingest) is embedded in requests of many texts instead
// of one request each. A job marked unclaimable (store.UnclaimableKey: it
// failed, or was in a batch that failed, in a way one of its texts may have
// caused) does not claim: it does not take others down with it. Claiming
// saves requests and nothing else: when it fails, the job runs alone.
func (w *Worker) claimEmbeds(ctx context.Context, job *river.Job[EmbedArgs]) []claimedEmbed {
	model := w.cfg.Embedder.Model()
	room := w.cfg.EmbedJobSize - len(job.Args.ContextIDs)
	if room < 1 || job.Args.Model != model || job.Queue != QueueEmbedFor(model) || unclaimable(job.Metadata) {
		return nil
	}
	lease := w.cfg.JobTimeout
	if d, ok := ctx.Deadline(); ok {
		lease = time.Until(d)
	}
	jobs, err := w.cfg.Store.ClaimJobs(ctx, store.JobClaim{Claimer: job.ID, Kind: EmbedJobKind, Queue: job.Queue,
		ItemsField: "context_ids", MaxItems: room, Lease: lease + claimLeaseMargin})
	if err != nil {
		// The claim may have committed all the same (the context ended as
		// the reply came): whatever this job holds goes back.
		w.logger.Warn("claiming waiting embed jobs failed; this one runs alone", "job_id", job.ID, "error", err)
		w.releaseClaims(ctx, job.ID, nil, "", 0)
		return nil
	}
	claimed := make([]claimedEmbed, 0, len(jobs))
	var strays []int64
	for _, j := range jobs {
		var args EmbedArgs
		if err := json.Unmarshal(j.Args, &args); err != nil || args.Model != model {
			strays = append(strays, j.ID) // not this model's after all: left to run alone
			continue
		}
		claimed = append(claimed, claimedEmbed{id: j.ID, args: args, excused: excusesOf(j.Metadata)})
	}
	if len(strays) > 0 {
		w.releaseClaims(ctx, job.ID, strays, store.UnclaimableKey, 0)
	}
	return claimed
}

// unclaimable reports whether a job's metadata marks it released from a
// failed batch.
func unclaimable(metadata []byte) bool {
	return metaHas(metadata, store.UnclaimableKey)
}

// metaHas reports whether a job's metadata holds key with a value other
// than null.
func metaHas(metadata []byte, key string) bool {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(metadata, &m); err != nil {
		return false
	}
	v, ok := m[key]
	return ok && string(v) != "null"
}

// endClaims completes the claimed jobs once their items are saved (err
// nil), or gives them back to River: to run alone when the failure is
// blamed on the batch's texts (blameOf), else to be claimed again, after
// the server's Retry-After (counted, and after wait, when excused). Either
// is bounded and outlives the job's context (a shutdown cancels it): left
// undone, the jobs wait for their lease, and then run and find their
// items embedded, or run alone.
func (w *Worker) endClaims(ctx context.Context, claimer int64, claimed []claimedEmbed, err error, blame textBlame, wait time.Duration) {
	ids := make([]int64, len(claimed))
	for i, c := range claimed {
		ids[i] = c.id
	}
	if err != nil {
		after, _ := embedding.RetryAfterOf(err) // at most embedding.MaxRetryAfter
		if f, ok := errors.AsType[*serverFault](err); ok {
			// The control's own Retry-After (a 503 while the model loads).
			if d, ok := embedding.RetryAfterOf(f.control); ok {
				after = max(after, d)
			}
		}
		mark := map[textBlame]string{blamed: store.UnclaimableKey, excused: metaExcused}[blame]
		if blame == excused {
			// Run again when the claimer does, rather than at once:
			// meanwhile a server that is restarting comes back (else the
			// next failures use up their excuses at once).
			after = max(after, wait)
		}
		w.releaseClaims(ctx, claimer, ids, mark, after)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := w.cfg.Store.FinishClaimed(ctx, claimer, ids); err != nil {
		w.logger.Warn("completing claimed embed jobs failed; they run when their lease ends and find their items embedded",
			"job_id", claimer, "claimed_jobs", len(ids), "error", err)
	}
}

// errEmbedPanicked is how endClaims learns that the batch's embed
// panicked.
var errEmbedPanicked = errors.New("embed panicked")

// metaExcused counts the failed batches an embed job was in that one of
// their texts may have caused, but that blameOf excused (the server then
// failed a request of controlText alone too).
const metaExcused = "memoryd_embed_excused"

// Excuses before a batch's failure is blamed on its texts, by what the
// server did (blameOf): answered neither the batch nor the control (down,
// or crashed by a text and restarting), or answered both with an error
// status (overloaded, broken, or a proxy answering for a backend a text
// crashed). With excusedWait's doubling delays from the 2 s retry base,
// three excuses cover about 14 s of a server answering every request with
// a 500.
const (
	maxSilentExcuses   = 1
	maxAnsweredExcuses = 3
)

// excusesOf is the count of metaExcused in a job's metadata.
func excusesOf(metadata []byte) int {
	var m map[string]json.RawMessage
	if json.Unmarshal(metadata, &m) != nil {
		return 0
	}
	var n int
	if json.Unmarshal(m[metaExcused], &n) != nil {
		return 0
	}
	return n
}

// excusedWait is how long the jobs of a batch excused for the n-th time
// wait before they run again: base doubling per excuse, up to a minute,
// spread.
func excusedWait(base time.Duration, n int) time.Duration {
	return spread(min(base<<min(max(n-1, 0), 10), time.Minute))
}

// textBlame is what a failed embed run holds the batch's texts to
// (blameOf).
type textBlame int

const (
	// notBlamed: the failure is no text's; the jobs may batch again.
	notBlamed textBlame = iota
	// excused: a text may be the cause, or the server's own trouble; the
	// batch's jobs count it (metaExcused), wait, and may batch again.
	excused
	// blamed: the job and those it claimed run alone from then on (and a
	// job running alone finds the failing text: embedTexts' isolate).
	blamed
)

// blameOf decides, once a run, for the job (with metadata) and the jobs it
// claimed alike, whether the run's failure err is blamed on the batch's
// texts:
//
//   - a panic is blamed;
//   - a failure no text can cause is not (embedding.InputMayBeCause: the
//     server asking to slow down, unreachable, a 502/503/504; a shutdown,
//     a database error);
//   - a failure some text may have caused is excused when the server
//     failed a request of controlText alone as well (serverFault): a blip
//     of 500s under a backlog turned every job claimed at the time into
//     one request each, for good (45 of 123 jobs in an audit). Excuses
//     are counted per job, and a batch holding a job that has had its
//     share is blamed: a text that crashes the server, which then answers
//     the control with a 503 while it restarts, or not at all, or a proxy
//     before it a 500, would otherwise fail every batch that took it and
//     use up the attempts of the jobs that claimed it (170 batches, 13 of
//     24 jobs given up, in a review's test). The share is one excuse when
//     the server answered neither the batch nor the control, or only the
//     control (a crash looks so), and three when it answered both;
//   - any other failure a text may have caused is blamed.
//
// It also returns the most excuses a job of the batch has had.
func blameOf(err error, metadata []byte, claimed []claimedEmbed) (textBlame, int) {
	f, ok := errors.AsType[*serverFault](err)
	switch {
	case err == nil:
		return notBlamed, 0
	case errors.Is(err, errEmbedPanicked):
		return blamed, 0
	case ok:
		n := excusesOf(metadata)
		for _, c := range claimed {
			n = max(n, c.excused)
		}
		limit := maxSilentExcuses
		if f.answered {
			limit = maxAnsweredExcuses
		}
		if n >= limit {
			return blamed, n
		}
		return excused, n
	case embedding.InputMayBeCause(err):
		return blamed, 0
	}
	return notBlamed, 0
}

// releaseClaims gives claimed jobs (every one claimer holds, when ids is
// nil) back to River, marked with the metadata key mark unless it is ""
// (store.ReleaseClaimed).
func (w *Worker) releaseClaims(ctx context.Context, claimer int64, ids []int64, mark string, after time.Duration) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := w.cfg.Store.ReleaseClaimed(ctx, claimer, ids, mark, after); err != nil {
		w.logger.Warn("releasing claimed embed jobs failed; they go back to River when their lease ends",
			"job_id", claimer, "claimed_jobs", len(ids), "error", err)
	}
}

// embed embeds the items of args and of the claimed jobs that lack a
// current vector of the job's model, which must be the worker's, and
// returns how many it saved. With isolate, a text the server fails on
// is found and left out, as a refused one is (embedTexts).
func (w *Worker) embed(ctx context.Context, args EmbedArgs, claimed []claimedEmbed, isolate bool) (int, error) {
	s, emb := w.cfg.Store, w.cfg.Embedder
	model := emb.Model()
	if args.Model != "" && args.Model != model {
		return 0, &otherModelError{job: args.Model, worker: model}
	}
	refs := make([]store.ContextRef, 0, len(args.ContextIDs))
	for _, a := range append([]EmbedArgs{args}, argsOf(claimed)...) {
		for _, id := range a.ContextIDs {
			refs = append(refs, store.ContextRef{UserID: a.UserID, ID: id})
		}
	}
	targets, err := s.EmbeddingTargetsOf(ctx, refs, model)
	if err != nil || len(targets) == 0 {
		return 0, err
	}
	texts := make([]string, len(targets))
	for i, t := range targets {
		texts[i] = embedText(t)
	}
	gaveUp := make([]bool, len(texts))
	vs, err := w.embedTexts(ctx, "context items", texts, isolate, gaveUp)
	if err != nil {
		err = refusedAll(err, vs, gaveUp)
	}
	// The vectors received are saved before the refusals are recorded: a
	// failed record (the job is retried) then costs the refused texts'
	// requests again, not the paid ones. Before, it returned first, and
	// the retry embedded every text of the job again
	// (TestEmbedRefusalSaveFailingKeepsTheVectors).
	var n int64
	if vs != nil {
		writes := make([]store.EmbeddingWrite, 0, len(targets))
		for i, t := range targets {
			if vs[i] != nil {
				writes = append(writes, store.EmbeddingWrite{ContextID: t.ID, ContentHash: t.ContentHash, Dims: len(vs[i]), Vector: embedding.Encode(vs[i])})
			}
		}
		var serr error
		if n, serr = s.SaveEmbeddings(ctx, model, writes); serr != nil {
			return int(n), serr
		}
	}
	if rerr := w.saveRefusals(ctx, model, targets, gaveUp); rerr != nil {
		return int(n), rerr
	}
	if vs == nil {
		return 0, err
	}
	// Saved what came; err (a *lostTexts, or a failure after some halves
	// were embedded) has the job retried for the rest.
	return int(n), err
}

// refusalsRecorded is the error of an embed run whose texts left without
// a vector were all recorded as refused (saveRefusals): the job gives up,
// and its line says what follows, which is not what follows other give-ups
// (embedFailureLog).
type refusalsRecorded struct{ err error }

func (e *refusalsRecorded) Error() string { return e.err.Error() }
func (e *refusalsRecorded) Unwrap() error { return e.err }

// refusedAll is err marked as refusalsRecorded when every text without a
// vector in vs (nil: none has one) was recorded as refused (gaveUp), and
// err as it is otherwise.
func refusedAll(err error, vs [][]float32, gaveUp []bool) error {
	for i, g := range gaveUp {
		if !g && (vs == nil || vs[i] == nil) {
			return err
		}
	}
	if !slices.Contains(gaveUp, true) {
		return err
	}
	return &refusalsRecorded{err: err}
}

// saveRefusals records the targets whose texts the server refused alone
// (gaveUp: with every shorter start embedStart tried), so that the sweep
// and a backfill leave them out until their text or the model changes.
// Before, the hourly sweep sent each of them again, for ever.
func (w *Worker) saveRefusals(ctx context.Context, model string, targets []store.EmbeddingTarget, gaveUp []bool) error {
	var rs []store.EmbeddingRefusal
	for i, t := range targets {
		if gaveUp[i] {
			rs = append(rs, store.EmbeddingRefusal{ContextID: t.ID, ContentHash: t.ContentHash})
		}
	}
	if len(rs) == 0 {
		return nil
	}
	if _, err := w.cfg.Store.SaveEmbeddingRefusals(ctx, model, rs); err != nil {
		return err
	}
	w.logger.Info("recorded context items whose text the embeddings server refused; the embed sweep and backfill skip them until their text or the model changes (memoryd embed --backfill --retry-refused sends them again)",
		"model", model, "items", len(rs))
	return nil
}

func argsOf(claimed []claimedEmbed) []EmbedArgs {
	out := make([]EmbedArgs, len(claimed))
	for i, c := range claimed {
		out[i] = c.args
	}
	return out
}

// maxEmbedInputBytes bounds the text of one item or chunk sent to the
// embeddings server: its start stands for it. 8 KiB is about 2,000
// tokens, inside the context of common embedding models (OpenAI's 8,191
// tokens, nomic-embed-text's 8,192); a server that refuses it anyway
// refuses that text alone (embedTexts), whose shorter start is then
// tried (embedStart: a 512-token model). A query is cut at 4 KiB
// (enricher).
const maxEmbedInputBytes = 8 << 10

// cutEmbedInput is text cut to maxEmbedInputBytes, at a rune boundary.
func cutEmbedInput(text string) string {
	if len(text) <= maxEmbedInputBytes {
		return text
	}
	// Back to the start of the rune the cut falls in (at most 3 bytes in
	// valid UTF-8, which the texts, read from Postgres, are).
	n := maxEmbedInputBytes
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	return text[:n]
}

// embedTexts embeds texts (each cut to maxEmbedInputBytes), one vector
// each, in order, of the dimensions recorded for the model (checkDims). When the server refuses a request's input
// (embedding.RefusedInput: a text over the model's context), the texts are
// split in halves, and halves again, until the texts it refuses alone are
// found: they get no vector (nil) and stay lexical-only, and the others
// get theirs, rather than one text costing its whole job (which every
// sweep would rebuild). Texts answered with an unusable vector
// (embedding.UnusableOf) are left out the same way. With isolate, so are
// texts the server fails on (failedOnInput: a 500), found the same way:
// without it, one text that makes the server fail kept every other item
// of its job (up to EmbedJobSize, a sweep's or a backfill's) from ever
// getting a vector. Not on a first failure: a server failing every
// request (overloaded, as some answer with a 500) would get three
// requests for one. Any other failure, and a refusal of every text, is
// returned: with the vectors of the halves embedded before it, when there
// are any (the caller saves them), else with none. A failure some text may
// have caused, before any vector came, is followed by a control request
// (againAfterControl).
func (w *Worker) embedTexts(ctx context.Context, what string, texts []string, isolate bool, gaveUp []bool) ([][]float32, error) {
	cut := make([]string, len(texts))
	for i, t := range texts {
		cut[i] = cutEmbedInput(t)
	}
	vs := make([][]float32, len(cut))
	lost := &lostTexts{}
	refused, refusal, err := embedSplitting(ctx, w.cfg.Embedder, cut, vs, gaveUp, true, isolate, lost)
	someVectors := slices.ContainsFunc(vs, func(v []float32) bool { return v != nil })
	if err != nil && (!isolate || forbidden(err)) && !someVectors && embedding.InputMayBeCause(err) && !embedding.RefusedInput(err) {
		refused, refusal, err = w.againAfterControl(ctx, cut, vs, gaveUp, err)
	}
	controlled := false
	if err != nil && gaveUp != nil && len(texts) > 1 && !someVectors && embedding.RefusedInput(err) {
		// The batch's shortest and longest texts were refused alone
		// (embedSplitting's probe), which a refusal of the requests looks
		// like too. When the server embeds controlText, the texts are
		// refused, not the requests: each is found, so that its refusal
		// is recorded. Else a job of refused texts alone (a backfill's
		// --retry-refused) was cancelled with nothing recorded, and the
		// sweep sent them all again every hour.
		controlled = true
		if w.controlEmbedded(ctx) {
			refused, refusal, err = embedSplitting(ctx, w.cfg.Embedder, cut, vs, gaveUp, false, isolate, lost)
		}
	}
	if slices.ContainsFunc(vs, func(v []float32) bool { return v != nil }) {
		// The server answers: the jobs waiting for it need not wait out
		// their snoozes.
		w.embedAnswered()
	}
	if err != nil {
		if !someVectors {
			return nil, err
		}
		// Halving a refused batch, some halves were embedded before the
		// failure: their vectors are returned with it, to be saved
		// rather than sent (and billed) again by the retry.
		if derr := w.checkDims(ctx, vs); derr != nil {
			return nil, derr
		}
		return vs, err
	}
	n, other, err := w.otherDimsRefused(ctx, cut, vs, gaveUp)
	if err != nil {
		return nil, err
	}
	if refused += n; refusal == nil {
		refusal = other
	}
	if refused == len(texts) {
		if gaveUp != nil && !controlled && !w.controlEmbedded(ctx) {
			// Every text refused, and so is controlText: the server
			// refuses the requests (a parameter, --embed-dimensions for
			// a model without them), not these texts.
			clear(gaveUp)
		}
		return nil, refusal
	}
	if refused > 0 {
		w.logger.Warn("the embeddings server refused some texts alone, or answered them with unusable vectors or vectors of other dimensions than the model's; they stay lexical-only (the next sweep tries them again, but for context items refused as input: recorded as refused)",
			"what", what, "refused", refused, "embedded", len(texts)-refused-lost.n, "error", refusal)
	}
	if err := w.checkDims(ctx, vs); err != nil {
		return nil, err
	}
	if lost.n > 0 {
		// The others' vectors are kept; the job is retried for these
		// (a 500 may be the server's passing trouble, not the text's).
		return vs, lost
	}
	return vs, nil
}

// controlText is the text embedTexts sends alone after a batch failed in
// a way one of its texts may have caused: any model embeds it, so a server
// that fails it is failing every request, not the batch's texts.
const controlText = "memory"

// controlTimeout bounds the control request, whose reply a server that
// works takes milliseconds to send.
const controlTimeout = 10 * time.Second

// controlEmbedded reports whether the server embeds controlText now: when
// it refused every text of a job alone, only then are the refusals the
// texts' (recorded, so that no sweep sends them again) rather than the
// requests'.
func (w *Worker) controlEmbedded(ctx context.Context) bool {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), controlTimeout)
	defer cancel()
	vs, err := w.cfg.Embedder.Embed(cctx, []string{controlText})
	return err == nil && len(vs) == 1 && vs[0] != nil
}

// againAfterControl follows a batch's failure (failed) that one of its texts
// may have caused (not a refusal: embedSplitting halves those) with a
// request of controlText alone. When the server fails that too, the
// failure is the server's: a *serverFault (blameOf). When it embeds
// it, the server works: a batch it answered with an error status (a 500)
// is sent once more, so that a passing failure costs no job its place in
// batches, and its second failure, like a timeout or a dropped connection
// (sent again, it would cost a second wait), is the batch's.
func (w *Worker) againAfterControl(ctx context.Context, texts []string, out [][]float32, gaveUp []bool, failed error) (refused int, refusal, err error) {
	// Apart from the job's deadline, which a batch that timed out may have
	// spent (a shutdown cancels no such failure: InputMayBeCause).
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), controlTimeout)
	_, cerr := w.cfg.Embedder.Embed(cctx, []string{controlText})
	cancel()
	if embedding.IsMisconfigured(cerr) {
		// The server refuses the key or the model (a 403 to the batch
		// and to the control: embedding.Client's refused): the
		// configuration's failure, waited for (outcome), no text's.
		return 0, nil, cerr
	}
	if cerr != nil && len(embedding.UnusableOf(cerr)) == 0 {
		// Taken for the server's failure only when it answered both: a
		// batch it dropped (or timed out on) and a control it then
		// answered with an error status is a server that went down and
		// answers while it comes back (a 503 while the model loads, a
		// proxy's 502 or 500), as when a text crashed it: excused once
		// (blameOf), never for good, else such a text failed every batch
		// that took it (170 batches, 13 of 24 jobs given up, in a test).
		return 0, nil, &serverFault{err: failed, control: cerr, answered: answered(cerr) && answered(failed)}
	}
	if !answered(failed) {
		return 0, nil, failed
	}
	return embedSplitting(ctx, w.cfg.Embedder, texts, out, gaveUp, true, false, &lostTexts{})
}

// forbidden reports whether err is a 403 the client did not take for the
// configuration's (one request's, as far as it knows): a job isolating
// its texts sends the control too, which a server refusing the key
// refuses as well (embedding.IsMisconfigured), rather than be cancelled
// for the key.
func forbidden(err error) bool {
	var e *embedding.Error
	return errors.As(err, &e) && e.Status == http.StatusForbidden && !e.Misconfigured
}

// answered reports whether err is the embeddings server's reply with an
// error status, rather than a timeout, a dropped connection, a request
// never sent or a reply that could not be read.
func answered(err error) bool {
	var e *embedding.Error
	return errors.As(err, &e) && e.Status != 0
}

// serverFault is embedTexts' error when a batch failed in a way one of its
// texts may have caused and the server then failed a request of
// controlText alone as well (againAfterControl): the failure is taken for
// the server's, not the texts' (blameOf). It unwraps to the batch's
// error, which decides the job's retry (outcome).
type serverFault struct {
	err, control error
	// answered: the server answered the control with an error status;
	// else it did not answer it (a timeout, a dropped or refused
	// connection).
	answered bool
}

func (e *serverFault) Error() string {
	return fmt.Sprintf("%v (a request of one short text failed too, so the server is failing, not a text: %v)", e.err, e.control)
}
func (e *serverFault) Unwrap() error { return e.err }

// lostTexts is embedTexts' error when, isolating, it found texts the
// server failed on alone (a 500): it returns the others' vectors with it,
// for the caller to save before the job is retried for those texts.
type lostTexts struct {
	n   int
	err error // the first such failure
}

func (e *lostTexts) Error() string {
	return fmt.Sprintf("the embeddings server failed on %d texts alone: %v", e.n, e.err)
}
func (e *lostTexts) Unwrap() error { return e.err }

// checkDims checks vs's dimensions against those recorded for the model
// (recording them on its first reply): other dimensions under the same
// name are another model behind it, whose vectors no query of the
// recorded size can be compared with.
func (w *Worker) checkDims(ctx context.Context, vs [][]float32) error {
	i := slices.IndexFunc(vs, func(v []float32) bool { return v != nil })
	if i < 0 {
		return nil
	}
	model, dims := w.cfg.Embedder.Model(), len(vs[i])
	// The vectors of one job come from several requests when a batch was
	// halved (a refused or failed text) or sent again after the control
	// text: a server whose model changed between them (an alias pointed
	// elsewhere meanwhile, a proxy's fallback to another model) answered
	// with vectors of two sizes, and those of the other size were saved
	// beside the recorded ones, then read by every query of that size.
	// Checked first: the first vector's size, maybe the odd one, is not
	// to be recorded as the model's.
	if j := slices.IndexFunc(vs[i+1:], func(v []float32) bool { return v != nil && len(v) != dims }); j >= 0 {
		return &embedding.Error{Kind: embedding.KindTransient, Reason: fmt.Sprintf(
			"the server answered the requests of one job with vectors of %d and %d dimensions (the model behind the name %q changed meanwhile?)",
			dims, len(vs[i+1+j]), model)}
	}
	want, err := w.cfg.Store.EmbeddingDims(ctx, model, dims)
	if err != nil {
		return err
	}
	if dims != want {
		return &embedding.Error{Kind: embedding.KindPermanent, Reason: fmt.Sprintf(
			"the model behind the name %q changed: it answered with %d dimensions, its stored vectors have %d; "+
				"to re-embed everything with it, run `memoryd embed --backfill --dims %d`, or name it anew with --embed-model",
			model, dims, want, dims)}
	}
	return nil
}

// otherDimsRefused finds the texts of vs answered with vectors of other
// dimensions than those recorded for the model, while the control text is
// answered in them, and every such text again in the same other size,
// twice: the server answers these texts so (a proxy routing some inputs
// to another model), not a model changed behind the name (checkDims says
// so) or between two requests. They are left without a vector and
// recorded as refused (gaveUp), as a text refused as input is, so that
// the sweep stops sending them; a model's new dimensions (embed
// --backfill --dims) forget the refusals. It returns how many and why.
// Not confirmed, or without gaveUp, vs is left as it is for checkDims.
func (w *Worker) otherDimsRefused(ctx context.Context, texts []string, vs [][]float32, gaveUp []bool) (int, error, error) {
	i := slices.IndexFunc(vs, func(v []float32) bool { return v != nil })
	if gaveUp == nil || i < 0 {
		return 0, nil, nil
	}
	model, dims := w.cfg.Embedder.Model(), len(vs[i])
	// Vectors of two sizes: the model's dimensions, when none are recorded
	// yet, are the control text's, not the first text's (maybe an odd
	// one, whose size recorded would make the model's own texts the odd
	// ones, and every later job a model changed behind its name).
	var control []float32
	if slices.ContainsFunc(vs[i+1:], func(v []float32) bool { return v != nil && len(v) != dims }) {
		if control = w.controlVector(ctx); control == nil {
			return 0, nil, nil // checkDims refuses the two sizes
		}
		dims = len(control)
	}
	want, err := w.cfg.Store.EmbeddingDims(ctx, model, dims)
	if err != nil {
		return 0, nil, err
	}
	var odd []int
	var oddTexts []string
	for j, v := range vs {
		if v != nil && len(v) != want {
			if len(odd) > 0 && len(v) != len(vs[odd[0]]) {
				return 0, nil, nil // two other sizes: not these texts' answer
			}
			odd, oddTexts = append(odd, j), append(oddTexts, texts[j])
		}
	}
	if len(odd) == 0 {
		return 0, nil, nil
	}
	if control == nil {
		control = w.controlVector(ctx)
	}
	if len(control) != want {
		return 0, nil, nil
	}
	other := len(vs[odd[0]])
	for range 2 {
		again, err := w.cfg.Embedder.Embed(ctx, oddTexts)
		if err != nil || len(again) != len(oddTexts) ||
			slices.ContainsFunc(again, func(v []float32) bool { return len(v) != other }) {
			return 0, nil, nil
		}
	}
	for _, j := range odd {
		vs[j], gaveUp[j] = nil, true
	}
	return len(odd), &embedding.Error{Kind: embedding.KindPermanent, Reason: fmt.Sprintf(
		"the server answers %d texts with vectors of %d dimensions, the model %q's are %d (and the control text's)",
		len(odd), other, model, want)}, nil
}

// controlVector is the server's vector for controlText, or nil when it
// fails on it (within controlTimeout).
func (w *Worker) controlVector(ctx context.Context) []float32 {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), controlTimeout)
	defer cancel()
	cvs, err := w.cfg.Embedder.Embed(cctx, []string{controlText})
	if err != nil || len(cvs) != 1 {
		return nil
	}
	return cvs[0]
}

// embedSplitting embeds texts into out (len(out) == len(texts)), halving
// a batch the server refuses as input (and, with isolate, one it fails
// on: failedOnInput); it returns how many texts were refused alone (their
// vectors left nil) and the first refusal. Other errors end it. With
// probe (the whole batch, not its halves), a refused batch's shortest and
// longest text are tried alone first: both refused, the refusal is the
// requests' (a 400 for an unknown model or parameter, every text too
// long, a server failing every request) and is returned at once, rather
// than halving down to every text (2n-1 requests).
func embedSplitting(ctx context.Context, emb Embedder, texts []string, out [][]float32, gaveUp []bool, probe, isolate bool, lost *lostTexts) (refused int, refusal, err error) {
	// A batch answered in two sizes is halved too: the texts answered in
	// another size than their model's are then found (otherDimsRefused).
	textual := func(err error) bool {
		return embedding.RefusedInput(err) || (isolate && failedOnInput(err)) || embedding.MixedDims(err)
	}
	vs, err := emb.Embed(ctx, texts)
	switch {
	case (err == nil || len(embedding.UnusableOf(err)) > 0) && len(vs) != len(texts):
		return 0, nil, &embedding.Error{Kind: embedding.KindTransient, Reason: fmt.Sprintf("%d vectors for %d texts", len(vs), len(texts))}
	case err == nil:
		copy(out, vs)
		return 0, nil, nil
	case len(embedding.UnusableOf(err)) > 0:
		// The server answered some texts with a vector that cannot be used
		// (null, NaN, zero): they are left out as refused ones are, the
		// others' vectors kept.
		copy(out, vs)
		return len(embedding.UnusableOf(err)), err, nil
	case !textual(err):
		return 0, nil, err
	case len(texts) == 1 && !embedding.RefusedInput(err):
		// Failed alone (isolating): not a refusal, which another attempt
		// gets again, but maybe the server's passing trouble.
		if lost.n++; lost.err == nil {
			lost.err = err
		}
		return 0, nil, nil
	case len(texts) == 1:
		// Refused alone: the model may hold less than the 8 KiB cut
		// (512 tokens: mxbai-embed-large, TEI's BERT models, llama.cpp's
		// default batch), so its start, cut shorter, may pass and the
		// text get the vector of its start, as the cut means it to.
		// Before, it got none.
		v, serr := embedStart(ctx, emb, texts[0])
		if v != nil {
			out[0] = v
			return 0, nil, nil
		}
		if gaveUp != nil && serr == nil {
			// Recorded only when every start was refused too: a start
			// the server failed (a 503, a timeout, a dropped
			// connection) says nothing of the text, and recorded, the
			// item was left out by every sweep for good.
			gaveUp[0] = true
		}
		return 1, err, nil
	}
	if probe {
		// The shortest text, then the longest: both refused alone, the
		// refusal is taken for the requests' (or every text's). One alone
		// could be refused for what it holds, not for its length.
		byLen := func(a, b string) int { return len(a) - len(b) }
		_, short := emb.Embed(ctx, []string{slices.MinFunc(texts, byLen)})
		switch {
		case short == nil || len(embedding.UnusableOf(short)) > 0:
			// Accepted (an unusable vector is the text's): halve.
		case !textual(short):
			return 0, nil, short
		default:
			_, long := emb.Embed(ctx, []string{slices.MaxFunc(texts, byLen)})
			if long != nil && len(embedding.UnusableOf(long)) == 0 {
				return 0, nil, long
			}
		}
	}
	half := len(texts) / 2
	r1, f1, err := embedSplitting(ctx, emb, texts[:half], out[:half], sub(gaveUp, 0, half), false, isolate, lost)
	if err != nil {
		return 0, nil, err
	}
	r2, f2, err := embedSplitting(ctx, emb, texts[half:], out[half:], sub(gaveUp, half, len(texts)), false, isolate, lost)
	if err != nil {
		return 0, nil, err
	}
	if f1 == nil {
		f1 = f2
	}
	return r1 + r2, f1, nil
}

// sub is b[i:j], nil when b is.
func sub(b []bool, i, j int) []bool {
	if b == nil {
		return nil
	}
	return b[i:j]
}

// minEmbedStartBytes is the shortest start of a refused text embedStart
// tries: about 250 tokens, under any embedding model's context.
const minEmbedStartBytes = 1 << 10

// embedStart embeds the start of a text the server refused alone as
// input, halving it (from 4 KiB) down to minEmbedStartBytes while the
// server refuses it as input. No vector and no error: every start tried
// was refused as input too, or the text is too short to cut (a refusal
// for what the text holds, or a model of a tiny context). No vector and
// an error: a start met another failure (the server's, maybe passing),
// which tells nothing of the text.
func embedStart(ctx context.Context, emb Embedder, text string) ([]float32, error) {
	for n := min(len(text)/2, maxEmbedInputBytes/2); n >= minEmbedStartBytes; n /= 2 {
		cut := n
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		vs, err := emb.Embed(ctx, []string{text[:cut]})
		switch {
		case err == nil && len(vs) == 1 && vs[0] != nil:
			return vs[0], nil
		case err == nil:
			return nil, errors.New("no usable vector for the start of a refused text")
		case !embedding.RefusedInput(err):
			return nil, err
		}
	}
	return nil, nil
}

// failedOnInput reports whether the server answered a request with an
// error one of its texts may have caused (a 500; not a 502, 503 or 504:
// embedding.InputMayBeCause), where a timeout or a dropped connection
// tells nothing about which text: halving on those would wait out a
// timeout per half.
func failedOnInput(err error) bool {
	var e *embedding.Error
	return errors.As(err, &e) && e.Status >= http.StatusInternalServerError && embedding.InputMayBeCause(err)
}

// embedSweepWorker is the River worker for EmbedSweepArgs.
type embedSweepWorker struct {
	river.WorkerDefaults[EmbedSweepArgs]
	w *Worker
}

// Work enqueues embed jobs for every item and chunk lacking a vector of a
// model that a running worker process embeds with: whichever process runs
// the sweep (the leader inserts it, and may embed with another model or
// none), every model being worked gets its missing vectors.
func (e *embedSweepWorker) Work(ctx context.Context, _ *river.Job[EmbedSweepArgs]) error {
	cfg := e.w.cfg
	models, err := cfg.Store.LiveEmbedModels(ctx, cfg.ProcessTimeout)
	if err != nil {
		return err
	}
	if own := e.w.embedModel(); own != "" && !slices.Contains(models, own) {
		models = append(models, own)
	}
	for _, model := range models {
		n, err := e.w.embedEnq.EnqueueMissingEmbeddings(ctx, "", model, cfg.EmbedJobSize, cfg.EmbedMaxAttempts)
		if err != nil {
			return err
		}
		if n > 0 {
			e.w.logger.Info("embed sweep found items without a vector; each has a job now (its own, or one that held it already)", "model", model, "items", n)
		}
		d, err := e.w.embedEnq.EnqueueMissingChunkEmbeddings(ctx, "", model, cfg.EmbedJobSize, cfg.EmbedMaxAttempts)
		if err != nil {
			return err
		}
		if d > 0 {
			e.w.logger.Info("embed sweep enqueued documents with chunks without a vector", "model", model, "documents", d)
		}
	}
	// The jobs of a model no process embeds with any more (a model
	// change) would wait on its queue forever, in the queue gauge too.
	n, err := cfg.Store.DeleteOrphanedEmbedJobs(ctx, []string{EmbedJobKind, ChunkEmbedJobKind}, cfg.ProcessTimeout)
	if err != nil {
		return err
	}
	if n > 0 {
		e.w.logger.Info("embed sweep deleted waiting embed jobs of models no running process embeds with", "jobs", n)
	}
	return nil
}
