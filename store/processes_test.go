package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestLiveEmbedModels: the models of the running worker processes, the
// most recently started one's first, each once; processes without a
// model, ended or silent ones, and enrich serves' records (they run no
// embed job) are left out.
func TestLiveEmbedModels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	for _, p := range []struct {
		id, model, started, beat string
	}{
		{"old", "m1", "now() - interval '1 hour'", "now()"},
		{"new", "m2", "now() - interval '1 minute'", "now()"},
		{"old-2", "m1", "now() - interval '2 hours'", "now()"},
		{"plain", "", "now()", "now()"},
		{"silent", "m3", "now()", "now() - interval '1 minute'"},
		{"ended", "m4", "now()", "'-infinity'"},
		{store.EnrichProcessPrefix + "0011223344556677", "m5", "now()", "now()"},
		// A worker on a host named enrich-…: River's id of it is no
		// enrich serve's.
		{"enrich-worker-7f9_2026_11_30T08_00_00_000000", "m6", "now() - interval '2 minutes'", "now()"},
	} {
		if _, err := s.Pool().Exec(ctx, `INSERT INTO memoryd_processes (id, embed_model, started_at, heartbeat_at)
			VALUES ($1, nullif($2, ''), `+p.started+`, `+p.beat+`)`, p.id, p.model); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.LiveEmbedModels(ctx, 10*time.Second)
	if err != nil || !slices.Equal(got, []string{"m2", "m6", "m1"}) {
		t.Fatalf("LiveEmbedModels = %v (%v), want [m2 m6 m1]", got, err)
	}
}
