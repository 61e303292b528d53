package app

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/worker"
)

// TestIngestCheck: /readyz's ingest check says the ingest has failed every
// batch once that has lasted ingestUnready (a database that answers pings
// and takes no writes: a disk-full walk saw /readyz 200 throughout), not
// for a batch or a short outage.
func TestIngestCheck(t *testing.T) {
	now := time.Date(2026, 12, 4, 5, 0, 0, 0, time.UTC)
	full := &worker.Outage{Since: now.Add(-2 * time.Minute), Err: "insert turns: could not extend file (SQLSTATE 53100)"}
	for _, c := range []struct {
		name string
		f    *worker.Outage
		want string
	}{
		{"recording", nil, "ok"},
		{"a short outage", &worker.Outage{Since: now.Add(-ingestUnready + time.Second), Err: "lock timeout"}, "ok"},
		{"a long one", full, "cannot record turns for 2m0s (they wait in the stream): insert turns: could not extend file (SQLSTATE 53100)"},
	} {
		if got := ingestCheck(c.f, now); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestRefusalChecks: /readyz's model check says the model server refuses
// memoryd's key or model once that has lasted ingestUnready (a rotation
// walk revoked the key and /readyz said 200 throughout), not for a
// refusal that an answer followed or a short one; its embeddings check
// says the same of the embeddings server, naming --embed-api-key-file.
func TestRefusalChecks(t *testing.T) {
	now := time.Date(2026, 12, 4, 5, 0, 0, 0, time.UTC)
	for _, check := range []struct {
		name, err, long string
		f               func(*worker.Outage, time.Time) string
	}{
		{"model", "model: 401 Incorrect API key provided",
			"the model server refuses memoryd's API key or model for 3m0s (extraction waits; write the new key to --llm-api-key-file, or fix --llm-api-key, --llm-model or --llm-base-url and restart): model: 401 Incorrect API key provided",
			modelCheck},
		{"embeddings", "embed: 401 Incorrect API key provided",
			"the embeddings server refuses memoryd's API key or model for 3m0s (embed jobs wait, new items lexical-only; write the new key to --embed-api-key-file, or fix --embed-api-key, --embed-model, --embed-base-url or --embed-dimensions and restart): embed: 401 Incorrect API key provided",
			embedCheck},
	} {
		for _, c := range []struct {
			name string
			r    *worker.Outage
			want string
		}{
			{"answering", nil, "ok"},
			{"a short refusal", &worker.Outage{Since: now.Add(-time.Second), Err: "401"}, "ok"},
			{"a long one", &worker.Outage{Since: now.Add(-3 * time.Minute), Err: check.err}, check.long},
		} {
			if got := check.f(c.r, now); got != c.want {
				t.Errorf("%s check, %s: %q, want %q", check.name, c.name, got, c.want)
			}
		}
	}
}

// TestConsumerCheck: /readyz's consumer check does not fail a process
// whose consumer lookup timed out on a server that answers pings and
// answers info requests after every other API request (nats-server 2.11
// and later, busy with forgets' deletes: 30 s on 2.15.2), when the
// consumer was found within consumerBusyGrace; it fails every other
// error, a lookup timing out on an older server, and one on a server not
// answering pings. Before, /readyz answered 503 beside large forgets.
func TestConsumerCheck(t *testing.T) {
	now := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	recent, old := now.Add(-time.Minute), now.Add(-consumerBusyGrace-time.Second)
	timedOut := fmt.Errorf("nats: %w", context.DeadlineExceeded)
	for _, c := range []struct {
		name             string
		err              error
		pinged, deferred bool
		seen             time.Time
		want             string
	}{
		{"found", nil, true, true, time.Time{}, "ok"},
		{"busy 2.11+, found a minute ago", timedOut, true, true, recent, "ok"},
		{"busy 2.11+, nats.go's own timeout", nats.ErrTimeout, true, true, recent, "ok"},
		{"busy 2.11+, never found", timedOut, true, true, time.Time{}, timedOut.Error()},
		{"busy 2.11+, found long ago", timedOut, true, true, old, timedOut.Error()},
		{"timed out on 2.10", timedOut, true, false, recent, timedOut.Error()},
		{"timed out, no answer to pings", timedOut, false, true, recent, timedOut.Error()},
		{"not found", jetstream.ErrConsumerNotFound, true, true, recent, jetstream.ErrConsumerNotFound.Error()},
	} {
		if got := consumerCheck(c.err, c.pinged, c.deferred, c.seen, now); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
