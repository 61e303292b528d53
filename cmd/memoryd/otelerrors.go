package main

import (
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
)

// otelErrorEvery is the shortest time between two logged errors of the
// OpenTelemetry SDK (a trace export failed): a collector that is down
// fails every batch, every 5 s.
const otelErrorEvery = time.Minute

// otelErrorLogger logs the OpenTelemetry SDK's errors through memoryd's
// logger, at warn, at most one every otelErrorEvery with the number left
// out before it. Without it the SDK writes them with the standard library's
// log package: plain-text lines among JSON ones, which a log pipeline
// parsing JSON drops or misreads.
type otelErrorLogger struct {
	logger  *slog.Logger
	now     func() time.Time
	mu      sync.Mutex
	last    time.Time
	skipped int
}

func (l *otelErrorLogger) Handle(err error) {
	l.mu.Lock()
	now := l.now()
	if !l.last.IsZero() && now.Sub(l.last) < otelErrorEvery {
		l.skipped++
		l.mu.Unlock()
		return
	}
	skipped := l.skipped
	l.last, l.skipped = now, 0
	l.mu.Unlock()
	l.logger.Warn("trace export failed; spans are lost until the OTLP endpoint answers (requests are not affected)",
		"error", err, "errors_not_logged", skipped, "every", otelErrorEvery.String())
}

// routeOTelErrors installs otelErrorLogger as the process's OpenTelemetry
// error handler; only the binary does, and only with tracing on.
func routeOTelErrors(logger *slog.Logger, endpoint string) {
	if endpoint == "" {
		return
	}
	otel.SetErrorHandler(&otelErrorLogger{logger: logger, now: time.Now})
}
