package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/memoryd/memoryd/store"
)

// FollowerStore is what an EmbedFollower reads the running models from and
// installs its hooks on (store.Store).
type FollowerStore interface {
	LiveEmbedModels(ctx context.Context, within time.Duration) ([]string, error)
	SetContextHook(h store.ContextHook)
	SetChunkHook(h store.ChunkHook)
}

// EmbedFollowerConfig configures an EmbedFollower.
type EmbedFollowerConfig struct {
	// Store is read for the running models and gets the hooks. Required.
	Store FollowerStore
	// Enqueuer inserts the embed jobs. Required.
	Enqueuer *Enqueuer
	// Live is how recent a worker process's heartbeat must be for its model
	// to count. Default 10s, a worker's default ProcessTimeout.
	Live time.Duration
	// Interval is how often the running models are read again. Default 5s.
	Interval time.Duration
	// JobSize is the most items (chunks) one embed job names. Default 64
	// (DefaultEmbedJobSize).
	JobSize int
	// MaxAttempts is how often each embed job runs. Default 10, as a
	// worker's EmbedMaxAttempts.
	MaxAttempts int
	// Logger receives the follower's events. Default slog.Default().
	Logger *slog.Logger
}

func (c EmbedFollowerConfig) withDefaults() EmbedFollowerConfig {
	if c.Live == 0 {
		c.Live = defaultProcessTimeout
	}
	if c.Interval == 0 {
		c.Interval = 5 * time.Second
	}
	if c.JobSize == 0 {
		c.JobSize = DefaultEmbedJobSize
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 10
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c EmbedFollowerConfig) validate() error {
	switch {
	case c.Store == nil:
		return errors.New("worker: EmbedFollowerConfig.Store is required")
	case c.Enqueuer == nil:
		return errors.New("worker: EmbedFollowerConfig.Enqueuer is required")
	case c.Live < 0:
		return fmt.Errorf("worker: EmbedFollowerConfig.Live %s is negative", c.Live)
	case c.Interval < 0:
		return fmt.Errorf("worker: EmbedFollowerConfig.Interval %s is negative", c.Interval)
	case c.JobSize < 1 || c.JobSize > 10_000:
		return fmt.Errorf("worker: EmbedFollowerConfig.JobSize must be between 1 and 10000, not %d", c.JobSize)
	case c.MaxAttempts < 1:
		return fmt.Errorf("worker: EmbedFollowerConfig.MaxAttempts must be positive, not %d", c.MaxAttempts)
	}
	return nil
}

// EmbedFollower gives the items and document chunks written by a process
// that embeds nothing itself (a replay, a worker or an enrich serve started
// without --embed-base-url) embed jobs for each model a running worker
// process embeds with (store.LiveEmbedModels), in the writing transaction,
// as those processes' own writes get theirs. Without it such items were
// found by keywords only until the next hourly sweep. The jobs go to the
// embed queue, which only processes that embed work, and one of the model
// takes them (EmbedArgs.Model): during a change of model (or a backfill of
// a new one beside the serves) both models' serves get the item's vector.
// The models are read at Start and every Interval; when no worker embeds,
// nothing is enqueued (a sweep enqueues what is missing once one runs).
type EmbedFollower struct {
	cfg    EmbedFollowerConfig
	models atomic.Pointer[[]string]

	mu   sync.Mutex
	stop chan struct{}
	done chan struct{}
}

// NewEmbedFollower returns an EmbedFollower; it does nothing until Start.
func NewEmbedFollower(cfg EmbedFollowerConfig) (*EmbedFollower, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &EmbedFollower{cfg: cfg}, nil
}

// Models are the models whose embed jobs the follower inserts now, the
// most recently started worker's first.
func (f *EmbedFollower) Models() []string {
	if m := f.models.Load(); m != nil {
		return *m
	}
	return nil
}

// Start reads the running models, installs the store's hooks and keeps
// the models current until Stop.
func (f *EmbedFollower) Start(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stop != nil {
		return errors.New("worker: embed follower already started")
	}
	if err := f.refresh(ctx); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	items, err := f.cfg.Enqueuer.embedOpts(sourceEmbedWrite, f.cfg.MaxAttempts, false)
	if err != nil {
		return err
	}
	f.cfg.Store.SetContextHook(func(ctx context.Context, tx pgx.Tx, refs []store.ContextRef) error {
		var params []river.InsertManyParams
		for _, m := range f.Models() {
			params = append(params, embedParams(refs, m, f.cfg.JobSize, items)...)
		}
		if len(params) == 0 {
			return nil
		}
		if _, err := f.cfg.Enqueuer.client.InsertManyFastTx(ctx, tx, params); err != nil {
			return fmt.Errorf("enqueue embedding: %w", err)
		}
		return nil
	})
	f.cfg.Store.SetChunkHook(func(ctx context.Context, tx pgx.Tx, docs []store.DocChunksRef) error {
		var params []river.InsertManyParams
		for _, m := range f.Models() {
			params = append(params, chunkEmbedParams(docs, m, f.cfg.JobSize, items)...)
		}
		if len(params) == 0 {
			return nil
		}
		if _, err := f.cfg.Enqueuer.client.InsertManyFastTx(ctx, tx, params); err != nil {
			return fmt.Errorf("enqueue chunk embedding: %w", err)
		}
		return nil
	})
	f.stop, f.done = make(chan struct{}), make(chan struct{})
	go f.loop(f.stop, f.done)
	return nil
}

func (f *EmbedFollower) loop(stop, done chan struct{}) {
	defer close(done)
	tick := time.NewTicker(f.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), f.cfg.Interval)
		if err := f.refresh(ctx); err != nil {
			// The model read before stays: a moment without Postgres
			// changes no model.
			f.cfg.Logger.Debug("embed follower", "error", err)
		}
		cancel()
	}
}

// refresh reads the models of the running workers that embed, and logs a
// change.
func (f *EmbedFollower) refresh(ctx context.Context) error {
	models, err := f.cfg.Store.LiveEmbedModels(ctx, f.cfg.Live)
	if err != nil {
		return err
	}
	old := f.models.Swap(&models)
	if old == nil && len(models) == 0 || old != nil && slices.Equal(*old, models) {
		return nil
	}
	if len(models) == 0 {
		f.cfg.Logger.Info("no running worker embeds: the items this process writes get no embed jobs until one starts (its sweep enqueues them)")
	} else {
		f.cfg.Logger.Info("this process embeds nothing itself: the items it writes get embed jobs for the running workers' models", "embed_models", models)
	}
	return nil
}

// Stop stops following; the models last read stay in use by the hooks.
func (f *EmbedFollower) Stop(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stop == nil {
		return nil
	}
	close(f.stop)
	select {
	case <-f.done:
	case <-ctx.Done():
		// The loop's read is bounded by Interval; it ends on its own.
	}
	f.stop = nil
	return nil
}
