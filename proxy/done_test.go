package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
)

// TestDoneWhenServingFails: a proxy whose listener fails says so on Done,
// so that the command ends rather than run on, serving nothing, until a
// signal (before, it only logged).
func TestDoneWhenServingFails(t *testing.T) {
	t.Parallel()
	p, err := New(Config{Upstream: "http://127.0.0.1:1/v1", Listen: "127.0.0.1:0", TrustedUserHeader: "X-User",
		Conn: eventstest.Conn(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = p.ln.Close() // the listener fails under Serve
	select {
	case err := <-p.Done():
		if err == nil || errors.Is(err, http.ErrServerClosed) {
			t.Fatalf("Done after the listener failed: %v, want its error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Done received nothing after the listener failed")
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Fatalf("Stop after serving failed: %v", err)
	}
}
