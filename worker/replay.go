package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// ReplayConfig configures Replay.
type ReplayConfig struct {
	// JetStream reads the stream. Required.
	JetStream jetstream.JetStream
	// Store receives the turns and jobs. Required.
	Store *store.Store
	// Prefix is the subject prefix. Default "memory".
	Prefix string
	// Stream is the turn stream. Default "MEMORY_TURNS".
	Stream string
	// Users limits the replay to these users; default all.
	Users []string
	// Since replays turns stored in the stream at or after this time.
	Since time.Time
	// FromSeq replays from this stream sequence; 0 means the start.
	FromSeq uint64
	// Reset deletes the derived memory of the users in scope (all users when
	// Users is empty) in one transaction before replaying.
	Reset bool
	// AllowLoss lets Reset delete memory that no replay can rebuild:
	// extracted from recorded turns whose events the stream no longer
	// holds (store.Unreplayable). Without it such a reset is refused with
	// an *UnreplayableError before anything is deleted.
	AllowLoss bool
	// DryRun reads and counts without writing anything.
	DryRun bool
	// BatchSize is how many events share one transaction (at most; a
	// transaction records whole users of a window where it can). Default
	// 500.
	BatchSize int
	// Window is how many turns replay reads before it records them. A
	// window's turns are recorded grouped by user (in stream order within
	// each user), so that one user's turns share jobs of JobSize even when
	// the stream interleaves many users: batches of 500 events over 1,000
	// users would otherwise give one-turn jobs, and extraction would run
	// at Workers jobs per fetch cooldown, whatever JobSize. Memory holds at
	// most one window (see WindowBytes). Default DefaultReplayWindow; at
	// most BatchSize records each batch as it is read.
	Window int
	// WindowBytes bounds the text (messages, replies, metadata) one window
	// holds: a window is recorded once it holds this much. Default
	// DefaultReplayWindowBytes.
	WindowBytes int
	// JobSize is how many turns one extraction job gets, at most: a job
	// holds turns of one transaction, so at most min(JobSize, BatchSize).
	// Large jobs make the offline extractor fast; with an LLM, small ones
	// spread the calls over the workers. Default 100.
	JobSize int
	// MaxClockSkew is how far a turn's timestamp may be ahead of the time
	// the stream stored the event before it is clamped to that time; use
	// the workers' Config.MaxClockSkew. Default 5m.
	MaxClockSkew time.Duration
	// StallTimeout is how long the replay waits for the next event before it
	// takes its consumer for stalled (as one can be after a purge of another
	// subject) and reads on from a new one. Default 5s.
	StallTimeout time.Duration
	// Progress, when set, is called every BatchSize events read and after
	// every transaction of a window recorded, on the goroutine that reads
	// the stream.
	Progress func(ReplayProgress)
	// Enqueuer inserts the extraction jobs: the process's Worker's
	// (Worker.Enqueuer) when it runs one, else one from NewEnqueuer with
	// the workers' MaxAttempts. Default: NewEnqueuer on Store without
	// MaxAttempts (each job runs the MaxAttempts of the worker that takes
	// it).
	Enqueuer *Enqueuer
	// Logger default slog.Default().
	Logger *slog.Logger

	// collect, when set, is handed every window of turns a dry run reads
	// (the reset's check).
	collect func([]store.Turn) error
}

// ReplayProgress reports a replay's advance.
type ReplayProgress struct {
	// Read counts events read so far; Total is what the stream held for the
	// replay's scope when it started.
	Read, Total uint64
	// EndSeq is the stream's last sequence when the replay began to read
	// it: the replay reads up to it, so the turns it enqueued are stored at
	// or before it, and turns recorded since (live ingest) after it.
	EndSeq uint64
	// Enqueued counts turns set to be extracted again. It moves only when
	// a window is recorded, by up to Window turns at once, so it lags Read
	// by up to a window.
	Enqueued int
	// Recorded counts the valid turns read whose window was recorded,
	// enqueued or not (already pending, skipped as forgotten): with
	// Invalid and OptedOut it reaches Read once everything read is
	// recorded, where Enqueued may stay short of it.
	Recorded int
	// Invalid counts events skipped as invalid; OptedOut those with
	// memory:false.
	Invalid, OptedOut int
	// Forgotten counts events skipped because a forget of their user
	// covers them: one that ran beside the replay, one whose deletes from
	// the stream did not finish, or a stream restored from a backup older
	// than the forget. Each is deleted from the stream as it is skipped
	// (a forget promises no event of the user before it stays), unless a
	// dry run: ForgottenDeleted counts those deleted (or gone already).
	Forgotten        int
	ForgottenDeleted int
	// Reset says the reset committed: from then until the replay has read
	// and extracted everything, the users in scope have only what it has
	// rebuilt. Removed is what it deleted.
	Reset   bool
	Removed store.Removed
	// Unreplayable is what the reset deleted (with AllowLoss), or with
	// DryRun would delete, that no replay rebuilds; see store.Unreplayable.
	Unreplayable store.Unreplayable
	// Completed counts the earlier resets (store.ResetMark) that had not
	// read the stream back, running or stopped, whose users this replay
	// read back in full: it completed them. Unfinished lists the resets
	// left unfinished when it ended: of other users, or begun after it.
	// Both are set only once it has read everything.
	Completed  int64
	Unfinished []store.ResetMark
	// Elapsed since the replay started.
	Elapsed time.Duration
	// Reading is the part of Elapsed since it began to read the stream
	// for the replay (after a reset's check and delete): what Rate and ETA
	// measure. Zero before.
	Reading time.Duration

	readFrom time.Time // when Reading began
	// resetDone is the reset's ResetMark.Committed: turns processed since
	// are not extracted again (store.RequeueTurns).
	resetDone time.Time
}

// Rate is events read per second.
func (p ReplayProgress) Rate() float64 {
	// Over the reading alone: a reset's check and delete, tens of seconds
	// on a large stream, made the ETA read 23 minutes with 30 s left.
	d := p.Reading
	if d <= 0 {
		d = p.Elapsed
	}
	if d <= 0 {
		return 0
	}
	return float64(p.Read) / d.Seconds()
}

// ETA estimates the time left.
func (p ReplayProgress) ETA() time.Duration {
	r := p.Rate()
	if r == 0 || p.Read >= p.Total {
		return 0
	}
	return time.Duration(float64(p.Total-p.Read) / r * float64(time.Second))
}

// Replay reads the turn stream with ordered consumers (one per user in scope,
// or one over all users) and sends every valid turn through extraction again:
// turns are recorded or set back to pending and batched into River jobs of
// JobSize turns of one user (gathered over a Window of the stream), so that
// the running workers rebuild memory without per-turn job overhead. A turn
// is recorded pending and its job inserted in one transaction. Facts
// converge whatever order the jobs run in (latest source time wins) and
// context is deduplicated, so replaying twice gives the same
// memory as replaying once, and an interrupted replay can simply be re-run.
//
// Replay only enqueues; workers (memoryd serve, or a Worker started by the
// caller) do the extraction. It reads what the stream held when it started,
// up to the stream's last sequence then, also when subjects are purged
// while it reads. If it cannot read all of it, it still reads the other
// users' subjects and then returns a *ReplayIncompleteError (joined with the
// others) for each part it did not read.
func Replay(ctx context.Context, cfg ReplayConfig) (ReplayProgress, error) {
	if cfg.JetStream == nil || cfg.Store == nil {
		return ReplayProgress{}, errors.New("worker: ReplayConfig.JetStream and Store are required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = events.DefaultPrefix
	}
	if cfg.Stream == "" {
		cfg.Stream = events.DefaultStream
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	if cfg.JobSize <= 0 {
		cfg.JobSize = 100
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultReplayWindow
	}
	if cfg.WindowBytes <= 0 {
		cfg.WindowBytes = DefaultReplayWindowBytes
	}
	if cfg.MaxClockSkew <= 0 {
		cfg.MaxClockSkew = DefaultMaxClockSkew
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = DefaultReplayStallTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	start := time.Now()
	var (
		p       ReplayProgress
		before  []store.ResetMark // resets unfinished when the replay began
		ownMark int64
	)
	if !cfg.DryRun {
		var err error
		if before, err = cfg.Store.UnfinishedResets(ctx); err != nil {
			return p, fmt.Errorf("replay: %w", err)
		}
	}
	if cfg.Reset {
		// A stream that is not there or does not store this prefix's
		// turns (a mistyped --stream or --prefix) is refused before the
		// memory goes: the replay would read nothing back. The end is read
		// after the reset (below), so that what was extracted before it is
		// read back.
		// A lookup that fails says nothing of the stream (nats-server 2.11
		// and later answer it only when no other API request waits, so a
		// forget's deletes can hold it past the timeout): it is reported
		// as such, not as a mistyped name.
		lctx, cancel := events.InfoContext(ctx, cfg.JetStream)
		name, err := cfg.JetStream.StreamNameBySubject(lctx, events.TurnSubjects(cfg.Prefix))
		cancel()
		if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return p, fmt.Errorf("replay: look up the stream of %s: %w", events.TurnSubjects(cfg.Prefix), err)
		}
		if err != nil || name != cfg.Stream {
			if err == nil {
				err = fmt.Errorf("they are in stream %s", name)
			}
			return p, fmt.Errorf("replay: stream %s does not store %s: %w", cfg.Stream, events.TurnSubjects(cfg.Prefix), err)
		}
		lost, err := unreplayable(ctx, cfg)
		if err != nil {
			return p, err
		}
		p.Unreplayable = lost
		if lost.Items > 0 && !cfg.AllowLoss && !cfg.DryRun {
			return p, &UnreplayableError{Stream: cfg.Stream, Unreplayable: lost}
		}
	}
	if cfg.Reset && !cfg.DryRun {
		removed, mark, err := cfg.Store.ResetMemory(ctx, cfg.Users)
		if err != nil {
			return p, fmt.Errorf("replay reset: %w", err)
		}
		p.Reset, p.Removed, ownMark, p.resetDone = true, removed, mark.ID, mark.Committed
	}
	enq := cfg.Enqueuer
	if enq == nil && !cfg.DryRun {
		var err error
		if enq, err = NewEnqueuer(EnqueuerConfig{Store: cfg.Store, Logger: cfg.Logger}); err != nil {
			return p, fmt.Errorf("replay: %w", err)
		}
	}
	p.readFrom = time.Now()
	if err := readStream(ctx, cfg, enq, &p, start); err != nil {
		p.Elapsed = time.Since(start)
		return p, err
	}
	var err error
	if !cfg.DryRun {
		// Everything is read back and enqueued: the reset is complete, and
		// so is an earlier one whose users a replay from the start read.
		whole := cfg.Since.IsZero() && cfg.FromSeq == 0
		if p.Completed, err = cfg.Store.FinishResets(ctx, ownMark, before, cfg.Users, whole); err != nil {
			return p, fmt.Errorf("replay: %w", err)
		}
		if p.Unfinished, err = cfg.Store.UnfinishedResets(ctx); err != nil {
			return p, fmt.Errorf("replay: %w", err)
		}
	}
	p.Elapsed = time.Since(start)
	if cfg.DryRun {
		// Nothing was written: say what would have been, not "enqueued".
		cfg.Logger.Info("replay dry run counted", "read", p.Read, "would_enqueue", p.Enqueued, "invalid", p.Invalid)
	} else {
		cfg.Logger.Info("replay enqueued", "read", p.Read, "enqueued", p.Enqueued, "invalid", p.Invalid, "forgotten", p.Forgotten)
	}
	return p, nil
}

// readStream reads what the stream holds for cfg's scope, up to its last
// sequence now, with ordered consumers (one per user named, else one over
// every user's subjects), and records it (requeue; counted only with
// DryRun, and handed to cfg.collect when set). A part it cannot read is a
// *ReplayIncompleteError, joined with the others, after it read the rest.
func readStream(ctx context.Context, cfg ReplayConfig, enq *Enqueuer, p *ReplayProgress, start time.Time) error {
	filters := []string{events.TurnSubjects(cfg.Prefix)}
	if len(cfg.Users) > 0 {
		filters = filters[:0]
		for _, u := range cfg.Users {
			filters = append(filters, events.TurnSubject(cfg.Prefix, u))
		}
	}
	// What the stream holds now is what the replay reads.
	end, err := streamEnd(ctx, cfg.JetStream, cfg.Stream)
	if err != nil {
		return err
	}
	p.EndSeq = end
	// One ordered consumer per filter: JetStream 2.9 takes a single filter
	// subject per consumer.
	var sources []replaySrc
	for _, f := range filters {
		// A bounded reset: nats.go otherwise retries recreating the
		// consumer forever (past Next's deadline) when the stream is gone.
		occ := jetstream.OrderedConsumerConfig{FilterSubjects: []string{f}, DeliverPolicy: jetstream.DeliverAllPolicy, MaxResetAttempts: orderedResets}
		switch {
		case cfg.FromSeq > 0:
			occ.DeliverPolicy, occ.OptStartSeq = jetstream.DeliverByStartSequencePolicy, cfg.FromSeq
		case !cfg.Since.IsZero():
			since := cfg.Since
			occ.DeliverPolicy, occ.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
		}
		cons, pending, err := orderedConsumer(ctx, cfg, occ)
		if err != nil {
			return err
		}
		sources = append(sources, replaySrc{filter: f, occ: occ, cons: cons, pending: pending})
		p.Total += pending
	}
	var incomplete []error
	for _, src := range sources {
		err := replaySource(ctx, cfg, enq, src, end, p, start)
		var inc *ReplayIncompleteError
		if errors.As(err, &inc) {
			// Read the other users' subjects anyway; report it at the end.
			cfg.Logger.Error("replay could not read part of the stream", "subject", inc.Subject,
				"first_seq", inc.FirstSeq, "last_seq", inc.LastSeq, "unread", inc.Unread, "error", inc.Err)
			incomplete = append(incomplete, err)
			continue
		}
		if err != nil {
			return err
		}
	}
	return errors.Join(incomplete...)
}

// requeue records a batch of replayed turns and inserts jobs of jobSize turns for
// those that need extraction, in one transaction. It returns how many turns
// it enqueued, how many it skipped because a forget covers them, and the
// stream sequences of those of them the replay is to delete (forgottenSeqs).
func requeue(ctx context.Context, s *store.Store, enq *Enqueuer, turns []store.Turn, jobSize int, extractedSince time.Time) (n, forgotten int, del []uint64, err error) {
	for attempt := 1; ; attempt++ {
		n, forgotten, del, err = requeueOnce(ctx, s, enq, turns, jobSize, extractedSince)
		if err == nil || !store.IsLockWait(err) || attempt == requeueAttempts {
			return n, forgotten, del, err
		}
		// A deadlock with live ingest or extraction (the insert of a new
		// turn ingest records at the same time, in another order) rolled
		// the batch back whole: it is run again. Before, the replay
		// exited 1 (seen once in the chaos test).
		if sleep(ctx, time.Duration(attempt)*100*time.Millisecond); ctx.Err() != nil {
			return 0, 0, nil, fmt.Errorf("replay: %w", context.Cause(ctx))
		}
	}
}

// requeueAttempts bounds how often a replay batch is run when it fails on
// a deadlock or a lock timeout.
const requeueAttempts = 5

// requeueOnce is one attempt of requeue.
func requeueOnce(ctx context.Context, s *store.Store, enq *Enqueuer, turns []store.Turn, jobSize int, extractedSince time.Time) (n, forgotten int, del []uint64, err error) {
	err = s.InTx(ctx, func(tx pgx.Tx, q *store.Store) error {
		tokenOf, tokens := userTokens(turns)
		tombs, err := q.LockUsers(ctx, tokens)
		if err != nil {
			return err
		}
		read := len(turns)
		del = forgottenSeqs(turns, tokenOf, tombs)
		turns := uncovered(turns, tokenOf, tombs, nil)
		forgotten = read - len(turns)
		keys, err := q.RequeueTurns(ctx, turns, extractedSince)
		if err != nil || len(keys) == 0 {
			return err
		}
		n = len(keys)
		return enq.enqueueTurns(ctx, tx, withKeys(turns, keys), jobSize, sourceReplay, nil)
	})
	if err != nil {
		return 0, 0, nil, fmt.Errorf("replay: %w", err)
	}
	return n, forgotten, del, nil
}

// forgottenSeqs is the stream sequences of the turns a tombstone of tombs
// covers and whose events were surely published before the forget, which
// the replay deletes from the stream as the forget would have: covered by
// stored times (the tombstone's and the event's), or, for a tombstone of
// an earlier release (compared by sequence alone), stored before the
// forget happened. Such a tombstone also covers the events of a stream
// created again since that are under its sequence, published after the
// forget: they are skipped, as ingest skips them, but stay in the stream.
func forgottenSeqs(turns []store.Turn, tokenOf map[string]string, tombs map[string]store.Tombstone) []uint64 {
	var seqs []uint64
	for _, t := range turns {
		tomb, ok := tombs[tokenOf[t.UserID]]
		if !ok || t.Placed.Seq == 0 || t.Placed.Stored.IsZero() || !tomb.Covers(t.Placed) {
			continue
		}
		if tomb.Through.Stored.IsZero() && !t.Placed.Stored.Before(tomb.ForgottenAt.Add(-store.StoredSkew)) {
			continue
		}
		seqs = append(seqs, t.Placed.Seq)
	}
	return seqs
}

// orderedResets bounds how often an ordered consumer of the turn stream is
// recreated after it fell out of order or lost its server-side consumer.
const orderedResets = 3

// UnreplayableError is a replay --reset refused because it would delete
// memory no replay can rebuild (ReplayConfig.AllowLoss).
type UnreplayableError struct {
	Stream string
	store.Unreplayable
}

func (e *UnreplayableError) Error() string {
	return fmt.Sprintf("replay --reset refused: it would delete %d items of memory (of %d user(s)) extracted from %d recorded turns that stream %s no longer holds "+
		"(recorded from stream sequences %d-%d: its retention limits or a deletion removed them, or the stream was created again), and no replay can rebuild them. "+
		"Replay without --reset to keep that memory while the turns the stream holds are extracted again, or pass --allow-loss to reset anyway",
		e.Items, e.Users, e.Turns, e.Stream, e.FirstSeq, e.LastSeq)
}

// unreplayable is what a reset of cfg's users would delete that no replay
// can rebuild: it reads the stream through first (as a dry run), recording
// the turns it holds (store.RecordSeen), and counts the memory of the
// recorded turns it did not see: their events are gone (retention, a
// deletion, a stream deleted and created again) or no longer valid. Turns
// are matched by user and event id, so a turn whose first event is gone
// but which was published again is rebuilt from the copy, as the replay
// will. Turns recorded while it reads (live ingest) are left out. A part
// of the stream it cannot read refuses the reset: what it would lose
// cannot be told.
func unreplayable(ctx context.Context, cfg ReplayConfig) (store.Unreplayable, error) {
	before, err := cfg.Store.DatabaseNow(ctx)
	if err != nil {
		return store.Unreplayable{}, fmt.Errorf("replay: %w", err)
	}
	check := rand.Int64() // an id apart from another replay's check
	defer func() {
		if err := cfg.Store.DropSeen(context.WithoutCancel(ctx), check); err != nil {
			cfg.Logger.Warn("replay --reset could not delete its check's rows; the next check deletes them", "error", err)
		}
	}()
	pre := cfg
	pre.Reset, pre.DryRun, pre.Progress = false, true, nil
	pre.collect = func(turns []store.Turn) error { return cfg.Store.RecordSeen(ctx, check, turns) }
	cfg.Logger.Info("replay --reset: reading the stream through before the reset, to find memory it could not rebuild")
	var p ReplayProgress
	start := time.Now()
	if err := readStream(ctx, pre, nil, &p, start); err != nil {
		return store.Unreplayable{}, fmt.Errorf("replay --reset refused: reading the stream to check what it can rebuild: %w", err)
	}
	cfg.Logger.Info("replay --reset: stream checked", "read", p.Read, "took", time.Since(start).Round(time.Millisecond))
	return cfg.Store.UnseenMemory(ctx, check, cfg.Users, before)
}
