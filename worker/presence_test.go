package worker_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// TestPresence: a Presence records its process with its embedding model
// while it runs, registers again when a worker deleted its record as dead
// (its renewals were late), and marks it ended at Stop.
func TestPresence(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := context.Background()
	p, err := worker.NewPresence(worker.PresenceConfig{Store: s, EmbedModel: "m1", HeartbeatInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	live := func() (model string, ok bool) {
		t.Helper()
		err := s.Pool().QueryRow(ctx, `SELECT coalesce(embed_model, '') FROM memoryd_processes
			WHERE id = $1 AND heartbeat_at > now() - interval '10 seconds'`, p.ID()).Scan(&model)
		return model, err == nil
	}
	if m, ok := live(); !ok || m != "m1" {
		t.Fatalf("after Start: live %v, model %q; want a live record of m1", ok, m)
	}
	// A worker's takeover deletes the records of processes it finds dead.
	if _, err := s.Pool().Exec(ctx, `DELETE FROM memoryd_processes WHERE id = $1`, p.ID()); err != nil {
		t.Fatal(err)
	}
	eventstest.Eventually(t, "the presence to register again", 10*time.Second, func() (bool, string) {
		m, ok := live()
		return ok && m == "m1", "no live record"
	})
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := live(); ok {
		t.Fatal("after Stop the process is still live")
	}
	if _, err := worker.NewPresence(worker.PresenceConfig{Store: s}); err == nil {
		t.Fatal("a presence without a model was accepted")
	}
}
