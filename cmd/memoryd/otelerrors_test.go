package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The SDK's trace export errors reach the JSON log as warn records, not
// plain-text lines of the log package, and a collector that is down logs
// one record a minute, not one a batch. Found by an outside-in audit:
// "2026/12/01 11:26:47 traces export: ... connection refused" every 5 s
// among serve's JSON lines.
func TestOTelErrorsLoggedAsJSONAndBounded(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	l := &otelErrorLogger{logger: slog.New(slog.NewJSONHandler(&buf, nil)), now: func() time.Time { return now }}
	for i := 0; i < 12; i++ { // a minute of batches every 5 s
		l.Handle(errors.New("traces export: connection refused"))
		now = now.Add(5 * time.Second)
	}
	l.Handle(errors.New("traces export: connection refused"))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d records for 13 errors over a minute, want 2:\n%s", len(lines), buf.String())
	}
	for i, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("record %d is not JSON: %q", i, line)
		}
		if rec["level"] != "WARN" || !strings.Contains(rec["error"].(string), "connection refused") {
			t.Errorf("record %d: %v", i, rec)
		}
	}
	var second map[string]any
	_ = json.Unmarshal([]byte(lines[1]), &second)
	if second["errors_not_logged"] != float64(11) {
		t.Errorf("second record counts %v errors left out, want 11", second["errors_not_logged"])
	}
}
