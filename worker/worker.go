// Package worker turns the turn stream into memory. It owns two loops:
//
//   - ingest: a durable JetStream pull consumer (explicit ack) reads turn
//     events in batches. Each batch of valid events is recorded in the turns
//     table and one River extraction job per new turn is inserted, in one
//     Postgres transaction; the messages are acknowledged only after that
//     transaction commits. A redelivered event finds its turn already recorded
//     and creates no second job. Invalid events are copied to a dead-letter
//     stream with the reason and then terminated, never retried. When
//     Postgres is unavailable nothing is acknowledged: the events stay in the
//     stream and are redelivered after a bounded backoff.
//   - extraction: River workers run the jobs. A job extracts each of its turns
//     with the configured extractor outside any transaction, then writes facts,
//     context and the turn's status in one transaction that re-locks the turns,
//     so a job that runs twice (rescued, retried) stores its memory once.
//
// River owns every retry: the extractor makes one attempt per call and
// returns a typed error, and one function, outcome (retry.go), maps it to
// River: a server's Retry-After snoozes the job, a transient error is
// retried with River's backoff, and a permanent error, or the last attempt,
// cancels the job and marks its turns failed (queryable, re-runnable with
// RetryFailed).
// Every extraction job is inserted by the Enqueuer (enqueue.go), which
// gives it its queue and its attempts.
//
// Any number of processes may run a Worker against the same NATS and
// Postgres: they share the durable consumer and River's job table.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/trace"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/redact"
	"github.com/memoryd/memoryd/store"
)

// Extractor extracts memory from one turn. *extractor.Rules and
// *extractor.LLM implement it.
type Extractor interface {
	Extract(ctx context.Context, in extractor.Input) (extractor.Result, error)
	Info() extractor.Info
}

// Observer is told what the worker does, for metrics. Methods are called
// from many goroutines and must be safe for concurrent use and quick.
type Observer interface {
	// TurnRejected: an event was dead-lettered; reason is a short label.
	TurnRejected(reason string)
	// Extracted: a job ran over turns; outcome is "processed", "retry",
	// "failed", "handed_back" (shutdown), "lock_wait" (snoozed while
	// another transaction held a lock it needed; see Config.MaxLockWaits),
	// "rate_limited" (snoozed for the model server's Retry-After; see
	// Config.MaxRateLimitWaits), "queued" (snoozed waiting for a free
	// model call in this process), "model_unreachable" (snoozed while the
	// model server is down; see Config.MaxModelOutage), "model_refused"
	// (snoozed alike while it refuses memoryd's API key or model: a 401, a
	// 404, 403s of different requests in a row) or "db_unreachable"
	// (snoozed while Postgres cannot be reached; see maxDBOutage). ExtractOutcomes
	// lists them all.
	// Recovery reports with it too: "taken_over" (the running job of a dead
	// process was replaced), "discarded" (the turns' job ran out of attempts
	// without ending them: they were marked failed) and "requeued" (pending
	// turns that no job named got one); took is how long the lost attempt
	// had run when known, else zero.
	Extracted(took time.Duration, turns int, outcome string)
	// Pruned: a prune run removed this many context items.
	Pruned(removed int64)
	// Redacted: one span of sensitive data of kind (redact.Kind)
	// was replaced by its marker; where is RedactedInTurn (a turn's text at
	// ingest, redeliveries included) or RedactedInMemory (a fact or context
	// pair an extractor returned).
	Redacted(kind, where string)
}

// SizeObserver is an Observer also told, after each prune run of this
// process with a size limit, what it measured last: the live size, the
// floor pruning cannot go under (store.SizeReport), and whether the size
// is still over the limit.
type SizeObserver interface {
	Sized(liveBytes, floorBytes int64, overLimit bool)
}

// Where a redaction happened; see Observer.Redacted.
const (
	RedactedInTurn   = "turn"
	RedactedInMemory = "memory"
)

// RedactionKinds are the kinds Observer.Redacted reports (redact.Kinds),
// for metrics that show each at 0 before its first redaction.
func RedactionKinds() []string {
	var out []string
	for _, k := range redact.Kinds() {
		out = append(out, string(k))
	}
	return out
}

// Config configures a Worker.
type Config struct {
	// Conn is the NATS connection. Required.
	Conn *nats.Conn
	// Store is the Postgres store; River shares its pool. Required.
	Store *store.Store
	// Extractor extracts memory from turns. Required.
	Extractor Extractor
	// Logger receives the worker's logs (and River's). Default slog.Default().
	Logger *slog.Logger
	// Observer receives events for metrics. Optional.
	Observer Observer

	// Prefix is the subject prefix. Default "memory".
	Prefix string
	// Stream is the turn stream. Default "MEMORY_TURNS".
	Stream string
	// Durable is the durable consumer shared by all workers. Default
	// "memoryd-ingest".
	Durable string
	// DeadLetterStream captures rejected events. Default events.DeadLetterStream(Stream).
	DeadLetterStream string
	// BatchSize is the most events recorded in one transaction. Default 200.
	BatchSize int
	// AckWait is how long JetStream waits for an ack before redelivering.
	// Default 30s.
	AckWait time.Duration
	// RetryBackoff is the first delay before redelivering events that could
	// not be stored (Postgres down); it doubles up to 5 times it (maxIngestBackoff). Default 1s.
	RetryBackoff time.Duration

	// JobSize is how many newly ingested turns share one extraction job.
	// With the offline extractor large jobs cut per-job overhead; with an
	// LLM, 1 lets every worker call the model in parallel. Default 1.
	JobSize int
	// Workers is the number of extraction jobs run at once by this process.
	// Default 20.
	Workers int
	// MaxAttempts is how often an extraction job runs before its turns are
	// marked failed. Default 5.
	MaxAttempts int
	// JobRetryBase is the delay before a job's first retry; it doubles per
	// attempt, with jitter, up to 10 minutes. Default 2s.
	JobRetryBase time.Duration
	// JobTimeout bounds one extraction job. Default 10m. It must be longer
	// than one extractor call (the LLM's CallTimeout, twice its per-request
	// Timeout), so that an attempt can end by itself rather than by the
	// job's deadline. The jobs of a process that died are taken over
	// after ProcessTimeout; River's rescuer retries a job still running
	// after twice JobTimeout in a live process (e.g. one whose fetch reply a
	// Postgres cut lost).
	JobTimeout time.Duration
	// HeartbeatInterval is how often the process renews its liveness record
	// (memoryd_processes) and looks for processes that stopped renewing
	// theirs. Default 2s.
	HeartbeatInterval time.Duration
	// ProcessTimeout is how old a process's heartbeat may get before the
	// process is taken for dead and its running extraction jobs are handed
	// to new jobs (with the attempts they have left). A process that cannot
	// renew its heartbeat for two thirds of it cancels its own running jobs
	// first, so a job never runs in two processes at once. At least
	// 2 × HeartbeatInterval. Default 10s.
	ProcessTimeout time.Duration
	// ReconcileInterval is how often the leader looks for pending turns that
	// no live job names (the job was deleted, or River discarded it after
	// its last attempt) and requeues them or, when their attempts ran out,
	// marks them failed. Default 1m.
	ReconcileInterval time.Duration
	// StaleForgetAge is how long a forget may stay recorded unfinished in
	// the forgets bucket before a reconcile (every ReconcileInterval, in
	// one process; the bucket is read every third of this) finishes it:
	// its process was killed, or stopped at its deadline, and no process
	// of the deployment starts to finish it (a replica scaled away).
	// Longer than a forget takes (its documents up to 10 minutes, then the
	// streams), so that one still running is left to its own process.
	// Default 30m.
	StaleForgetAge time.Duration
	// LockTimeout bounds how long a job's write transaction waits for a row
	// lock another transaction holds (SQLSTATE 55P03 past it). The wait is
	// also kept under half of the job's remaining time, so that a lock wait
	// ends as a lock timeout, which is retried, rather than as the job's own
	// timeout, which costs an attempt. Default 5s.
	LockTimeout time.Duration
	// MaxLockWaits is how often a job that hit a lock timeout or a deadlock
	// is snoozed and run again without spending an attempt; after that a
	// lock wait is an ordinary failure. Default 10.
	MaxLockWaits int
	// MaxRateLimitWaits is how often a job whose model server asked it to
	// wait (429, or 503 with Retry-After) is snoozed for that delay without
	// spending an attempt; after that a rate limit is an ordinary transient
	// failure, so a server that always refuses ends the job. Default 10.
	MaxRateLimitWaits int
	// MaxQueueWaits is how often a job that waited for the extractor's own
	// limits (every LLM concurrency slot busy, or no rate-limit token)
	// until its request could no longer finish before the job's timeout is
	// snoozed without spending an attempt: the jobs ahead of it are being
	// served, so it is a queue, bounded only against a model that never
	// answers. Default 100.
	MaxQueueWaits int
	// MaxModelOutage is how long a job waits for a model server that is
	// unreachable (no response: connection refused or reset, a name that
	// does not resolve; or a 502, 503 or 504; or a refusal of the API key
	// or the model: 401, 404, 403s of different requests in a row)
	// without spending attempts:
	// it is snoozed, JobRetryBase doubling per wait up to 1m, until its
	// snoozes total this, and then spends attempts as on any transient
	// failure. A restart or a model load (minutes on vLLM or Ollama) thus
	// fails no turn. Negative: no waiting, attempts are spent at once.
	// Default 30m.
	MaxModelOutage time.Duration
	// MaxClockSkew is how far a turn's timestamp may be ahead of the time
	// JetStream stored the event. A later timestamp is clamped to the stored
	// time (and the sent one kept with the turn, logged and counted in
	// Stats.Clamped), so that a frontend's wrong clock cannot date a turn in
	// the future, where it would outrank every later turn and facts.set.
	// Default 5m.
	MaxClockSkew time.Duration
	// FetchPollInterval is how often River polls for jobs when no
	// notification arrived. Default 1s.
	FetchPollInterval time.Duration
	// FetchCooldown is the shortest time between two fetches of jobs by
	// this process (River's FetchCooldown): a fetch takes at most as many
	// jobs as there are free workers, so extraction runs at most Workers ×
	// JobSize turns per FetchCooldown. With a fast extractor (the offline
	// rules, a model that answers in milliseconds) and small jobs, lower it
	// (or raise Workers or JobSize). Default 100ms (River's default), at
	// most FetchPollInterval.
	FetchCooldown time.Duration
	// ExtractDebounce delays a turn's extraction by this long so that a burst
	// of turns in one conversation is extracted in one call, with a few
	// earlier turns of the conversation as read-only context. Turns without
	// a conversation id are extracted on their own. Default 0: every turn at
	// once, on its own.
	ExtractDebounce time.Duration
	// BacklogTurns is the number of pending turns (recorded, not yet
	// extracted) of one user from which ingest enqueues that user's new
	// extraction jobs at a lower River priority (backlogPriority): River
	// fetches a queue's jobs by priority before age, so a user who floods
	// (a buggy frontend, a history import) no longer makes every other
	// user's turns wait behind their whole backlog; their own jobs still run
	// at full speed whenever no other user's job waits. Default 100;
	// negative: every job at the same priority, in order of arrival.
	BacklogTurns int
	// MaxDBSize caps the live size of memoryd's tables in bytes (see
	// store.SizeReport); over it, the oldest context items are pruned, no
	// more than the excess. Start logs an error for a limit below what
	// pruning can reach, and runs on. Default 0: no limit.
	MaxDBSize int64
	// MaxContextPerUser caps each user's context items, pruning the oldest.
	// Default 0: no cap.
	MaxContextPerUser int
	// TurnRetention is how long a processed turn keeps its text (message,
	// response, metadata) in Postgres; the prune then clears it, keeping the
	// row and its status. The stream keeps the event, and a replay writes the
	// text back. Pending and failed turns keep their text. Default 7 days;
	// negative keeps the text forever.
	TurnRetention time.Duration
	// PruneInterval is how often the limits and the retention are applied
	// (when any is set). Default 10m.
	PruneInterval time.Duration
	// CompletedJobRetention is how long River keeps a completed job's row
	// (its args, metadata and recorded output: a prune's report) before
	// its leader deletes it. Live ingest makes about one extraction job a
	// turn (a batch holds one turn a user when many users talk), so River's
	// own default, 24 h, kept 2.6 million rows (some 1.8 GB) at 30 turns/s,
	// outside what MaxDBSize measures. Default DefaultCompletedJobRetention;
	// negative keeps them forever. Failed jobs' rows (discarded) are kept
	// River's 7 days.
	CompletedJobRetention time.Duration
	// Pacer, when set, holds ingest and extraction back while its pressure
	// is up (the app feeds it enrich's latency): see MaxPause. Default nil:
	// never held back.
	Pacer Pacer
	// MaxPause bounds how long one ingest batch or extraction job waits
	// for its turn under the Pacer's pressure. Under pressure p (0 to 1)
	// at most (1-p) × (Workers+1) batches and jobs run at once, and at
	// least one: one at a time at full pressure, each at full speed. A
	// batch or job that waited MaxPause runs anyway, so ingest never
	// stalls, however long the pressure lasts. Default 1s.
	MaxPause time.Duration
	// TracerProvider, when set, traces ingest batches, jobs (the trace
	// context carried in their metadata) and the saves of extracted memory,
	// continuing the trace of each turn's publish (tracing.go). Default
	// nil: no tracing, at no cost.
	TracerProvider trace.TracerProvider
	// DisableIngest runs only the extraction workers, without consuming the
	// stream (e.g. to work off a replay). Default false.
	DisableIngest bool
	// EmbedOnly, with DisableIngest, works the embed queues alone (the
	// embed command's backfill): no extraction, document indexing or
	// maintenance job, whose results depend on the extractor and settings
	// of the serves that run them (as River's leader it still inserts the
	// periodic jobs, for them). Requires Embedder. Default false.
	EmbedOnly bool

	// Spend caps (spend.go).

	// DailyTokensPerUser caps the model tokens (prompt plus completion) one
	// user's turns may spend per UTC day. A user at or over it has new
	// turns extracted by OverCapExtractor, and the model extracts them again
	// after the day ends. Default 0: no cap.
	DailyTokensPerUser int64
	// DailyTokens caps the model tokens all users' turns may spend per UTC
	// day, as DailyTokensPerUser does for one user. Default 0: no cap.
	DailyTokens int64
	// OverCapExtractor extracts turns over a spend cap: an offline
	// extractor, so that memory keeps working. Default extractor.NewRules().
	OverCapExtractor Extractor
	// Now is the clock the caps' UTC days are read from. Default the
	// Store's Clock (Postgres's time, as every serve reads it).
	Now func() time.Time

	// Knowledge bases (docs.go).

	// ChunkDocument cuts a pending document in its index job: the one
	// implementation the docs endpoints' puts use too (internal/app sets
	// enricher.ChunkDocument), so that a document is cut the same whether
	// it was chunked inline or by a job. Default nil: an index job is
	// cancelled with an error naming this field.
	ChunkDocument store.Chunker

	// Embedding (embed.go).

	// Embedder embeds context items (an *embedding.Client). Default nil:
	// embedding is off, no embed job is inserted or run.
	Embedder Embedder
	// EmbedJobSize is the most items one embed job holds, and embeds with
	// those of the waiting jobs it claims. Default 64.
	EmbedJobSize int
	// EmbedWorkers is the number of embed jobs run at once by this process
	// (the client's MaxConcurrency and RequestsPerSecond bound its
	// requests too). Default 2.
	EmbedWorkers int
	// EmbedMaxAttempts is how often an embed job runs before it is given up
	// (its items are then embedded by the next sweep). With the default
	// JobRetryBase (2s, doubling) 10 attempts keep a job trying for about
	// 17 minutes. Default 10.
	EmbedMaxAttempts int
	// EmbedSweepInterval is how often River's leader enqueues embed jobs
	// for every item without a vector of a model that a running worker
	// process embeds with (this one's and the others', whether or not this
	// one embeds; also once when it becomes the leader): after a model
	// change, and for items whose jobs gave up. Negative: no sweep from
	// this process (`memoryd embed --backfill` only). Default 1h.
	EmbedSweepInterval time.Duration
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	if c.Prefix == "" {
		c.Prefix = events.DefaultPrefix
	}
	if c.Stream == "" {
		c.Stream = events.DefaultStream
	}
	if c.Durable == "" {
		c.Durable = DefaultDurable
	}
	if c.DeadLetterStream == "" {
		c.DeadLetterStream = events.DeadLetterStream(c.Stream)
	}
	if c.BatchSize == 0 {
		c.BatchSize = 200
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = time.Second
	}
	if c.Workers == 0 {
		c.Workers = 20
	}
	if c.JobSize == 0 {
		c.JobSize = 1
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.JobRetryBase == 0 {
		c.JobRetryBase = 2 * time.Second
	}
	if c.JobTimeout == 0 {
		c.JobTimeout = 10 * time.Minute
	}
	if c.FetchPollInterval == 0 {
		c.FetchPollInterval = time.Second
	}
	if c.FetchCooldown == 0 {
		c.FetchCooldown = min(c.FetchPollInterval, river.FetchCooldownDefault)
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 2 * time.Second
	}
	if c.ProcessTimeout == 0 {
		c.ProcessTimeout = max(defaultProcessTimeout, 2*c.HeartbeatInterval)
	}
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = time.Minute
	}
	if c.StaleForgetAge == 0 {
		c.StaleForgetAge = 30 * time.Minute
	}
	if c.LockTimeout == 0 {
		c.LockTimeout = 5 * time.Second
	}
	if c.MaxLockWaits == 0 {
		c.MaxLockWaits = 10
	}
	if c.MaxQueueWaits == 0 {
		c.MaxQueueWaits = 100
	}
	if c.BacklogTurns == 0 {
		c.BacklogTurns = DefaultBacklogTurns
	}
	if c.MaxRateLimitWaits == 0 {
		c.MaxRateLimitWaits = 10
	}
	if c.MaxModelOutage == 0 {
		c.MaxModelOutage = DefaultMaxModelOutage
	}
	if c.MaxClockSkew == 0 {
		c.MaxClockSkew = DefaultMaxClockSkew
	}
	if c.PruneInterval == 0 {
		c.PruneInterval = 10 * time.Minute
	}
	if c.CompletedJobRetention == 0 {
		c.CompletedJobRetention = DefaultCompletedJobRetention
	}
	if c.TurnRetention == 0 {
		c.TurnRetention = DefaultTurnRetention
	}
	if c.OverCapExtractor == nil {
		c.OverCapExtractor = extractor.NewRules()
	}
	if c.Now == nil && c.Store != nil {
		c.Now = c.Store.Clock().Now
	}
	if c.MaxPause == 0 {
		c.MaxPause = time.Second
	}
	if c.EmbedJobSize == 0 {
		c.EmbedJobSize = DefaultEmbedJobSize
	}
	if c.EmbedWorkers == 0 {
		c.EmbedWorkers = 2
	}
	if c.EmbedMaxAttempts == 0 {
		c.EmbedMaxAttempts = 10
	}
	if c.EmbedSweepInterval == 0 {
		c.EmbedSweepInterval = time.Hour
	}
	return c
}

func (c Config) validate() error {
	positive := []struct {
		name string
		d    time.Duration
	}{{"RetryBackoff", c.RetryBackoff}, {"JobRetryBase", c.JobRetryBase}, {"JobTimeout", c.JobTimeout}, {"FetchPollInterval", c.FetchPollInterval}, {"FetchCooldown", c.FetchCooldown},
		{"LockTimeout", c.LockTimeout}, {"MaxClockSkew", c.MaxClockSkew}, {"HeartbeatInterval", c.HeartbeatInterval},
		{"MaxPause", c.MaxPause}}
	for _, p := range positive {
		if p.d <= 0 {
			return fmt.Errorf("worker: Config.%s must be positive, not %s", p.name, p.d)
		}
	}
	switch {
	case c.Conn == nil:
		return errors.New("worker: Config.Conn is required")
	case c.Store == nil:
		return errors.New("worker: Config.Store is required")
	case c.Extractor == nil:
		return errors.New("worker: Config.Extractor is required")
	case c.EmbedOnly && (c.Embedder == nil || !c.DisableIngest):
		return errors.New("worker: Config.EmbedOnly needs Embedder and DisableIngest")
	case c.BatchSize < 1 || c.BatchSize > 10_000:
		return fmt.Errorf("worker: Config.BatchSize must be between 1 and 10000, not %d", c.BatchSize)
	case c.JobSize < 1 || c.JobSize > c.BatchSize:
		return fmt.Errorf("worker: Config.JobSize must be between 1 and BatchSize (%d), not %d", c.BatchSize, c.JobSize)
	case c.Workers < 1 || c.Workers > river.QueueNumWorkersMax:
		return fmt.Errorf("worker: Config.Workers must be between 1 and 10000, not %d", c.Workers)
	case c.MaxLockWaits < 0:
		return fmt.Errorf("worker: Config.MaxLockWaits must not be negative, not %d", c.MaxLockWaits)
	case c.MaxQueueWaits < 0:
		return fmt.Errorf("worker: Config.MaxQueueWaits must not be negative, not %d", c.MaxQueueWaits)
	case c.MaxRateLimitWaits < 0:
		return fmt.Errorf("worker: Config.MaxRateLimitWaits must not be negative, not %d", c.MaxRateLimitWaits)
	case callTimeout(c.Extractor) >= c.JobTimeout:
		return fmt.Errorf("worker: Config.JobTimeout must be longer than one extractor call, %s (two model requests of its timeout), not %s",
			callTimeout(c.Extractor), c.JobTimeout)
	case c.Embedder != nil && embedCallTimeout(c.Embedder) >= c.JobTimeout:
		return fmt.Errorf("worker: Config.JobTimeout must be longer than one embed call, %s (the embeddings request's timeout and the control request's %s), not %s",
			embedCallTimeout(c.Embedder), controlTimeout, c.JobTimeout)
	case c.MaxAttempts < 1:
		return fmt.Errorf("worker: Config.MaxAttempts must be at least 1, not %d", c.MaxAttempts)
	case c.AckWait < time.Second:
		return fmt.Errorf("worker: Config.AckWait must be at least 1s, not %s", c.AckWait)
	case c.ExtractDebounce < 0:
		return fmt.Errorf("worker: Config.ExtractDebounce must not be negative, not %s", c.ExtractDebounce)
	case c.MaxDBSize < 0:
		return fmt.Errorf("worker: Config.MaxDBSize must not be negative, not %d", c.MaxDBSize)
	case c.MaxContextPerUser < 0:
		return fmt.Errorf("worker: Config.MaxContextPerUser must not be negative, not %d", c.MaxContextPerUser)
	case c.PruneInterval < time.Second:
		return fmt.Errorf("worker: Config.PruneInterval must be at least 1s, not %s", c.PruneInterval)
	case c.ProcessTimeout < 2*c.HeartbeatInterval:
		return fmt.Errorf("worker: Config.ProcessTimeout must be at least twice HeartbeatInterval (%s), not %s", c.HeartbeatInterval, c.ProcessTimeout)
	case c.FetchCooldown < river.FetchCooldownMin || c.FetchCooldown > c.FetchPollInterval:
		return fmt.Errorf("worker: Config.FetchCooldown must be between %s and FetchPollInterval (%s), not %s", river.FetchCooldownMin, c.FetchPollInterval, c.FetchCooldown)
	case c.ReconcileInterval < time.Second:
		return fmt.Errorf("worker: Config.ReconcileInterval must be at least 1s, not %s", c.ReconcileInterval)
	case c.StaleForgetAge < 0:
		return fmt.Errorf("worker: Config.StaleForgetAge must not be negative, not %s", c.StaleForgetAge)
	case c.DailyTokensPerUser < 0:
		return fmt.Errorf("worker: Config.DailyTokensPerUser must not be negative, not %d", c.DailyTokensPerUser)
	case c.DailyTokens < 0:
		return fmt.Errorf("worker: Config.DailyTokens must not be negative, not %d", c.DailyTokens)
	case c.EmbedJobSize < 1 || c.EmbedJobSize > 10_000:
		return fmt.Errorf("worker: Config.EmbedJobSize must be between 1 and 10000, not %d", c.EmbedJobSize)
	case c.EmbedWorkers < 1 || c.EmbedWorkers > river.QueueNumWorkersMax:
		return fmt.Errorf("worker: Config.EmbedWorkers must be between 1 and 10000, not %d", c.EmbedWorkers)
	case c.EmbedMaxAttempts < 1:
		return fmt.Errorf("worker: Config.EmbedMaxAttempts must be at least 1, not %d", c.EmbedMaxAttempts)
	case c.EmbedSweepInterval >= 0 && c.EmbedSweepInterval < time.Second:
		return fmt.Errorf("worker: Config.EmbedSweepInterval must be at least 1s, not %s", c.EmbedSweepInterval)
	}
	return nil
}

type nopObserver struct{}

func (nopObserver) TurnRejected(string)                  {}
func (nopObserver) Extracted(time.Duration, int, string) {}
func (nopObserver) Pruned(int64)                         {}
func (nopObserver) Redacted(string, string)              {}

// DefaultTurnRetention is how long a processed turn keeps its text by
// default.
const DefaultTurnRetention = 7 * 24 * time.Hour

// DefaultMaxModelOutage is Config.MaxModelOutage's default: longer than
// a model server's restart or a large model's load.
const DefaultMaxModelOutage = 30 * time.Minute

// DefaultMaxClockSkew is Config.MaxClockSkew's default.
const DefaultMaxClockSkew = 5 * time.Minute

// ErrConsumerOfAnotherPrefix is returned by Start when the stream's durable
// consumer reads another prefix's turn subjects.
var ErrConsumerOfAnotherPrefix = errors.New("the turn stream's ingest consumer reads another prefix's subjects")

// CheckConsumerPrefix refuses to take over the durable consumer durable of
// stream when it reads another prefix's turn subjects (another memoryd
// sharing the stream with its own --prefix): updating it would move that
// memoryd's processes onto prefix's subjects, and the events they passed
// over would never be recorded. A missing stream or consumer is fine: Start
// creates it. Start checks it; a caller may check before it sets anything
// else up.
func CheckConsumerPrefix(ctx context.Context, js jetstream.JetStream, stream, durable, prefix string) error {
	if durable == "" {
		durable = DefaultDurable
	}
	ctx, cancel := events.InfoContext(ctx, js)
	defer cancel()
	cons, err := js.Consumer(ctx, stream, durable)
	if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("worker: read consumer %s: %w", durable, events.NoJetStream(err))
	}
	want := events.TurnSubjects(prefix)
	c := cons.CachedInfo().Config
	got := c.FilterSubjects
	if c.FilterSubject != "" {
		got = append([]string{c.FilterSubject}, got...)
	}
	if len(got) == 1 && got[0] == want {
		return nil
	}
	return fmt.Errorf("worker: %w: consumer %s on stream %s reads %q, not %q: another memoryd with another --prefix uses this stream; "+
		"give each prefix its own --stream (to change a deployment's prefix, stop all its processes and delete the consumer first)",
		ErrConsumerOfAnotherPrefix, durable, stream, strings.Join(got, ","), want)
}

// ConsumerDelivered returns the last stream sequence the durable consumer
// durable of stream has delivered: 0 when the stream or the consumer does
// not exist, or nothing was delivered. Events up to it were taken by some
// memoryd into its database (recorded, or being recorded: an event
// delivered and not yet acknowledged counts, as does one acknowledged
// beyond an earlier one still pending, which the ack floor would not show).
func ConsumerDelivered(ctx context.Context, js jetstream.JetStream, stream, durable string) (uint64, error) {
	if durable == "" {
		durable = DefaultDurable
	}
	ctx, cancel := events.InfoContext(ctx, js)
	defer cancel()
	cons, err := js.Consumer(ctx, stream, durable)
	if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("worker: read consumer %s: %w", durable, events.NoJetStream(err))
	}
	return cons.CachedInfo().Delivered.Stream, nil
}

// DefaultDurable is the durable consumer all workers share by default.
const DefaultDurable = "memoryd-ingest"

// River queues: extraction jobs, and maintenance (pruning) kept apart so a
// backlog of extraction never delays pruning.
const (
	QueueExtract     = "extract"
	QueueMaintenance = "maintenance"
)

// ExtractArgs is the River job that extracts memory from turns recorded in
// the turns table. The turn content is read from Postgres, so job rows stay
// small; a job lists several turns when ingest or replay batches them.
type ExtractArgs struct {
	// UserID is the owner of all the job's turns: EventIDs are unique per
	// user only. It is empty only in a job enqueued before migration 012
	// (turns of several users, found by event id alone).
	UserID   string   `json:"user_id"`
	EventIDs []string `json:"event_ids"`
	// ConversationID, when set, makes the job extract every pending turn
	// of the conversation at once (debounce), its own included.
	ConversationID string `json:"conversation_id,omitempty"`
	// OverCap marks a job for turns a spend cap had extracted offline: it
	// runs after the cap's day ended and extracts them again with the model
	// (spend.go).
	OverCap bool `json:"over_cap,omitempty"`
}

// Kind is River's job kind.
func (ExtractArgs) Kind() string { return ExtractJobKind }

// InsertOpts puts extraction jobs on their queue. The Enqueuer, which
// inserts every extraction job, sets the queue and the rest itself.
func (ExtractArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: QueueExtract} }

// Stats are counters since the worker started.
type Stats struct {
	// Received counts events read from the stream, including redeliveries.
	Received int64
	// Recorded counts new turns recorded (each gets one extraction job).
	Recorded int64
	// Duplicates counts events whose turn was already recorded.
	Duplicates int64
	// OptedOut counts events with memory:false, acknowledged unstored and
	// erased from the stream.
	OptedOut int64
	// OptOutKept counts opted-out events, valid or not, that could not be
	// erased from the stream (logged as errors); their text stays there
	// until forget.
	OptOutKept int64
	// Clamped counts turns whose timestamp was later than the time the
	// stream stored them plus MaxClockSkew, recorded at the stored time.
	Clamped int64
	// MsgIDMismatch counts turns recorded from an event whose
	// Nats-Msg-Id header is set but is not events.MsgID of its user and id
	// (a frontend setting the bare event id), once a turn however often
	// it was delivered: they are recorded, but such a frontend's events of two
	// users with the same id collide in JetStream's duplicate window, and
	// the later one is dropped by the stream, unseen by memoryd.
	MsgIDMismatch int64
	// LockWaits counts extraction jobs snoozed because of a lock timeout or
	// a deadlock (see Config.MaxLockWaits).
	LockWaits int64
	// Rejected counts invalid events, dead-lettered and terminated.
	Rejected int64
}

// Worker runs ingestion and extraction. Create it with New, run it with
// Start, and stop it with Stop.
type Worker struct {
	cfg    Config
	logger *slog.Logger
	// backlogLogged is when ingest last logged each user with a backlog
	// (logBacklog), under backlogMu.
	backlogMu     sync.Mutex
	backlogLogged map[string]time.Time
	js            jetstream.JetStream
	river         *river.Client[pgx.Tx]
	enq           *Enqueuer      // on river
	live          *liveness      // set by Start, before River starts
	jobs          *jobsInProcess // the jobs it runs, for takeOverLost
	follow        *EmbedFollower // the models whose embed jobs its writes insert
	// embedEnq inserts embed jobs: enq, or, when this process works none,
	// an Enqueuer that only inserts.
	embedEnq *Enqueuer
	pace     *pace        // holds ingest and extraction back under the Pacer's pressure
	tracer   trace.Tracer // nil when Config.TracerProvider is

	// turnStream is the stream ingest reads (set by Start, and again when
	// ingest binds its consumer anew: see keepConsuming); under mu.
	turnStream jetstream.Stream

	received, recorded, duplicates, optedOut, rejected atomic.Int64
	optOutKept, clamped, lockWaits                     atomic.Int64
	msgIDMismatch                                      atomic.Int64
	msgIDWarned                                        atomic.Int64 // unix nanoseconds of the last warning
	staleForgetWarned                                  atomic.Int64 // unix nanoseconds of finishStaleForgets's last warning
	staleForgetScanned                                 atomic.Int64 // unix nanoseconds of its last read of the bucket
	overCapTurns                                       atomic.Int64 // turns extracted offline over a spend cap
	ingestFailing                                      outage       // the ingest's outage, nil while it records turns
	modelRefusing                                      outage       // the model server refusing the configuration, nil while it answers
	modelWaits                                         modelWaiters // jobs snoozed for the model server, to wake when it answers
	modelDownSince                                     atomic.Int64 // unix nanoseconds of extraction's first wait for the model server since its last answer, 0 when none
	modelToldAt                                        atomic.Int64 // unix nanoseconds of the last msgModelAnswersAgain at info
	embedWaits                                         modelWaiters // jobs snoozed for the embeddings server, to wake when it answers
	embedRefusing                                      outage       // the embeddings server refusing the configuration, nil while it answers
	aloneWakeDue                                       atomic.Bool  // a wake of a job waiting for modelAloneLock, held back for the model server's next answer (aloneReleased)
	aloneHolding                                       atomic.Int32 // runs of this process holding modelAloneLock, which wake a waiter as they let it go
	// unsaved holds the extractions runs could not store for a wait,
	// for their jobs' next runs.
	unsaved *unsavedResults
	// usageBacklog holds the tokens of calls a flush could not store
	// for the database out of reach, for the next flush.
	usageBacklog usageBacklog

	mu      sync.Mutex
	started bool
	consume jetstream.ConsumeContext
	msgs    chan jetstream.Msg
	stop    chan struct{}
	done    chan struct{}
	// cancelIngest ends the batch being recorded, when Stop's deadline
	// passes: its transaction rolls back and its events are redelivered.
	cancelIngest context.CancelFunc
	// halt is closed when Stop begins, for the jobs that end at once then
	// rather than hold the stop (halting), and the wakes armed before it
	// (wakeSoon). Made by New, and again by a Start after a Stop: what
	// was armed before the first Start ends with the first Stop.
	halt chan struct{}
	// wakes counts the wakes of waiting jobs running (wakeSoon's timers),
	// added to under mu while halt is open; Stop waits for them.
	wakes sync.WaitGroup
	// endRebind ends keepConsuming, which closes rebound when it returns.
	endRebind context.CancelFunc
	rebound   chan struct{}
}

// New validates cfg and builds a Worker; it does not touch the network.
func New(cfg Config) (*Worker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("worker: jetstream: %w", err)
	}
	w := &Worker{cfg: cfg, logger: cfg.Logger, js: js, pace: newPace(cfg.Pacer, cfg.MaxPause, cfg.Workers+1), unsaved: newUnsavedResults(),
		halt: make(chan struct{})}
	w.jobs = newJobsInProcess()
	w.modelWaits.jobs, w.modelWaits.server, w.modelWaits.kind = []store.RiverJobs{extractJobs}, "model server", "extraction"
	if d, ok := cfg.Extractor.(interface{ Down() bool }); ok {
		w.modelWaits.down = d.Down
	}
	if r, ok := cfg.Extractor.(connectionRefuser); ok {
		w.modelWaits.refuses = r.RefusesConnections
	}
	w.embedWaits.jobs, w.embedWaits.server, w.embedWaits.kind = []store.RiverJobs{embedJobs, chunkEmbedJobs}, "embeddings server", "embed"
	if d, ok := cfg.Embedder.(interface{ LastDown() time.Time }); ok {
		w.embedWaits.down = func() bool {
			// Down again since the last answer this process heard of: its
			// embed jobs' or enrich's (EmbeddingsAnswered), which leaves
			// this client counting the server down from before it.
			at := d.LastDown()
			return !at.IsZero() && at.UnixNano() > w.embedWaits.answered.Load()
		}
	}
	if r, ok := cfg.Embedder.(connectionRefuser); ok {
		w.embedWaits.refuses = r.RefusesConnections
	}
	middleware := []rivertype.Middleware{w.jobs}
	if cfg.TracerProvider != nil {
		w.tracer = cfg.TracerProvider.Tracer(tracerName)
		middleware = append(middleware, &jobTracing{tracer: w.tracer})
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &extractWorker{w: w})
	river.AddWorker(workers, &pruneWorker{w: w})
	river.AddWorker(workers, &reconcileWorker{w: w})
	river.AddWorker(workers, &indexDocumentWorker{w: w})
	periodic := []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(cfg.ReconcileInterval),
		func() (river.JobArgs, *river.InsertOpts) { return ReconcileArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true})}
	if cfg.MaxDBSize > 0 || cfg.MaxContextPerUser > 0 || cfg.TurnRetention > 0 {
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(cfg.PruneInterval),
			func() (river.JobArgs, *river.InsertOpts) {
				return PruneArgs{}, nil // PruneArgs.InsertOpts
			},
			&river.PeriodicJobOpts{RunOnStart: true}))
	}
	queues := map[string]river.QueueConfig{QueueExtract: {MaxWorkers: cfg.Workers}, QueueMaintenance: {MaxWorkers: 1}}
	if cfg.EmbedOnly {
		// Its periodic jobs stay: should it be River's leader while it
		// runs, it inserts them for the serves, which work those queues.
		queues = map[string]river.QueueConfig{}
	}
	// Every process sweeps, for every model a running worker embeds with
	// (embedSweepWorker): River's leader alone inserts periodic jobs, and
	// it may embed nothing, or with the other model of a rolling change.
	river.AddWorker(workers, &embedSweepWorker{w: w})
	if cfg.Embedder != nil {
		river.AddWorker(workers, &embedWorker{w: w})
		river.AddWorker(workers, &chunkEmbedWorker{w: w})
		queues[QueueEmbedFor(cfg.Embedder.Model())] = river.QueueConfig{MaxWorkers: cfg.EmbedWorkers}
		// Jobs on the queue all models shared before, inserted before the
		// upgrade or by a process of the previous release.
		queues[QueueEmbed] = river.QueueConfig{MaxWorkers: 1}
	}
	if cfg.EmbedSweepInterval > 0 {
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(cfg.EmbedSweepInterval),
			func() (river.JobArgs, *river.InsertOpts) {
				return EmbedSweepArgs{}, &river.InsertOpts{Queue: QueueMaintenance, MaxAttempts: 3}
			},
			&river.PeriodicJobOpts{RunOnStart: true}))
	}
	w.river, err = river.NewClient(riverpgxv5.New(cfg.Store.Pool()), &river.Config{
		Logger:       cfg.Logger.With("component", "river"),
		Queues:       queues,
		PeriodicJobs: periodic,
		Workers:      workers,
		MaxAttempts:  cfg.MaxAttempts,
		JobTimeout:   cfg.JobTimeout,
		// Jobs of a process that died are taken over much sooner (see
		// recover.go); the rescuer is left for a job stuck in a live one.
		RescueStuckJobsAfter:        2 * cfg.JobTimeout,
		CompletedJobRetentionPeriod: riverRetention(cfg.CompletedJobRetention),
		FetchPollInterval:           cfg.FetchPollInterval,
		FetchCooldown:               cfg.FetchCooldown,
		RetryPolicy:                 &retryPolicy{base: cfg.JobRetryBase, max: 10 * time.Minute, clock: cfg.Store.Clock()},
		ErrorHandler:                lastAttemptHandler{w: w},
		Middleware:                  middleware,
		// River stamps, fetches, snoozes and retries jobs by Postgres's
		// clock as the heartbeat reads it, not this host's (store.Clock).
		Test: river.TestConfig{Time: cfg.Store.Clock()},
	})
	if err != nil {
		return nil, fmt.Errorf("worker: river: %w", err)
	}
	w.enq = &Enqueuer{store: cfg.Store, client: w.river, maxAttempts: cfg.MaxAttempts}
	if cfg.Embedder != nil {
		// Its own model's jobs, and those of the other models running
		// workers embed with (a model change rolling out), follow.go.
		w.follow, err = NewEmbedFollower(EmbedFollowerConfig{Store: cfg.Store, Enqueuer: w.enq, Own: cfg.Embedder.Model(),
			Live: cfg.ProcessTimeout, JobSize: cfg.EmbedJobSize, MaxAttempts: cfg.EmbedMaxAttempts, Logger: w.logger})
		if err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
		hook, err := w.enq.embedHook(w.follow.Models, cfg.EmbedJobSize, cfg.EmbedMaxAttempts)
		if err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
		// Every write of context items through this store, the enricher's
		// included, now inserts their embed jobs in its transaction (from
		// here on, before Start: the follower's Start installs the same).
		cfg.Store.SetContextHook(hook)
		// And every write of document chunks their chunk embed jobs.
		chunkHook, err := w.enq.chunkEmbedHook(w.follow.Models, cfg.EmbedJobSize, cfg.EmbedMaxAttempts)
		if err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
		cfg.Store.SetChunkHook(chunkHook)
		w.embedEnq = w.enq
	} else {
		// River refuses to insert a job of a kind its client has no worker
		// for: embed jobs, which this process does not work, are inserted
		// by a client that only inserts.
		if w.embedEnq, err = NewEnqueuer(EnqueuerConfig{Store: cfg.Store, Logger: w.logger}); err != nil {
			return nil, err
		}
		// Its items get embed jobs of the model the running workers
		// embed with, if any (follow.go).
		w.follow, err = NewEmbedFollower(EmbedFollowerConfig{Store: cfg.Store, Enqueuer: w.embedEnq, Live: cfg.ProcessTimeout,
			JobSize: cfg.EmbedJobSize, MaxAttempts: cfg.EmbedMaxAttempts, Logger: w.logger})
		if err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
	}
	return w, nil
}

// Enqueuer returns the worker's Enqueuer, on the worker's River client, for
// the admin operations the process runs (Replay, RetryFailed).
func (w *Worker) Enqueuer() *Enqueuer { return w.enq }

// Stats returns the ingestion counters.
func (w *Worker) Stats() Stats {
	return Stats{
		Received:   w.received.Load(),
		Recorded:   w.recorded.Load(),
		Duplicates: w.duplicates.Load(),
		OptedOut:   w.optedOut.Load(),
		OptOutKept: w.optOutKept.Load(),
		Rejected:   w.rejected.Load(),
		Clamped:    w.clamped.Load(),
		LockWaits:  w.lockWaits.Load(),

		MsgIDMismatch: w.msgIDMismatch.Load(),
	}
}

// Backlog is the turn stream's ingest backlog, as the durable consumer
// (shared by every ingesting process) reports it.
type Backlog struct {
	// Unread counts the turns no process has been handed yet.
	Unread uint64
	// Unacked counts the turns handed to a process and not yet
	// acknowledged (being recorded, or held by a process that stopped,
	// until --ack-wait hands them out again).
	Unacked int
}

// ErrNATSNotConnected is Backlog's error while the NATS connection is down
// or reconnecting.
var ErrNATSNotConnected = errors.New("worker: NATS is not connected")

// Backlog reads the durable consumer's backlog from JetStream (one
// request). A deployment's processes all report the same figures. While
// NATS is not connected it fails at once: a request sent then would wait in
// the reconnect buffer for ctx's whole time (a /metrics scrape's).
func (w *Worker) Backlog(ctx context.Context) (Backlog, error) {
	if !w.js.Conn().IsConnected() {
		return Backlog{}, ErrNATSNotConnected
	}
	c, err := w.js.Consumer(ctx, w.cfg.Stream, w.cfg.Durable)
	if err != nil {
		return Backlog{}, fmt.Errorf("worker: read consumer %s: %w", w.cfg.Durable, err)
	}
	info := c.CachedInfo() // read by Consumer just now
	return Backlog{Unread: info.NumPending, Unacked: info.NumAckPending}, nil
}

// Start ensures the streams and the durable consumer exist, starts River's
// workers and starts consuming. It returns once everything runs; the work
// goes on until Stop. With MaxDBSize set it first measures the tables (an
// error is logged when the limit is below what pruning can reach).
func (w *Worker) Start(ctx context.Context) error {
	cfg := w.cfg
	if err := w.checkSizeFloor(ctx); err != nil {
		return err
	}
	if cfg.DisableIngest {
		if err := w.startRiver(ctx); err != nil {
			return err
		}
		w.mu.Lock()
		w.started = true
		w.mu.Unlock()
		if cfg.EmbedOnly {
			// No extraction job runs here: its worker count would mislead
			// (an embeddings walk read "workers":20 in a backfill).
			w.logger.Info("worker started (embed jobs only)", "embed_workers", cfg.EmbedWorkers)
		} else {
			w.logger.Info("worker started (jobs only, no ingest)", "extractor", cfg.Extractor.Info().Name, "workers", cfg.Workers)
		}
		return nil
	}
	cons, turnStream, err := w.bind(ctx)
	if err != nil {
		return err
	}
	w.healErased(ctx, cons, turnStream)
	// Before the first turn is taken: forgets the database does not know
	// (restored from before them) are applied to what it holds of then.
	w.reapplyForgets(ctx)
	if err := w.startRiver(ctx); err != nil {
		return err
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	w.started = true
	w.turnStream = turnStream
	w.msgs = make(chan jetstream.Msg, cfg.BatchSize*2)
	w.stop = make(chan struct{})
	w.done = make(chan struct{})
	if w.consume, err = w.consumeFrom(cons); err != nil {
		_ = w.river.Stop(ctx)
		w.stopLiveness(ctx)
		w.stopFollowing(ctx)
		return err
	}
	rebindCtx, endRebind := context.WithCancel(context.WithoutCancel(ctx))
	w.endRebind, w.rebound = endRebind, make(chan struct{})
	go w.keepConsuming(rebindCtx, w.consume.Closed(), w.rebound)
	ingestCtx, cancelIngest := context.WithCancel(context.WithoutCancel(ctx))
	w.cancelIngest = cancelIngest
	go w.ingestLoop(ingestCtx, ingestRun{msgs: w.msgs, stop: w.stop, done: w.done})
	w.logger.Info("worker started", "stream", cfg.Stream, "consumer", cfg.Durable,
		"extractor", w.cfg.Extractor.Info().Name, "model", w.cfg.Extractor.Info().Model, "workers", cfg.Workers)
	return nil
}

// ensureDeadLetterStream creates the dead-letter stream when it is missing
// (an existing one keeps its operator's settings) and says whether it did:
// at bind, and when a dead letter finds no stream to take it (an operator
// deleted it while serve ran), so that rejected events are not redelivered
// until the next restart. It gets the turn stream's replicas: with one, in
// a cluster, its one node down stopped every serve's start and held back
// dead letters and forgets (a cluster walk).
func (w *Worker) ensureDeadLetterStream(ctx context.Context) (created bool, err error) {
	cfg := w.cfg
	ictx, cancel := events.InfoContext(ctx, w.js)
	_, err = w.js.Stream(ictx, cfg.DeadLetterStream)
	cancel()
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = w.js.CreateStream(ctx, jetstream.StreamConfig{
			Name:        cfg.DeadLetterStream,
			Description: "memoryd rejected turn events, with the reason in the Memoryd-Reason header",
			Subjects:    []string{events.DeadLetterSubjects(cfg.Prefix)},
			Storage:     jetstream.FileStorage,
			Replicas:    turnReplicas(ctx, w.js, cfg.Stream),
		})
		if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return false, fmt.Errorf("create dead-letter stream: %w", err)
		}
		return err == nil, nil
	} else if err != nil {
		// A cluster walk's serve said only "context deadline exceeded".
		return false, fmt.Errorf("dead-letter stream: %w", events.NoJetStream(err))
	}
	return false, nil
}

// bind makes sure the streams and the durable ingest consumer exist (the
// turn stream gaining the prefix's subject when it lacks it, the
// dead-letter stream created when missing) and returns the consumer and the
// turn stream: what Start does before consuming, and keepConsuming when the
// consumer is gone.
func (w *Worker) bind(ctx context.Context) (jetstream.Consumer, jetstream.Stream, error) {
	cfg := w.cfg
	// Before the stream gains this prefix's subject: the durable consumer
	// is shared by name, so updating another prefix's would move every
	// process of that prefix onto this one's subjects, and the events it
	// then passed over would never be recorded.
	if err := CheckConsumerPrefix(ctx, w.js, cfg.Stream, cfg.Durable, cfg.Prefix); err != nil {
		return nil, nil, err
	}
	turnStream, err := events.EnsureStream(ctx, w.js, events.StreamConfig{Prefix: cfg.Prefix, Stream: cfg.Stream})
	if err != nil {
		return nil, nil, fmt.Errorf("worker: %w", err)
	}
	if _, err := w.ensureDeadLetterStream(ctx); err != nil {
		return nil, nil, fmt.Errorf("worker: %w", err)
	}
	w.warnSharedSettings(ctx)
	cons, err := w.js.CreateOrUpdateConsumer(ctx, cfg.Stream, jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		Description:   "memoryd ingest: records turns and enqueues extraction",
		FilterSubject: events.TurnSubjects(cfg.Prefix),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxAckPending: cfg.BatchSize * 20,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("worker: ensure consumer %s: %w", cfg.Durable, err)
	}
	return cons, turnStream, nil
}

// warnSharedSettings warns when the durable consumer, which every ingest
// process shares, has another ack wait or max ack pending than this
// process's AckWait and BatchSize give: bind sets them for every process,
// so the last to start wins, and a process whose AckWait is longer than
// the consumer's has its turns redelivered while it still records them.
// A consumer not there yet (or unreadable: bind says why) is no warning.
func (w *Worker) warnSharedSettings(ctx context.Context) {
	ctx, cancel := events.InfoContext(ctx, w.js)
	defer cancel()
	cons, err := w.js.Consumer(ctx, w.cfg.Stream, w.cfg.Durable)
	if err != nil {
		return
	}
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	if was := info.Config; was.AckWait != w.cfg.AckWait || was.MaxAckPending != w.cfg.BatchSize*20 {
		w.logger.Warn("ingest consumer settings changed for every ingest process: give them all the same --ack-wait and --batch-size",
			"consumer", w.cfg.Durable, "ack_wait", w.cfg.AckWait, "ack_wait_was", was.AckWait,
			"max_ack_pending", w.cfg.BatchSize*20, "max_ack_pending_was", was.MaxAckPending)
	}
}

// consumeFrom starts pulling cons's messages into w.msgs, which the ingest
// loop records.
func (w *Worker) consumeFrom(cons jetstream.Consumer) (jetstream.ConsumeContext, error) {
	msgs := w.msgs
	cc, err := cons.Consume(func(m jetstream.Msg) { msgs <- m },
		jetstream.PullMaxMessages(w.cfg.BatchSize*2),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			w.logger.Warn("ingest consumer", "error", err)
		}))
	if err != nil {
		return nil, fmt.Errorf("worker: consume: %w", err)
	}
	return cc, nil
}

// keepConsuming binds ingest again when its consume ends (closed) before
// Stop: nats.go ends it when the durable consumer is deleted, with its
// stream or alone (an operator's `nats consumer rm` or `nats stream rm`),
// and ingest would otherwise read nothing more until a restart. Once the
// stream exists (it is not created here: an operator may be creating it
// with settings of their own; a serve start or a publish creates it with
// memoryd's), it does what Start does (bind) and consumes again. An
// attempt that fails is tried again after a wait doubling from
// RetryBackoff up to 30 times it, as a NATS outage is ridden out, until it
// succeeds or ctx ends (Stop); so is a consume that ends again within
// rebindSettle of the last bind. It closes rebound when it returns.
func (w *Worker) keepConsuming(ctx context.Context, closed <-chan struct{}, rebound chan<- struct{}) {
	defer close(rebound)
	var (
		backoff time.Duration
		bound   = time.Now()
	)
	wait := func() bool {
		backoff = min(max(backoff*2, w.cfg.RetryBackoff), 30*w.cfg.RetryBackoff)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
			return true
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-closed:
		}
		if ctx.Err() != nil {
			return // Stop ended it
		}
		w.logger.Warn("ingest consumer gone; binding it again", "stream", w.cfg.Stream, "consumer", w.cfg.Durable)
		if time.Since(bound) < rebindSettle {
			if !wait() {
				return
			}
		} else {
			backoff = 0
		}
		for {
			cc, err := w.rebind(ctx)
			if err == nil {
				closed, bound = cc.Closed(), time.Now()
				w.logger.Info("ingest consuming again", "stream", w.cfg.Stream, "consumer", w.cfg.Durable)
				break
			}
			if ctx.Err() != nil {
				return
			}
			w.logger.Error("ingest: cannot bind the consumer again; will retry", "error", err)
			if !wait() {
				return
			}
		}
	}
}

// rebindSettle is how long a consume bound again must last for the next
// rebind to start at once rather than after a wait.
const rebindSettle = time.Minute

// errNoTurnStream is a rebind waiting for the turn stream to exist.
var errNoTurnStream = errors.New("the turn stream does not exist; waiting for it (a serve start or a publish creates it)")

// rebind binds and consumes again, once the turn stream exists, and makes
// the new consume the one Stop drains; when Stop has begun meanwhile, it
// stops it and says so.
func (w *Worker) rebind(ctx context.Context) (jetstream.ConsumeContext, error) {
	ictx, cancel := events.InfoContext(ctx, w.js)
	_, err := w.js.Stream(ictx, w.cfg.Stream)
	cancel()
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("worker: %s: %w", w.cfg.Stream, errNoTurnStream)
	} else if err != nil {
		return nil, fmt.Errorf("worker: stream %s: %w", w.cfg.Stream, err)
	}
	cons, turnStream, err := w.bind(ctx)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started {
		return nil, errors.New("worker: stopping")
	}
	cc, err := w.consumeFrom(cons)
	if err != nil {
		return nil, err
	}
	w.consume, w.turnStream = cc, turnStream
	return cc, nil
}

// ingestStream is the turn stream ingest reads now.
func (w *Worker) ingestStream() jetstream.Stream {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.turnStream
}

// startRiver registers the process's liveness, then starts River's workers.
func (w *Worker) startRiver(ctx context.Context) error {
	w.seedModelOutage(ctx)
	if w.follow != nil {
		// Before any job can write an item.
		if err := w.follow.Start(ctx); err != nil {
			return err
		}
	}
	if err := w.startLiveness(ctx); err != nil {
		w.stopFollowing(ctx)
		return err
	}
	w.mu.Lock()
	select {
	case <-w.halt: // closed by a Stop: this run's is new
		w.halt = make(chan struct{})
	default: // New's, which a wake armed before this Start holds
	}
	w.mu.Unlock()
	// River treats cancellation of its start context as a hard stop; Stop
	// decides how running jobs end, so River must not see ctx's cancellation.
	if err := w.river.Start(context.WithoutCancel(ctx)); err != nil {
		w.stopLiveness(ctx)
		w.stopFollowing(ctx)
		return fmt.Errorf("worker: start river: %w", err)
	}
	// A process that embeds sweeps for what it missed while it was away:
	// River's leader alone runs the periodic sweep at start, and items
	// written meanwhile by the processes of another model got no job of
	// this one's.
	if w.cfg.Embedder != nil && w.cfg.EmbedSweepInterval > 0 && !w.cfg.EmbedOnly {
		// One waiting sweep is enough for a fleet starting together. (River
		// requires the running state among a unique job's states.)
		if _, err := w.river.Insert(ctx, EmbedSweepArgs{}, &river.InsertOpts{Queue: QueueMaintenance, MaxAttempts: 3,
			UniqueOpts: river.UniqueOpts{ByState: []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
				rivertype.JobStateRunning, rivertype.JobStateScheduled, rivertype.JobStateRetryable}}}); err != nil {
			w.logger.Warn("embed sweep at start not enqueued; the leader's periodic one will do it", "error", err)
		}
	}
	return nil
}

// stopFollowing stops the embed follower, if any.
func (w *Worker) stopFollowing(ctx context.Context) {
	if w.follow != nil {
		_ = w.follow.Stop(ctx)
	}
}

// Stop stops pulling events, finishes the batch being recorded, hands back
// buffered events (Nak) and stops River: running jobs get until ctx is done
// to finish, then they are cancelled and retried later by any worker.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	started, consume, stop, done, cancelIngest, msgs := w.started, w.consume, w.stop, w.done, w.cancelIngest, w.msgs
	endRebind, rebound := w.endRebind, w.rebound
	w.started, w.consume = false, nil
	select {
	case <-w.halt: // closed by an earlier Stop
	default:
		// Also when never started: what was armed since New (a wake at a
		// model answer) ends.
		close(w.halt)
	}
	w.mu.Unlock()
	if !started {
		// A wake armed since New ends with halt; waited for, as below.
		w.wakes.Wait()
		return nil
	}
	if endRebind != nil {
		// No consume starts after this (rebind checks started): the one
		// read above is the last.
		endRebind()
		<-rebound
	}
	if consume != nil {
		// Drain: stop pulling, but hand the messages the client already
		// buffered to the handler, which the ingest loop (still running)
		// records; otherwise they would wait out AckWait before another
		// worker could have them. Messages left in the channel are handed
		// back below. Past ctx's deadline, the batch being recorded is
		// cancelled (nothing of it is acknowledged, so it is redelivered):
		// a transaction waiting on the database would otherwise hold Stop
		// for up to AckWait/2.
		if w.js.Conn().IsConnected() {
			consume.Drain()
		} else {
			// NATS is down: a drain's flush waits 10 s (nats.go's Flush)
			// for a server that cannot answer, and nothing it delivered
			// could be acknowledged anyway (an outage walk: every stop
			// took 10.0 s). Unacknowledged, it is redelivered.
			consume.Stop()
		}
		select {
		case <-consume.Closed():
		case <-ctx.Done():
			cancelIngest()
			consume.Stop()
			<-consume.Closed()
		}
		close(stop)
		select {
		case <-done:
		case <-ctx.Done():
			cancelIngest()
			<-done
		}
		cancelIngest()
		for len(msgs) > 0 {
			_ = (<-msgs).Nak()
		}
	}
	// A wake running now ends with halt (its statement cancelled); none
	// starts after it. Waited for, so that none writes or logs after Stop
	// (a CLI test's buffer was read while one logged).
	w.wakes.Wait()
	err := w.river.Stop(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		// Jobs are cancelled now; one that ignores its context must not
		// hold Stop forever.
		hardCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hardStopTimeout)
		err = w.river.StopAndCancel(hardCtx)
		cancel()
	}
	if err != nil {
		// Jobs may still run here: stop renewing the liveness record but
		// keep it, so that other processes take them over only once this
		// process's lease has lapsed (which cancels them), not at once.
		w.abandonLiveness()
		w.stopFollowing(ctx)
		if n := w.usageBacklog.len(); n > 0 {
			// Jobs may still add to it; what is there now is lost with
			// the process all the same.
			w.logger.Error("token usage of model calls not recorded: the worker stopped before the database took them", "calls", n)
		}
		return fmt.Errorf("worker: stop river: %w", err)
	}
	// No job runs now: the last flushes of the calls the database was out
	// for, within Stop's deadline (each call bounded: see addCalls).
	if n := w.drainUsage(ctx); n > 0 {
		w.logger.Error("token usage of model calls not recorded: the worker stopped before the database took them", "calls", n)
	}
	w.stopLiveness(ctx)
	w.stopFollowing(ctx)
	w.logger.Info("worker stopped")
	return nil
}

// halting returns ctx cancelled also when Stop begins, for a job whose
// work may as well end then: River cancels running jobs only once Stop's
// deadline has passed, and a long job that the next run redoes anyway
// (a prune: its deletes are committed batch by batch) would otherwise hold
// every stop for the whole of it. stopped reports whether Stop ended it.
func (w *Worker) halting(ctx context.Context) (_ context.Context, stopped func() bool, cancel context.CancelFunc) {
	w.mu.Lock()
	halt := w.halt
	w.mu.Unlock()
	ctx, cancelCause := context.WithCancelCause(ctx)
	errStopping := errors.New("worker stopping")
	go func() {
		select {
		case <-halt:
			cancelCause(errStopping)
		case <-ctx.Done():
		}
	}()
	return ctx, func() bool { return context.Cause(ctx) == errStopping }, func() { cancelCause(context.Canceled) }
}

// DefaultCompletedJobRetention is Config.CompletedJobRetention's default:
// long enough to look at the last hour's jobs (River's UI, a prune's
// report), short enough that completed jobs stay a small table.
const DefaultCompletedJobRetention = time.Hour

// riverRetention is River's form of a retention: -1 for forever.
func riverRetention(d time.Duration) time.Duration {
	if d < 0 {
		return -1
	}
	return d
}

// hardStopTimeout bounds Stop's wait for cancelled jobs to return.
const hardStopTimeout = 30 * time.Second

// deadLetterSubject is where a rejected event published on subject goes,
// keeping the user token of the original subject (so forgetting a user can
// purge their rejects too).
func deadLetterSubject(prefix, subject string) string {
	return events.DeadLetterSubject(prefix, events.TokenFromSubject(prefix, subject))
}

// outageSeeder is a client that can be told its server is down
// (*extractor.LLM, *embedding.Client).
type outageSeeder interface{ AssumeDown() }

// seedModelOutage tells the extractor its model server is down when an
// extraction job not done yet waits for it (its last snooze, lately, by
// any process, for the server down or refusing the configuration; not a
// job that has spent an attempt or snoozed for the database since): this
// process is starting during an
// outage, and would otherwise spend attempts on its first requests until
// it saw three fail (extractor.LLM.AssumeDown). And the embeddings client
// its server, when an embed or chunk embed job waits for it: the
// jobs this process ran sent each its request in the outage's first
// second (embedding.Client.AssumeDown). Best effort: on an error the
// process counts for itself, as before.
func (w *Worker) seedModelOutage(ctx context.Context) {
	w.seedOutage(ctx, w.cfg.Extractor, []store.RiverJobs{extractJobs}, &w.modelWaits,
		"extraction jobs are waiting for the model server; its next server error counts as the outage going on")
	if w.cfg.Embedder != nil {
		w.seedOutage(ctx, w.cfg.Embedder, w.embedWaits.jobs, &w.embedWaits,
			"embed jobs are waiting for the embeddings server; its next failure counts as the outage going on")
	}
}

// seedOutage is seedModelOutage for client, whose server jobs of the
// kinds of jobs wait for, with waiters, the process's waiters of that
// server.
func (w *Worker) seedOutage(ctx context.Context, client any, jobs []store.RiverJobs, waiters *modelWaiters, told string) {
	seeder, ok := client.(outageSeeder)
	if !ok {
		return
	}
	for _, kind := range jobs {
		// A snooze for the server is at most maxModelWait: a job waiting
		// for it now was scheduled within that of now, or later.
		waiting, err := w.cfg.Store.JobsWaiting(ctx, kind, metaSnoozedFor, outcomeModelDown, 2*maxModelWait)
		if err != nil {
			w.logger.Warn("cannot tell whether jobs wait for the "+waiters.server+"; counting its errors afresh", "error", err)
			return
		}
		if waiting {
			// Woken at its first answer, as this process's own would be.
			waiters.waiting()
			seeder.AssumeDown()
			w.logger.Info(told)
			return
		}
	}
}
