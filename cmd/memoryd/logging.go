package main

import (
	"context"
	"log/slog"
	"strings"
)

// readableDurations logs durations as Go duration strings ("30s", "1.5ms")
// instead of slog's JSON default, integer nanoseconds.
func readableDurations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// riverQuiet wraps the process's log handler. Records of the logger given to
// River (the worker adds component=river) at info level go out at debug:
// River logs its producers' periodic job counts, maintenance runs and client
// start/stop at info, which drowns memoryd's own info lines. Warnings and
// errors, and the info lines that report a job's failure, keep their level.
type riverQuiet struct {
	slog.Handler
	river bool
}

func (h *riverQuiet) Handle(ctx context.Context, r slog.Record) error {
	if h.river && ((r.Level == slog.LevelInfo && !riverKeepsInfo(r.Message)) || (r.Level > slog.LevelInfo && cancelledByStop(r))) {
		if !h.Handler.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	return h.Handler.Handle(ctx, r)
}

// riverKeepsInfo reports whether a River info message says something went
// wrong ("Job errored; retrying", "Job panicked", "Notifier unhealthy",
// "Hard stop started"): those stay at info.
func riverKeepsInfo(msg string) bool {
	for _, s := range []string{"errored", "panicked", "unhealthy", "Hard stop", "unstuck"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// cancelledByStop reports whether a River warning or error only says that
// its context was cancelled: a maintenance service interrupted by shutdown
// ("Error starting transaction: context canceled"), not a failure.
func cancelledByStop(r slog.Record) bool {
	cancelled := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "error" && strings.HasSuffix(a.Value.String(), context.Canceled.Error()) {
			cancelled = true
			return false
		}
		return true
	})
	return cancelled
}

func (h *riverQuiet) WithAttrs(attrs []slog.Attr) slog.Handler {
	river := h.river
	for _, a := range attrs {
		if a.Key == "component" && a.Value.String() == "river" {
			river = true
		}
	}
	return &riverQuiet{Handler: h.Handler.WithAttrs(attrs), river: river}
}

func (h *riverQuiet) WithGroup(name string) slog.Handler {
	return &riverQuiet{Handler: h.Handler.WithGroup(name), river: h.river}
}
