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

// River's warnings and errors that repeat (every producer's fetch, every
// poll, while Postgres is down: 48 lines in 25 s) are let through once per
// repeatWindow, the next carrying how many were held back; memoryd's own
// lines and other River messages are not held back.
func TestRiverRepeatsAreHeldBack(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h := newRiverQuiet(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	clock := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	h.repeats.now = func() time.Time { return clock }
	river := slog.New(h).With("component", "river")
	own := slog.New(h)
	fetch := errors.New("failed to connect to `host=127.0.0.1`: connection refused")
	for range 20 { // 10 s of 2 producers polling every second
		river.Error("producer: Error fetching jobs", "error", fetch)
		river.Error("producer: Error fetching jobs", "error", fetch)
		own.Error("ingest: store unavailable", "error", fetch)
		clock = clock.Add(500 * time.Millisecond)
	}
	river.Warn("elector: Error attempting to elect", "error", fetch)
	clock = clock.Add(repeatWindow)
	river.Error("producer: Error fetching jobs", "error", fetch)

	counts := map[string]int{}
	var repeated []float64
	for line := range strings.Lines(buf.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		msg := rec["msg"].(string)
		counts[msg]++
		if n, ok := rec["repeated"].(float64); ok {
			repeated = append(repeated, n)
		}
	}
	if counts["producer: Error fetching jobs"] != 2 || counts["ingest: store unavailable"] != 20 || counts["elector: Error attempting to elect"] != 1 {
		t.Fatalf("lines logged: %v; want River's repeated error twice, memoryd's 20 times, the other River warning once", counts)
	}
	if len(repeated) != 1 || repeated[0] != 39 {
		t.Fatalf(`"repeated" on the lines let through: %v; want the second to say 39 were held back`, repeated)
	}
}
