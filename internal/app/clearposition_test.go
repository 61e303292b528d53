package app

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// TestClearPositionFallsBackToTime: a clear whose read of the turn stream
// fails (JetStream down, a permission) goes on by timestamps alone, with a
// warning, rather than answering the clear with an error; a read that
// works passes its position through.
func TestClearPositionFallsBackToTime(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	failing := clearPosition(func(context.Context) (store.StreamPosition, error) {
		return store.StreamPosition{}, errors.New("nats: timeout")
	}, "TURNS", logger)
	if p, err := failing(context.Background()); err != nil || p != (store.StreamPosition{}) {
		t.Fatalf("position when JetStream fails: %+v, %v; want none and no error", p, err)
	}
	if !strings.Contains(logs.String(), "by their timestamps only") {
		t.Errorf("no warning: %s", logs.String())
	}
	want := store.StreamPosition{Seq: 41, Stored: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
	working := clearPosition(func(ctx context.Context) (store.StreamPosition, error) {
		if _, ok := ctx.Deadline(); !ok {
			return store.StreamPosition{}, errors.New("the read has no deadline")
		}
		return want, nil
	}, "TURNS", logger)
	if p, err := working(context.Background()); err != nil || p != want {
		t.Fatalf("position when JetStream answers: %+v, %v; want %+v", p, err, want)
	}
}
