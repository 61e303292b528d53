package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
)

// TestMemoryItemCommands runs `memoryd memory list|get|update|delete`
// against a running service: list pages with --limit and continues with
// the --after it prints (or walks every page with --all), get prints the
// item, update changes only the field given (an explicit empty --answer
// included), delete removes it, and a missing id is reported.
func TestMemoryItemCommands(t *testing.T) {
	t.Parallel()
	_, prefix, st := startTestEnricher(t)
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	var writes []store.ContextWrite
	for i := range 3 {
		writes = append(writes, store.ContextWrite{UserID: "alice", Question: fmt.Sprintf("q%d", i), Answer: fmt.Sprintf("a%d", i), CreatedAt: t0.Add(time.Duration(i) * time.Minute)})
	}
	ids, err := st.InsertContext(context.Background(), writes)
	if err != nil {
		t.Fatal(err)
	}
	memory := func(args ...string) (string, string, int) {
		t.Helper()
		return runArgs(context.Background(), append(append([]string{"memory"}, args...),
			"--user", "alice", "--nats-url", eventstest.URL(), "--prefix", prefix, "--log-format", "json")...)
	}

	out, errOut, code := memory("list", "--limit", "2")
	if code != 0 || !strings.Contains(out, "Q: q2") || !strings.Contains(out, "Q: q1") || strings.Contains(out, "Q: q0") {
		t.Fatalf("list --limit 2: exit %d\n%s%s", code, out, errOut)
	}
	m := regexp.MustCompile(`--after (\S+)`).FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("list --limit 2 does not say how to continue: %q", errOut)
	}
	out, errOut, code = memory("list", "--limit", "2", "--after", m[1])
	if code != 0 || !strings.Contains(out, "Q: q0") || strings.Contains(out, "Q: q1") || strings.Contains(errOut, "--after") {
		t.Fatalf("list --after %s: exit %d\n%s%s", m[1], code, out, errOut)
	}
	out, _, code = memory("list", "--limit", "1", "--all", "--json")
	var page events.ContextListReply
	if err := json.Unmarshal([]byte(out), &page); code != 0 || err != nil || len(page.Items) != 3 || page.Next != nil {
		t.Fatalf("list --all --json: exit %d, %v\n%s", code, err, out)
	}

	id := fmt.Sprint(ids[1])
	if out, errOut, code = memory("get", "--id", id); code != 0 || !strings.Contains(out, "Q: q1\n  A: a1") {
		t.Fatalf("get: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code = memory("update", "--id", id, "--answer", ""); code != 0 || out != "updated id "+id+"\n" {
		t.Fatalf("update --answer '': exit %d\n%s%s", code, out, errOut)
	}
	if it, err := st.ContextByID(context.Background(), "alice", ids[1]); err != nil || it.Question != "q1" || it.Answer != "" {
		t.Fatalf("after update --answer '': %+v, %v", it, err)
	}
	if _, errOut, code = memory("update", "--id", id, "--question", "q2", "--answer", "a2"); code != 1 || !strings.Contains(errOut, "already holds") {
		t.Errorf("update onto another item's pair: exit %d, %q", code, errOut)
	}
	if out, errOut, code = memory("delete", "--id", id); code != 0 || out != "deleted 1\n" {
		t.Fatalf("delete: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code = memory("get", "--id", id); code != 1 || !strings.Contains(errOut, "no context item "+id) {
		t.Errorf("get of a deleted item: exit %d, %q", code, errOut)
	}
	if _, errOut, code = memory("get"); code != 2 || !strings.Contains(errOut, "--id") {
		t.Errorf("get without --id: exit %d, %q", code, errOut)
	}
}

// TestMemorySearchInARangeAndScope: `memory search --since/--until/--scope`
// sends the range and scope the search endpoint takes (a newcomer found
// them reachable only by a raw NATS request), and a malformed time is a
// usage error before any request.
func TestMemorySearchInARangeAndScope(t *testing.T) {
	t.Parallel()
	_, prefix, st := startTestEnricher(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	if _, err := st.InsertTurns(ctx, []store.Turn{
		{EventID: "w1", UserID: "alice", UserMessage: "x", TurnAt: t0, Scope: "work"},
		{EventID: "h1", UserID: "alice", UserMessage: "x", TurnAt: t0, Scope: "home"},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.InsertContext(ctx, []store.ContextWrite{
		{UserID: "alice", Question: "Which dog walker?", Answer: "Ana, on Mondays.", CreatedAt: t0, EventID: "w1"},
		{UserID: "alice", Question: "Which dog food?", Answer: "The salmon one.", CreatedAt: t0.AddDate(0, 0, 7), EventID: "h1"},
		{UserID: "alice", Question: "Which dog bed?", Answer: "The round grey one.", CreatedAt: t0.AddDate(0, 0, 14)},
	}); err != nil {
		t.Fatal(err)
	}
	search := func(args ...string) (string, string, int) {
		t.Helper()
		return runArgs(ctx, append(append([]string{"memory", "search", "dog"}, args...),
			"--user", "alice", "--nats-url", eventstest.URL(), "--prefix", prefix, "--log-format", "json")...)
	}
	for _, c := range []struct {
		args                 []string
		walker, dogFood, bed bool // work scope, home scope, no scope
	}{
		{nil, true, true, true},
		{[]string{"--since", "2026-11-05T00:00:00Z"}, false, true, true},
		{[]string{"--until", "2026-11-05T00:00:00Z"}, true, false, false},
		{[]string{"--since", "2026-11-01T10:00:00Z", "--until", "2026-11-01T10:00:01Z"}, true, false, false},
		{[]string{"--scope", "work"}, true, false, false},
		{[]string{"--scope", "home", "--until", "2026-11-05T00:00:00Z"}, false, false, false},
	} {
		out, errOut, code := search(c.args...)
		if code != 0 || strings.Contains(out, "Ana, on Mondays") != c.walker || strings.Contains(out, "The salmon one") != c.dogFood ||
			strings.Contains(out, "The round grey one") != c.bed {
			t.Errorf("memory search dog %v: exit %d\n%s%s\nwant the walker %v, the dog food %v, the bed %v", c.args, code, out, errOut, c.walker, c.dogFood, c.bed)
		}
	}
	if _, errOut, code := search("--since", "last week"); code != 2 || !strings.Contains(errOut, `--since "last week" is not RFC 3339`) {
		t.Errorf("--since 'last week': exit %d, %q", code, errOut)
	}
	if _, errOut, code := runArgs(ctx, "memory", "list", "--user", "alice", "--since", "2026-11-05T00:00:00Z"); code != 2 || !strings.Contains(errOut, "are for memory search") {
		t.Errorf("memory list --since: exit %d, %q", code, errOut)
	}
}
