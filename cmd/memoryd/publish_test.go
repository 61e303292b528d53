package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/store/storetest"
)

// serveInProcess runs memoryd serve on a schema, prefix and stream of the
// test's own, with extra flags, until the test ends; it returns the flags
// that reach it (--nats-url, --prefix, --stream).
func serveInProcess(t *testing.T, extra ...string) []string {
	t.Helper()
	// A migrated schema of the pool: serve finds nothing to migrate, and
	// is stopped by the cleanup below.
	dbURL := storetest.Migrated(t)
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	var stdout, stderr eventstest.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &cli{stdout: &stdout, stderr: &stderr}, append([]string{"serve", "--database-url", dbURL, "--nats-url", eventstest.URL(),
			"--prefix", prefix, "--stream", stream, "--log-format", "json", "--workers", "1"}, extra...))
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	eventstest.Eventually(t, "serve to start", time.Minute, func() (bool, string) {
		return strings.Contains(stderr.String(), `"enrich service started"`), stderr.String()
	})
	return []string{"--nats-url", eventstest.URL(), "--prefix", prefix, "--stream", stream}
}

// publish --wait returns once memoryd has processed the turn, so that the
// README's enrich right after it finds it (before, it did only when go
// run's start-up delay gave extraction the time).
func TestPublishWaitsUntilProcessed(t *testing.T) {
	t.Parallel()
	conn := serveInProcess(t)
	for i := range 3 {
		user := "alice" + strings.Repeat("x", i)
		_, errOut, code := runArgs(context.Background(), append([]string{"publish", "--user", user, "--message", "I live in Lisbon", "--response", "Nice!", "--wait", "1m"}, conn...)...)
		if code != 0 || !strings.Contains(errOut, "processed: 1 turn(s) of 1 user(s)") {
			t.Fatalf("publish --wait: exit %d, stderr %q", code, errOut)
		}
		out, errOut, code := runArgs(context.Background(), append([]string{"enrich", "--user", user, "where do I live?"}, conn...)...)
		if code != 0 || !strings.Contains(out, "location=Lisbon") {
			t.Fatalf("enrich right after publish --wait: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	}
	// Without a memoryd answering, --wait says what it needs, and that the
	// turn was not published (before, it left that to guess).
	_, errOut, code := runArgs(context.Background(), "publish", "--user", "bob", "--message", "hi", "--wait", "1m",
		"--nats-url", eventstest.URL(), "--prefix", conn[3]+"none", "--stream", conn[5]+"_NONE")
	if code != 1 || !strings.Contains(errOut, "of user bob not published: --wait reads the user's stats from a running memoryd serve (not --role ingest): start one, or publish without --wait") {
		t.Fatalf("publish --wait without a memoryd: exit %d, stderr %q", code, errOut)
	}
}

// publish --wait says what became of turns that did not end processed: a
// turn whose extraction failed is not counted "processed", and a turn
// recorded but still waiting for the model is not blamed on a wrong
// --prefix, a rejection or the duplicate window (before, both; found by a
// walk with a model server answering 400, and one rate limiting).
func TestPublishWaitTellsFailedAndWaitingTurns(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		status int
		wait   string // the refused turn ends the wait when it fails; the other waits it out
		want   []string
		not    string
	}{
		{"refused", http.StatusBadRequest, "1m", []string{"settled: 1 turn(s) of 1 user(s), 1 of them failed extraction", "1 turn(s) failed extraction: memoryd failed lists them"}, "processed:"},
		{"down", http.StatusServiceUnavailable, "15s", []string{"memoryd recorded alice's 1 new turn(s), but 1 of the user's turns were still waiting for extraction"}, "it is not running with this --prefix"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			llm := extractortest.NewServer(t)
			llm.SetHandler(func(openai.ChatCompletionRequest) extractortest.Reply {
				return extractortest.Error(tt.status, "the test's model")
			})
			conn := serveInProcess(t, "--llm-base-url", llm.URL(), "--llm-model", "m")
			_, errOut, code := runArgs(context.Background(), append([]string{"publish", "--user", "alice", "--message", "I live in Lisbon", "--wait", tt.wait}, conn...)...)
			for _, w := range tt.want {
				if code != 1 || !strings.Contains(errOut, w) || strings.Contains(errOut, tt.not) {
					t.Fatalf("publish --wait, model answering %d: exit %d, stderr %q; want exit 1 and %q, no %q", tt.status, code, errOut, w, tt.not)
				}
			}
		})
	}
}

// publish from stdin refuses an event naming a field twice in another
// case, as memoryd does (docs/protocol.md, "Publishing turns"), rather than
// publishing the last of the two: {"Memory":false,"memory":true} went out
// as a turn to remember, where memoryd, given the event as written, would
// have dead-lettered and erased it as opted out (found by a newcomer's
// walk). It stops there, the turns before it published.
func TestPublishFromStdinRefusesFieldGivenTwice(t *testing.T) {
	t.Parallel()
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	in := `{"id":"a","user_id":"alice","user_message":"I live in Lisbon","timestamp":"2026-11-21T10:00:00Z"}
{"id":"b","user_id":"alice","user_message":"my diary","timestamp":"2026-11-21T10:01:00Z","Memory":false,"memory":true}
{"id":"c","user_id":"alice","user_message":"I work as a nurse","timestamp":"2026-11-21T10:02:00Z"}`
	var out, errOut bytes.Buffer
	code := run(context.Background(), &cli{stdin: strings.NewReader(in), stdout: &out, stderr: &errOut},
		[]string{"publish", "--nats-url", eventstest.URL(), "--prefix", prefix, "--stream", stream})
	if code != 1 || !strings.Contains(errOut.String(), `stdin turn 2: invalid turn event: memory: is given twice (as "Memory" and "memory")`) {
		t.Fatalf("publish of an event naming memory twice: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 || !strings.HasPrefix(out.String(), "a seq=") || strings.Contains(out.String(), "b seq=") {
		t.Fatalf("stream holds %d events after the refusal, want the first alone; stdout %q", info.State.Msgs, out.String())
	}
}
