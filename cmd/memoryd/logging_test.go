package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/internal/httperrlog"
)

// River's warnings and errors that repeat (every producer's fetch, every
// poll, while Postgres is down: 48 lines in 25 s), and its info line for
// each failed attempt, are let through once per
// repeatWindow, the next carrying how many were held back; memoryd's own
// lines and other River messages are not held back.
func TestRiverRepeatsAreHeldBack(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h := newRiverQuiet(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	clock := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	h.repeats.now = func() time.Time { return clock }
	river := slog.New(h).With("component", "river")
	ui := slog.New(h).With("component", "riverui")
	own := slog.New(h)
	fetch := errors.New("failed to connect to `host=127.0.0.1`: connection refused")
	for range 20 { // 10 s of 2 producers polling every second
		river.Error("producer: Error fetching jobs", "error", fetch)
		river.Error("producer: Error fetching jobs", "error", fetch)
		// Each attempt of each job failing past its waits for a model
		// server that is down (memoryd's own line for each is held back
		// as an outage line).
		river.Info("jobexecutor: Job errored; retrying", "job_id", 7, "error", "extract: model server unreachable")
		// River UI's query cache, every 10 s while Postgres is down
		// (an operator's walk: 6 ERROR lines in 50 s).
		ui.Error("querycacher.QueryCacher[riverui.stateCountSnapshot]: Error running query", "error", fetch)
		ui.Info("riverui: request", "path", "/api/jobs")
		own.Error("ingest: store unavailable", "error", fetch)
		// Two lines for each request an outage fails (before: all 40 out).
		own.Error("enrich store failed", "user_id", "alice", "error", fetch)
		own.Warn("enrich degraded", "user_id", "alice", "reason", "memory store unavailable")
		// The changes publisher listening again every few seconds.
		own.Warn("changes: listen", "error", fetch)
		// Each extraction job's first wait for a model server that is
		// down: with a model every turn is a job (178 in a minute's
		// outage of an operator's probe).
		own.Warn("model server unreachable; extraction waiting for it without spending attempts", "job_id", 1, "model_waits", 1)
		// net/http retrying an accept out of file descriptors (serve
		// under a limit of 64 in an operator's walk: 167 lines in 2 s).
		httperrlog.New(own).Print("http: Accept error: accept tcp 127.0.0.1:9090: accept4: too many open files; retrying in 5ms")
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
	if counts["producer: Error fetching jobs"] != 2 || counts["ingest: store unavailable"] != 20 || counts["elector: Error attempting to elect"] != 1 ||
		counts["enrich store failed"] != 1 || counts["enrich degraded"] != 1 || counts["changes: listen"] != 1 ||
		counts["model server unreachable; extraction waiting for it without spending attempts"] != 1 || counts[httperrlog.MsgAccept] != 1 ||
		counts["querycacher.QueryCacher[riverui.stateCountSnapshot]: Error running query"] != 1 || counts["riverui: request"] != 20 ||
		counts["jobexecutor: Job errored; retrying"] != 1 {
		t.Fatalf("lines logged: %v; want River's repeated error twice, memoryd's 20 times, the other River warning once, each per-request line once", counts)
	}
	if len(repeated) != 1 || repeated[0] != 39 {
		t.Fatalf(`"repeated" on the lines let through: %v; want the second to say 39 were held back`, repeated)
	}
}

// Text logs written to a file or a pipe (journald, a redirect) carry no
// colour codes and the whole time, date included; before, they were
// tint's terminal form: ANSI codes and the time of day alone.
func TestTextLogsToAFileArePlain(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	o := connOptions{logLevel: "info", logFormat: "text"}
	logger, err := o.logger(&cli{stdout: &out, stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	logger.Info("worker started", "workers", 4)
	line := out.String()
	if strings.Contains(line, "\x1b[") {
		t.Errorf("colour codes in a log written to a buffer: %q", line)
	}
	stamp, _, _ := strings.Cut(line, " ")
	if _, err := time.Parse(time.RFC3339Nano, stamp); err != nil {
		t.Errorf("the line starts with %q, not a whole RFC 3339 time: %q", stamp, line)
	}
	if !strings.Contains(line, "worker started") || !strings.Contains(line, "workers=4") {
		t.Errorf("line %q", line)
	}
}

// TestRiverCancelledByStopIsDebug: a River warning or error whose error is
// only its context cancelled (a service interrupted by shutdown) goes out
// at debug, whichever key River names the error with ("error" in some of
// its lines, "err" in others); a real error, and memoryd's own lines, stay.
func TestRiverCancelledByStopIsDebug(t *testing.T) {
	for _, tt := range []struct {
		name  string
		river bool
		key   string
		err   string
		level string
	}{
		{"river error key", true, "error", "Error starting transaction: context canceled", "DEBUG"},
		{"river err key", true, "err", "Error fetching initial queue settings: context canceled", "DEBUG"},
		{"river real error", true, "err", "dial tcp 127.0.0.1:5432: connect: connection refused", "ERROR"},
		{"memoryd's own", false, "error", "context canceled", "ERROR"},
	} {
		var out bytes.Buffer
		base := newRiverQuiet(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
		logger := slog.New(base)
		if tt.river {
			logger = logger.With("component", "river")
		}
		logger.Error("producer: Error fetching jobs", tt.key, tt.err)
		var line struct{ Level string }
		if err := json.Unmarshal(out.Bytes(), &line); err != nil || line.Level != tt.level {
			t.Errorf("%s: logged %q (%v), want level %s", tt.name, out.String(), err, tt.level)
		}
	}
}

// TestRiverCompleterGivingUpIsAWarning: River's batch completer giving up
// one try at writing finished jobs (it puts them back and writes them once
// Postgres answers) goes out as a warning, not an error; River's other
// errors, the same text from memoryd's own logger, and River's other
// "giving up" lines keep their level.
func TestRiverCompleterGivingUpIsAWarning(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		river bool
		msg   string
		level string
	}{
		{"river's completer", true, "jobcompleter.BatchCompleter: Too many errors; giving up", "WARN"},
		{"river's other error", true, "jobcompleter.BatchCompleter: Error completing batch", "ERROR"},
		{"river's inline completer", true, "jobcompleter.InlineCompleter: Too many errors; giving up", "ERROR"},
		{"memoryd's own", false, "jobcompleter.BatchCompleter: Too many errors; giving up", "ERROR"},
	} {
		var out bytes.Buffer
		logger := slog.New(newRiverQuiet(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo})))
		if tt.river {
			logger = logger.With("component", "river")
		}
		logger.Error(tt.msg)
		var line struct{ Level string }
		if err := json.Unmarshal(out.Bytes(), &line); err != nil || line.Level != tt.level {
			t.Errorf("%s: logged %q (%v), want level %s", tt.name, out.String(), err, tt.level)
		}
	}
}
