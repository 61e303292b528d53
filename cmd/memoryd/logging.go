package main

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/internal/app"
	"github.com/memoryd/memoryd/internal/httperrlog"
	"github.com/memoryd/memoryd/proxy"
	"github.com/memoryd/memoryd/worker"
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
// errors, and the info lines that report a job's failure, keep their level,
// but for the completer's "giving up" (riverCompleterGivesUp), a warning.
//
// River's warnings and errors repeat while Postgres is down (each producer
// fails its fetch every poll: 48 lines in 25 s), its info line for a failed
// attempt while a server a job needs is down, and so do memoryd's lines
// about one request each (perRequest: an enrich degraded, a store call
// failed; two lines a request, 60 for 30 requests, in an operator's walk):
// a message logged again within repeatWindow goes out at debug, and the
// next one let through carries "repeated", the number held back. Every
// request is still counted (memoryd_enrich_degraded_total).
type riverQuiet struct {
	slog.Handler
	river bool
	// ui is set for River UI's logger (component=riverui), whose query
	// cache fails every 10 s while Postgres is down: its warnings and
	// errors are held back as River's are; its info lines stay.
	ui      bool
	repeats *repeats // shared by the handlers derived from one
}

func newRiverQuiet(h slog.Handler) *riverQuiet {
	return &riverQuiet{Handler: h, repeats: &repeats{now: time.Now, last: map[string]*repeat{}}}
}

func (h *riverQuiet) Handle(ctx context.Context, r slog.Record) error {
	if h.river && r.Level == slog.LevelError && r.Message == riverCompleterGivesUp {
		r.Level = slog.LevelWarn
	}
	if h.river && ((r.Level == slog.LevelInfo && !riverKeepsInfo(r.Message)) || (r.Level > slog.LevelInfo && cancelledByStop(r))) {
		if !h.Handler.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	// River's info line for a job's failed attempt ("Job errored;
	// retrying", "Job errored"): held back as its warnings are, since an
	// outage past the jobs' waits repeats it for every attempt of every
	// job (a crash-loop walk: hundreds a minute) beside memoryd's own line
	// for each, which says more. Its other info lines kept at info (a
	// panic, a hard stop) are each told.
	if ((h.river || h.ui || perRequest(r.Message)) && r.Level > slog.LevelInfo) || (h.river && r.Level == slog.LevelInfo && strings.Contains(r.Message, "errored")) {
		held, ok := h.repeats.let(r.Message)
		if !ok {
			if !h.Handler.Enabled(ctx, slog.LevelDebug) {
				return nil
			}
			r.Level = slog.LevelDebug
		} else if held > 0 {
			r.AddAttrs(slog.Int("repeated", held))
		}
	}
	return h.Handler.Handle(ctx, r)
}

// riverCompleterGivesUp is River's error when its batch completer failed
// three tries (about 7 s) at writing a batch of finished jobs' states,
// logged at warn instead: it gives up on that try only, puts the batch
// back and writes it on a later tick once Postgres answers (a 35 s outage
// in a walk: written 0.1 s after Postgres was back, no job lost), while
// "giving up" at error reads as if something stopped for good.
const riverCompleterGivesUp = "jobcompleter.BatchCompleter: Too many errors; giving up"

// repeatWindow is how long a River warning or error is held back after it
// was logged.
const repeatWindow = 30 * time.Second

// repeats remembers when each River message was last let through.
type repeats struct {
	now  func() time.Time
	mu   sync.Mutex
	last map[string]*repeat
}

type repeat struct {
	at   time.Time
	held int
}

// let reports whether msg goes out now, and how many were held back
// since it last did.
func (p *repeats) let(msg string) (held int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	r := p.last[msg]
	if r != nil && now.Sub(r.at) < repeatWindow {
		r.held++
		return 0, false
	}
	if r == nil {
		if len(p.last) >= 256 {
			// River's messages are a fixed set; this bounds odd ones.
			clear(p.last)
		}
		r = &repeat{}
		p.last[msg] = r
	}
	held, r.at, r.held = r.held, now, 0
	return held, true
}

// perRequest reports whether msg is one of the warnings or errors the
// enricher and the proxy log about a single request, which an outage
// repeats for every request, or one the worker repeats every few seconds
// while a dependency is down.
func perRequest(msg string) bool {
	return slices.Contains(enricher.PerRequestFailures, msg) || slices.Contains(proxy.PerRequestFailures, msg) ||
		slices.Contains(worker.OutageRepeats, msg) || msg == app.MsgNATSRefused || msg == app.MsgNATSTLSRefused || msg == httperrlog.MsgAccept
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
// ("Error starting transaction: context canceled"), not a failure. River
// names the error "error" in some lines and "err" in others.
func cancelledByStop(r slog.Record) bool {
	cancelled := false
	r.Attrs(func(a slog.Attr) bool {
		if (a.Key == "error" || a.Key == "err") && strings.HasSuffix(a.Value.String(), context.Canceled.Error()) {
			cancelled = true
			return false
		}
		return true
	})
	return cancelled
}

func (h *riverQuiet) WithAttrs(attrs []slog.Attr) slog.Handler {
	river, ui := h.river, h.ui
	for _, a := range attrs {
		if a.Key == "component" {
			river = river || a.Value.String() == "river"
			ui = ui || a.Value.String() == "riverui"
		}
	}
	return &riverQuiet{Handler: h.Handler.WithAttrs(attrs), river: river, ui: ui, repeats: h.repeats}
}

func (h *riverQuiet) WithGroup(name string) slog.Handler {
	return &riverQuiet{Handler: h.Handler.WithGroup(name), river: h.river, ui: h.ui, repeats: h.repeats}
}
