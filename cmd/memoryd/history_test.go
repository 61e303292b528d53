package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
)

// TestFactsHistoryCommand: `memoryd facts history` against a running
// service prints one fact's changes newest first with their sources, pages
// with --max-results and --before, and --json prints the reply.
func TestFactsHistoryCommand(t *testing.T) {
	t.Parallel()
	_, prefix, st := startTestEnricher(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	for i, city := range []string{"Paris", "Rome"} {
		if _, err := st.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: "city", Value: city,
			SourceAt: at.Add(time.Duration(i) * time.Hour), EventID: fmt.Sprint("ev-", i), ConversationID: "conv-1"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.DeleteFact(ctx, "alice", "city"); err != nil {
		t.Fatal(err)
	}
	history := func(args ...string) (string, string) {
		t.Helper()
		full := append([]string{"facts", "history", "--user", "alice", "--nats-url", eventstest.URL(), "--prefix", prefix, "--log-format", "json"}, args...)
		out, errOut, code := runArgs(ctx, full...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		return out, errOut
	}

	out, errOut := history("city")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(errOut, "3 change(s)") || strings.Contains(errOut, "--before") {
		t.Fatalf("history:\n%s\nstderr %q", out, errOut)
	}
	for i, want := range [][]string{
		{"clear", "Rome -> (cleared)"},
		{"set", "Paris -> Rome", "turn ev-1, conversation conv-1, stated " + at.Add(time.Hour).Local().Format("2006-01-02 15:04:05 MST")},
		{"set", "Paris", "turn ev-0, conversation conv-1, stated " + at.Local().Format("2006-01-02 15:04:05 MST")},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i, lines[i], w)
			}
		}
	}

	// Paging: one change a page; stderr names the next --before.
	out, errOut = history("city", "--max-results", "1")
	if strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(out, "clear") {
		t.Fatalf("first page:\n%s", out)
	}
	_, next, ok := strings.Cut(errOut, "older changes: add --before ")
	if !ok {
		t.Fatalf("first page's stderr %q names no --before", errOut)
	}
	out, _ = history("city", "--max-results", "1", "--before", strings.TrimSpace(next))
	if !strings.Contains(out, "Paris -> Rome") {
		t.Fatalf("second page:\n%s", out)
	}

	out, _ = history("--json", "city")
	var reply events.FactHistoryReply
	if err := json.Unmarshal([]byte(out), &reply); err != nil || reply.Key != "city" || len(reply.Changes) != 3 ||
		reply.Changes[2].EventID != "ev-0" || !reply.Changes[2].SourceAt.Equal(at) {
		t.Fatalf("--json: %s (%v)", out, err)
	}

	// A bad page size is the service's 400, said once: a bad argument.
	_, errOut, code := runArgs(ctx, "facts", "history", "--user", "alice", "--nats-url", eventstest.URL(), "--prefix", prefix,
		"--log-format", "json", "--max-results", "0", "city")
	if code != 2 || strings.Count(errOut, "max_results 0 is not in 1..100") != 1 {
		t.Fatalf("--max-results 0: exit %d, %q", code, errOut)
	}
}

// TestFactsSetNamesTheCanonicalKey: `memoryd facts set pet Rex` stores the
// value under the canonical key "pets" and says so; it printed "set pet",
// so the key the user then read back was not the one it named.
func TestFactsSetNamesTheCanonicalKey(t *testing.T) {
	t.Parallel()
	_, prefix, _ := startTestEnricher(t)
	ctx := context.Background()
	for _, c := range []struct{ key, want string }{
		{"pet", "set pets (pet is an alias of it)\n"},
		{"city", "set city\n"},
	} {
		out, errOut, code := runArgs(ctx, "facts", "set", "--user", "alice", c.key, "Rex", "--nats-url", eventstest.URL(), "--prefix", prefix, "--log-format", "json")
		if code != 0 || out != c.want {
			t.Errorf("facts set %s: exit %d, stdout %q (want %q), stderr %q", c.key, code, out, c.want, errOut)
		}
	}
}

// TestFactsListShowsWhenStated: `memoryd facts list` prints each fact with
// the time its value was stated (source_at, by which the list is ordered),
// not when memoryd wrote it: it printed updated_at, so after a replay every
// fact showed the replay's time, and a late extraction of an old turn
// showed today beside facts stated later.
func TestFactsListShowsWhenStated(t *testing.T) {
	t.Parallel()
	_, prefix, st := startTestEnricher(t)
	ctx := context.Background()
	stated := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	if _, err := st.UpsertFacts(ctx, []store.FactWrite{
		{UserID: "alice", Key: "location", Value: "Lisbon", SourceAt: stated, EventID: "ev-1", ConversationID: "conv-1"},
		{UserID: "alice", Key: "occupation", Value: "nurse", SourceAt: stated.Add(-time.Hour), EventID: "ev-0", ConversationID: "conv-1"},
	}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runArgs(ctx, "facts", "list", "--user", "alice", "--nats-url", eventstest.URL(), "--prefix", prefix, "--log-format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("facts list:\n%s", out)
	}
	for i, want := range []struct {
		key string
		at  time.Time
	}{{"location", stated}, {"occupation", stated.Add(-time.Hour)}} {
		if !strings.HasPrefix(lines[i], want.key) || !strings.Contains(lines[i], "stated "+shownTime(want.at)) {
			t.Errorf("line %d %q: want %s stated %s", i, lines[i], want.key, shownTime(want.at))
		}
	}
}
