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
	// Own is the model this process embeds with itself, "" for none: its
	// jobs are inserted whatever runs, before the other running models'.
	Own string
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

// EmbedFollower gives the items and document chunks a process writes embed
// jobs for each model a running worker process embeds with
// (store.LiveEmbedModels), in the writing transaction, besides the model
// the process embeds with itself (Own), if any. Without it the items of a
// process that embeds nothing itself (a replay, a worker or an enrich serve
// started without --embed-base-url) were found by keywords only until the
// next hourly sweep, and in a fleet of two models (a model change rolling
// out) each item had only its writer's model's vector until then, so the
// other model's serves answered without it. The jobs go to the
// embed queue, which only processes that embed work, and one of the model
// takes them (EmbedArgs.Model): during a change of model (or a backfill of
// a new one beside the serves) both models' serves get the item's vector.
// The models are read at Start and every Interval; when no worker embeds,
// nothing is enqueued (a sweep enqueues what is missing once one runs).
type EmbedFollower struct {
	cfg    EmbedFollowerConfig
	models atomic.Pointer[[]string]

	mu    sync.Mutex
	ticks *ticker // refreshing, between Start and Stop
}

// NewEmbedFollower returns an EmbedFollower; it does nothing until Start.
func NewEmbedFollower(cfg EmbedFollowerConfig) (*EmbedFollower, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &EmbedFollower{cfg: cfg}, nil
}

// Models are the models whose embed jobs the follower inserts now: Own
// first, then the running workers', the most recently started first.
func (f *EmbedFollower) Models() []string {
	var live []string
	if m := f.models.Load(); m != nil {
		live = *m
	}
	if f.cfg.Own == "" {
		return live
	}
	out := make([]string, 1, len(live)+1)
	out[0] = f.cfg.Own
	for _, m := range live {
		if m != f.cfg.Own {
			out = append(out, m)
		}
	}
	return out
}

// Start reads the running models, installs the store's hooks and keeps
// the models current until Stop.
func (f *EmbedFollower) Start(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ticks != nil {
		return errors.New("worker: embed follower already started")
	}
	if err := f.refresh(ctx); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	items, err := f.cfg.Enqueuer.embedHook(f.Models, f.cfg.JobSize, f.cfg.MaxAttempts)
	if err != nil {
		return err
	}
	chunks, err := f.cfg.Enqueuer.chunkEmbedHook(f.Models, f.cfg.JobSize, f.cfg.MaxAttempts)
	if err != nil {
		return err
	}
	f.cfg.Store.SetContextHook(items)
	f.cfg.Store.SetChunkHook(chunks)
	f.ticks = every(f.cfg.Interval, func(ctx context.Context) {
		if err := f.refresh(ctx); err != nil {
			// The models read before stay: a moment without Postgres
			// changes none.
			f.cfg.Logger.Debug("embed follower", "error", err)
		}
	})
	return nil
}

// refresh reads the models of the running workers that embed, and logs a
// change.
func (f *EmbedFollower) refresh(ctx context.Context) error {
	models, err := f.cfg.Store.LiveEmbedModels(ctx, f.cfg.Live)
	if err != nil {
		return err
	}
	old := f.models.Swap(&models)
	if f.cfg.Own != "" {
		// Said when the other models change, as a set: this process's
		// own registering late, or the list's order, is no change (an
		// embeddings walk saw the same line twice at start, and nothing
		// when the other model's workers stopped).
		var before []string
		if old != nil {
			before = f.others(*old)
		}
		after := f.others(models)
		switch {
		case slices.Equal(before, after):
		case len(after) > 0:
			f.cfg.Logger.Info("other running workers embed with other models: the items this process writes get embed jobs for theirs too", "embed_model", f.cfg.Own, "other_models", after)
		default:
			f.cfg.Logger.Info("no other running worker embeds with another model now: the items this process writes get embed jobs of its own model alone", "embed_model", f.cfg.Own)
		}
		return nil
	}
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

// others are the models of ms other than the follower's own, sorted.
func (f *EmbedFollower) others(ms []string) []string {
	out := slices.DeleteFunc(slices.Clone(ms), func(m string) bool { return m == f.cfg.Own })
	slices.Sort(out)
	return out
}

// Stop stops following; the models last read stay in use by the hooks.
func (f *EmbedFollower) Stop(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ticks == nil {
		return nil
	}
	f.ticks.stop()
	f.ticks = nil
	return nil
}

// ticker calls a function every interval, on a goroutine of its own, until
// stop: the loop of a Presence's heartbeat and an EmbedFollower's refresh.
type ticker struct {
	halt chan struct{}
	done chan struct{}
}

// every starts calling fn every interval, each call with a context bounded
// by interval, so that a call cannot outlast the next tick by much.
func every(interval time.Duration, fn func(ctx context.Context)) *ticker {
	t := &ticker{halt: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(t.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-t.halt:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), interval)
			fn(ctx)
			cancel()
		}
	}()
	return t
}

// stop ends the calls, waiting for one in progress (at most its interval).
func (t *ticker) stop() {
	close(t.halt)
	<-t.done
}
