package app

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/embedding/embeddingtest"
)

// TestEmbedProbeWaitsWhatTheServerAsks: the backfill's test text, asked
// to wait by a 429's Retry-After, waits that long before its next try, up
// to probeMaxRetryAfter; any other passing failure waits probeRetryWait;
// three tries at most. Before, every wait was 1 s, and a server asking
// for 3 s got its next two requests within 2 s: the backfill ended
// refused. The waits are recorded, not slept.
func TestEmbedProbeWaitsWhatTheServerAsks(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name       string
		fail       func(srv *embeddingtest.Server)
		failOnce   bool // served again after the first wait
		wantWaits  []time.Duration
		wantTries  int
		wantFailed bool
	}{
		{"429 with Retry-After 3", func(srv *embeddingtest.Server) { srv.Fail(http.StatusTooManyRequests, "3") }, true,
			[]time.Duration{3 * time.Second}, 2, false},
		{"429 with a Retry-After over the cap", func(srv *embeddingtest.Server) { srv.Fail(http.StatusTooManyRequests, "3600") }, true,
			[]time.Duration{probeMaxRetryAfter}, 2, false},
		{"429 without Retry-After", func(srv *embeddingtest.Server) { srv.Fail(http.StatusTooManyRequests, "") }, true,
			[]time.Duration{time.Second}, 2, false},
		{"500", func(srv *embeddingtest.Server) { srv.Fail(http.StatusInternalServerError, "") }, true,
			[]time.Duration{probeRetryWait}, 2, false},
		{"429 with Retry-After 2 every time", func(srv *embeddingtest.Server) { srv.Fail(http.StatusTooManyRequests, "2") }, false,
			[]time.Duration{2 * time.Second, 2 * time.Second}, probeAttempts, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := embeddingtest.New(t)
			emb, err := embedding.New(embedding.Config{BaseURL: srv.URL, Model: "m1"})
			if err != nil {
				t.Fatal(err)
			}
			tt.fail(srv)
			var waits []time.Duration
			_, err = probeEmbed(context.Background(), emb, func(_ context.Context, d time.Duration) error {
				waits = append(waits, d)
				if tt.failOnce {
					srv.Recover()
				}
				return nil
			})
			if (err != nil) != tt.wantFailed || !slices.Equal(waits, tt.wantWaits) || srv.Requests() != tt.wantTries {
				t.Errorf("probe: %v after %d requests, waits %v; want failed %v after %d, waits %v", err, srv.Requests(), waits, tt.wantFailed, tt.wantTries, tt.wantWaits)
			}
		})
	}
}
