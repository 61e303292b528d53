package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
)

// TestEnrichFactsFlag: `memoryd enrich` injects the core and relevant facts
// by default and every fact with --facts all; another value is refused by
// the service.
func TestEnrichFactsFlag(t *testing.T) {
	t.Parallel()
	_, prefix, st := startTestEnricher(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	if _, err := st.UpsertFacts(ctx, []store.FactWrite{
		{UserID: "alice", Key: "name", Value: "Alice", SourceAt: at},
		{UserID: "alice", Key: "dog_name", Value: "Rex", SourceAt: at.Add(time.Minute)},
		{UserID: "alice", Key: "car", Value: "Fiat", SourceAt: at.Add(2 * time.Minute)},
	}); err != nil {
		t.Fatal(err)
	}
	enrich := func(args ...string) (string, string, int) {
		full := append([]string{"enrich", "--user", "alice", "--nats-url", eventstest.URL(), "--prefix", prefix, "--log-format", "json"}, args...)
		return runArgs(ctx, full...)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"my dog?"}, "[facts: name=Alice, dog_name=Rex]\n"},
		{[]string{"--facts", "relevant", "my dog?"}, "[facts: name=Alice, dog_name=Rex]\n"},
		{[]string{"--facts", "all", "my dog?"}, "[facts: name=Alice, car=Fiat, dog_name=Rex]\n"}, // core first, then the most recent
	} {
		if out, errOut, code := enrich(tt.args...); code != 0 || out != tt.want {
			t.Errorf("%q: exit %d, stdout %q, want %q (stderr %q)", tt.args, code, out, tt.want, errOut)
		}
	}
	// The service refuses it as a bad request: a bad argument, exit 2.
	if _, errOut, code := enrich("--facts", "some", "my dog?"); code != 2 || !strings.Contains(errOut, "refused the request (400)") {
		t.Errorf("--facts some: exit %d, stderr %q; want 2 and the service's reason", code, errOut)
	}
}
