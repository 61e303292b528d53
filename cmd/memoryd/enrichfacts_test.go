package main

import (
	"context"
	"os"
	"path/filepath"
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

// TestEnrichCollectionsFlag: `memoryd enrich --collections` names the
// document collections searched; without it the user's defaults are; with
// "" none are, whatever the defaults.
func TestEnrichCollectionsFlag(t *testing.T) {
	t.Parallel()
	_, prefix, _ := startTestEnricher(t)
	ctx := context.Background()
	conn := []string{"--user", "alice", "--nats-url", eventstest.URL(), "--prefix", prefix, "--log-format", "json"}
	dir := t.TempDir()
	for name, text := range map[string]string{"boat": "# Boat\n\nThe boat's engine is a Volvo Penta D2-40.\n", "garden": "# Garden\n\nThe garden's engine is a Honda mower.\n"} {
		file := filepath.Join(dir, name+".md")
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, errOut, code := runArgs(ctx, append([]string{"docs", "put", "--collection", name, file}, conn...)...); code != 0 {
			t.Fatalf("docs put %s: exit %d, stdout %q, stderr %q", name, code, out, errOut)
		}
	}
	if out, errOut, code := runArgs(ctx, append([]string{"docs", "defaults", "garden"}, conn...)...); code != 0 {
		t.Fatalf("docs defaults garden: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, tt := range []struct {
		args       []string
		want, dont string
	}{
		{nil, "Honda", "Volvo"},                                     // the defaults
		{[]string{"--collections", "boat"}, "Volvo", "Honda"},       // named
		{[]string{"--collections", "boat,garden"}, "Volvo", ""},     // both
		{[]string{"--collections", ""}, "", "engine"},               // none
		{[]string{"--collections", " garden , "}, "Honda", "Volvo"}, // spaces and an empty name ignored
	} {
		args := append(append(append([]string{"enrich"}, tt.args...), conn...), "what engine does it have?")
		out, errOut, code := runArgs(ctx, args...)
		if code != 0 || !strings.Contains(out, tt.want) || tt.dont != "" && strings.Contains(out, tt.dont) {
			t.Errorf("enrich %q: exit %d, stdout %q (stderr %q); want it to hold %q and not %q", tt.args, code, out, errOut, tt.want, tt.dont)
		}
	}
	if _, errOut, code := runArgs(ctx, append(append([]string{"enrich", "--collections", "nosuch"}, conn...), "engine?")...); code != 2 || !strings.Contains(errOut, "nosuch") {
		t.Errorf("enrich --collections nosuch: exit %d, stderr %q; want 2 naming the collection", code, errOut)
	}
}

// TestEnrichCollectionsOfNoName: `memoryd enrich --collections " , "`
// names no collection once trimmed: a bad argument (exit 2, naming the
// flag), not a search of none (exit 0: a list of typos silently left the
// documents out). --collections "" still searches none.
func TestEnrichCollectionsOfNoName(t *testing.T) {
	t.Parallel()
	_, prefix, _ := startTestEnricher(t)
	conn := []string{"--user", "alice", "--nats-url", eventstest.URL(), "--prefix", prefix, "--log-format", "json"}
	for _, bad := range []string{" , ", " ", ","} {
		if out, errOut, code := runArgs(context.Background(), append([]string{"enrich", "--collections", bad, "my dog?"}, conn...)...); code != 2 || !strings.Contains(errOut, "--collections") {
			t.Errorf("enrich --collections %q: exit %d, stdout %q, stderr %q; want exit 2 naming --collections", bad, code, out, errOut)
		}
	}
	if _, errOut, code := runArgs(context.Background(), append([]string{"enrich", "--collections", "", "my dog?"}, conn...)...); code != 0 {
		t.Errorf(`enrich --collections "": exit %d, stderr %q; want 0 (no collection searched)`, code, errOut)
	}
}
