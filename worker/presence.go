package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/memoryd/memoryd/store"
)

// PresenceStore is what a Presence records itself in (store.Store).
type PresenceStore interface {
	RegisterProcess(ctx context.Context, id string, p store.ProcessRecord) error
	Heartbeat(ctx context.Context, id string) (bool, error)
	EndProcess(ctx context.Context, id string) error
}

// PresenceConfig configures a Presence.
type PresenceConfig struct {
	// Store records the process. Required.
	Store PresenceStore
	// EmbedModel is the embedding model whose vectors the process reads.
	// Required: a process that reads none has nothing to keep.
	EmbedModel string
	// HeartbeatInterval is how often the record is renewed. Default 2s,
	// as a worker's (Config.HeartbeatInterval): well within the process
	// timeout after which workers delete it.
	HeartbeatInterval time.Duration
	// Logger receives the presence's events. Default slog.Default().
	Logger *slog.Logger
}

func (c PresenceConfig) withDefaults() PresenceConfig {
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c PresenceConfig) validate() error {
	switch {
	case c.Store == nil:
		return errors.New("worker: PresenceConfig.Store is required")
	case c.EmbedModel == "":
		return errors.New("worker: PresenceConfig.EmbedModel is required")
	case c.HeartbeatInterval < 0:
		return fmt.Errorf("worker: PresenceConfig.HeartbeatInterval %s is negative", c.HeartbeatInterval)
	}
	return nil
}

// Presence records a process that runs no worker, a serve of role enrich,
// in memoryd_processes with the embedding model whose vectors it searches,
// and renews the record while it runs, as a worker's liveness does: a
// prune over the size limit keeps the vectors of every model a running
// process records (store.DeleteOtherModelVectors), so that during a change
// of model the enrich serves of the old one keep theirs, and a change of
// deployment sees the process (it runs no job, so a worker that declares
// it dead takes nothing over). If the record is deleted while it runs (its
// renewals failed for the process timeout), it is registered again.
type Presence struct {
	cfg PresenceConfig
	id  string

	mu    sync.Mutex
	ticks *ticker // renewing, between Start and Stop
}

// NewPresence returns a Presence; it records nothing until Start.
func NewPresence(cfg PresenceConfig) (*Presence, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("worker: presence id: %w", err)
	}
	return &Presence{cfg: cfg, id: store.EnrichProcessPrefix + hex.EncodeToString(b)}, nil
}

// ID is the process's id in memoryd_processes.
func (p *Presence) ID() string { return p.id }

// Start records the process and starts renewing the record until Stop.
func (p *Presence) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ticks != nil {
		return errors.New("worker: presence already started")
	}
	if err := p.cfg.Store.RegisterProcess(ctx, p.id, store.ProcessRecord{EmbedModel: p.cfg.EmbedModel}); err != nil {
		return fmt.Errorf("worker: presence: %w", err)
	}
	p.ticks = every(p.cfg.HeartbeatInterval, func(ctx context.Context) {
		alive, err := p.cfg.Store.Heartbeat(ctx, p.id)
		if err == nil && !alive {
			err = p.cfg.Store.RegisterProcess(ctx, p.id, store.ProcessRecord{EmbedModel: p.cfg.EmbedModel})
		}
		if err != nil {
			p.cfg.Logger.Debug("presence heartbeat", "process", p.id, "error", err)
		}
	})
	return nil
}

// Stop stops renewing the record and marks the process ended, so that its
// model counts no more; past ctx, the record expires on its own after the
// process timeout.
func (p *Presence) Stop(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ticks == nil {
		return nil
	}
	p.ticks.stop()
	p.ticks = nil
	if err := p.cfg.Store.EndProcess(ctx, p.id); err != nil {
		return fmt.Errorf("worker: presence: %w", err)
	}
	return nil
}
