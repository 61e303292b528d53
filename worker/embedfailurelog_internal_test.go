package worker

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestEmbedFailureLogSaysWhatFollowsAGiveUp: the error line of an embed
// job that gave up says what brings its texts their vectors (the sweep,
// or a backfill), not only "until it succeeds", which no retry of that
// job would; a job to be retried says nothing of the kind.
func TestEmbedFailureLogSaysWhatFollowsAGiveUp(t *testing.T) {
	t.Parallel()
	const failed = "embedding failed; the items stay lexical-only until it succeeds"
	err := errors.New("embedding: permanent error: status 401")
	level, msg := embedFailureLog(verdict{final: true, label: outcomeFailed}, err, failed)
	if level != slog.LevelError || !strings.HasPrefix(msg, failed) || !strings.Contains(msg, "memoryd embed --backfill") || !strings.Contains(msg, "sweep") {
		t.Errorf("given up: %v %q, want an error line naming the sweep and embed --backfill", level, msg)
	}
	level, msg = embedFailureLog(verdict{label: outcomeRetry, river: err}, err, failed)
	if level != slog.LevelWarn || msg != failed {
		t.Errorf("to be retried: %v %q, want %v %q", level, msg, slog.LevelWarn, failed)
	}
}
