package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestEmbedCommandRefusesBeforeConnecting: embed needs --backfill and an
// endpoint; both are usage errors (exit 2) before anything connects.
func TestEmbedCommandRefusesBeforeConnecting(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--embed-base-url", "http://127.0.0.1:1/v1"}, "--backfill"},
		{[]string{"--backfill"}, "--embed-base-url is required"},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"embed", "--database-url", "postgres://postgres@127.0.0.1:1/none?connect_timeout=1", "--nats-url", "nats://127.0.0.1:1"}, tt.args...)
		code := run(context.Background(), &cli{stdout: &out, stderr: &errOut}, args)
		if code != 2 || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("embed %v: exit %d, stderr %q; want exit 2 saying %q", tt.args, code, errOut.String(), tt.want)
		}
	}
}

// TestEmbedBackfillCommand: items stored before embedding was on get
// vectors of the model named on the command line, and the command says so.
func TestEmbedBackfillCommand(t *testing.T) {
	t.Parallel()
	_, dbURL := storetest.Schema(t)
	s := storetest.Open(t, dbURL)
	if _, err := s.InsertContext(context.Background(), []store.ContextWrite{
		{UserID: "alice", Question: "my canine companion", Answer: "Rex"},
		{UserID: "alice", Question: "home town", Answer: "Paris"},
		{UserID: "bob", Question: "tea or coffee", Answer: "tea"}}); err != nil {
		t.Fatal(err)
	}
	srv := embeddingtest.New(t)
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	out, errOut, code := runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--user", "alice", "--embed-base-url", srv.URL, "--embed-model", "m1")
	if code != 0 {
		t.Fatalf("embed exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"2 items without a m1 vector enqueued", "embedding done"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for user, want := range map[string]store.EmbeddingCount{"alice": {Items: 2, Embedded: 2}, "bob": {Items: 1}} {
		if n, err := s.CountEmbeddings(context.Background(), user, "m1"); err != nil || n != want {
			t.Errorf("%s: %+v (%v), want %+v", user, n, err, want)
		}
	}
}

// A backfill whose server refuses a text ends, saying how many items are
// left without a vector, rather than wait for them forever (a race hunt's
// backfill was still waiting after 90 s, then said the rest would be
// embedded by a running serve: its job had been cancelled for good).
func TestEmbedBackfillEndsWhenTheServerRefusesAText(t *testing.T) {
	t.Parallel()
	_, dbURL := storetest.Schema(t)
	s := storetest.Open(t, dbURL)
	if _, err := s.InsertContext(context.Background(), []store.ContextWrite{
		{UserID: "alice", Question: "my canine companion", Answer: "Rex"},
		{UserID: "alice", Question: "a pasted log", Answer: "POISON"},
		{UserID: "alice", Question: "home town", Answer: "Paris"}}); err != nil {
		t.Fatal(err)
	}
	srv := embeddingtest.New(t)
	srv.RefuseContaining("POISON")
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	out, errOut, code := runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--user", "alice", "--embed-base-url", srv.URL, "--embed-model", "m1")
	if code != 1 || !strings.Contains(errOut, "1 context items and 0 document chunks have no m1 vector and no embed job is left") {
		t.Fatalf("embed exited %d\nstdout:\n%s\nstderr:\n%s\nwant exit 1 naming the item left without a vector", code, out, errOut)
	}
	if n, err := s.CountEmbeddings(context.Background(), "alice", "m1"); err != nil || n != (store.EmbeddingCount{Items: 3, Embedded: 2}) {
		t.Errorf("alice: %+v (%v), want 2 of 3 embedded", n, err)
	}
}
