package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/store/storetest"
)

// startAuthNATS runs a private nats-server (own port, own store dir) with a
// memoryd user allowed everything and a frontend user allowed only alice's
// enrich and turn subjects (and its own reply inboxes).
func startAuthNATS(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	return privateNATS(t, func(port int) []string {
		conf := fmt.Sprintf(`listen: "127.0.0.1:%d"
jetstream { store_dir: %q }
accounts {
  APP {
    jetstream: enabled
    users = [
      { user: memoryd, password: "memoryd-secret" }
      { user: alice_frontend, password: "alice-secret",
        permissions: {
          publish: { allow: ["memory.enrich.alice", "memory.turns.alice"] }
          subscribe: { allow: ["_INBOX.>"] }
        } }
    ]
  }
}
`, port, filepath.Join(dir, "js"))
		path := filepath.Join(dir, "nats.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{"-c", path}
	})
}

// TestFrontendPermissionsConfineItToItsUser runs memoryd (user/password
// auth) on a server where a frontend may only publish alice's turns and
// request alice's enrich: it gets alice's memory and cannot read bob's or
// write turns as bob.
func TestFrontendPermissionsConfineItToItsUser(t *testing.T) {
	t.Parallel()
	url := startAuthNATS(t)
	_, dbURL := storetest.Schema(t)
	o := &serveOptions{
		conn: connOptions{natsURL: url, natsUser: "memoryd", natsPassword: "memoryd-secret", databaseURL: dbURL,
			prefix: events.DefaultPrefix, stream: events.DefaultStream},
		workers: 2, batchSize: 50, maxAttempts: 3, jobTimeout: time.Minute, ackWait: 30 * time.Second,
		shutdownTimeout: 10 * time.Second, enrichTimeout: time.Second,
	}
	svc, err := startService(context.Background(), o, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.stop(context.Background()) })
	ts := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	publishAndWait(t, svc, o, "alice", events.Turn{ID: "a1", UserID: "alice", UserMessage: "My favorite color is teal.", AssistantResponse: "ok", Timestamp: ts})
	publishAndWait(t, svc, o, "bob", events.Turn{ID: "b1", UserID: "bob", UserMessage: "My favorite color is crimson.", AssistantResponse: "ok", Timestamp: ts})

	fe, err := nats.Connect(url, nats.UserInfo("alice_frontend", "alice-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer fe.Close()
	ctx := context.Background()
	client := enricher.NewClient(fe, events.DefaultPrefix)
	reply, err := client.Enrich(ctx, enricher.EnrichRequest{UserID: "alice", Message: "what is my favorite color"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(reply.Injection, "teal") || strings.Contains(reply.Injection, "crimson") {
		t.Fatalf("alice's enrich = %q", reply.Injection)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if r, err := client.Enrich(short, enricher.EnrichRequest{UserID: "bob", Message: "what is my favorite color"}); err == nil {
		t.Fatalf("the frontend read bob's memory: %+v", r)
	}
	js, err := jetstream.New(fe)
	if err != nil {
		t.Fatal(err)
	}
	pub := events.NewPublisher(js, events.DefaultPrefix)
	aliceCtx, cancelAlice := context.WithTimeout(ctx, 5*time.Second)
	defer cancelAlice()
	if _, err := pub.Publish(aliceCtx, events.Turn{ID: "a2", UserID: "alice", UserMessage: "I live in Oslo", Timestamp: ts.Add(time.Minute)}); err != nil {
		t.Fatalf("alice's frontend cannot publish alice's turn: %v", err)
	}
	bobCtx, cancelBob := context.WithTimeout(ctx, 2*time.Second)
	defer cancelBob()
	if _, err := pub.Publish(bobCtx, events.Turn{ID: "b2", UserID: "bob", UserMessage: "I live in Rome", Timestamp: ts.Add(time.Minute)}); err == nil {
		t.Fatal("alice's frontend wrote a turn as bob")
	}
	// Even a payload naming bob on alice's subject is refused by memoryd.
	msg, err := fe.Request("memory.enrich.alice", []byte(`{"user_id":"bob","message":"color"}`), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get("Nats-Service-Error-Code") != "400" {
		t.Fatalf("bob's user_id on alice's subject answered %q", msg.Data)
	}
	if st, err := svc.store.Stats(ctx, "bob"); err != nil || st.TurnsReceived != 1 {
		t.Fatalf("bob stats = %+v, %v", st, err)
	}
}

// TestIsolationUnderRandomInterleavedWrites: many users, random interleaved
// turns and tool writes (store, set, clear, forget); afterwards every read
// endpoint returns, for every user, only that user's data.
func TestIsolationUnderRandomInterleavedWrites(t *testing.T) {
	t.Parallel()
	svc, o := startTestService(t, nil)
	ctx := context.Background()
	client := enricher.NewClient(svc.nc, o.conn.prefix)
	js, err := jetstream.New(svc.nc)
	if err != nil {
		t.Fatal(err)
	}
	pub := events.NewPublisher(js, o.conn.prefix)
	users := []string{"u0", "u1", "u2", "user.with.dots", "user with spaces", "ünïcode", "*", ">", strings.Repeat("x", 200)}
	rng := rand.New(rand.NewPCG(1, 2))
	forgotten := map[string]bool{}
	turns := map[string]int{}
	// Every memory carries its owner's marker so leaks are detectable.
	marker := func(u string) string { return fmt.Sprintf("owner%x", sha256.Sum256([]byte(u)))[:17] }
	for i := range 300 {
		u := users[rng.IntN(len(users))]
		m := marker(u)
		switch op := rng.IntN(10); {
		case op < 5:
			_, err = pub.Publish(ctx, events.Turn{ID: fmt.Sprintf("e%d", i), UserID: u, UserMessage: "note " + m + fmt.Sprint(i),
				AssistantResponse: "ok " + m, Timestamp: time.Now()})
			turns[u]++
		case op < 7:
			_, err = client.Store(ctx, enricher.StoreRequest{UserID: u, Question: "q " + m + fmt.Sprint(i), Answer: "a " + m})
		case op < 9:
			_, err = client.SetFact(ctx, u, fmt.Sprintf("k%d", i%5), m)
		default:
			if i%3 == 0 {
				_, err = client.Forget(ctx, u)
				forgotten[u] = true
				turns[u] = 0
			} else {
				_, err = client.Clear(ctx, enricher.ClearRequest{UserID: u, Question: "q " + m + fmt.Sprint(i-1)})
			}
		}
		if err != nil {
			t.Fatalf("op %d for %q: %v", i, u, err)
		}
	}
	// Wait until no turn is pending anywhere.
	deadline := time.Now().Add(time.Minute)
	for tick := time.NewTicker(20 * time.Millisecond); ; <-tick.C {
		st, err := svc.store.Stats(ctx, "")
		if err == nil && st.TurnsPending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("turns still pending: %+v %v", st, err)
		}
	}
	for _, u := range users {
		own := marker(u)
		check := func(what, text string) {
			t.Helper()
			for _, other := range users {
				if other != u && strings.Contains(text, marker(other)) {
					t.Fatalf("%s of %q shows %q's data: %s", what, u, other, text)
				}
			}
		}
		reply, err := client.Enrich(ctx, enricher.EnrichRequest{UserID: u, Message: "note q a " + own, Threshold: new(0.0), MaxResults: new(50)})
		if err != nil {
			t.Fatal(err)
		}
		check("enrich", fmt.Sprint(reply))
		res, err := client.Search(ctx, enricher.SearchRequest{UserID: u, Query: "note q " + own, MaxResults: new(50)})
		if err != nil {
			t.Fatal(err)
		}
		check("search", fmt.Sprint(res))
		facts, err := client.ListFacts(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		check("facts.list", fmt.Sprint(facts))
		st, err := client.Stats(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if !forgotten[u] && st.TurnsReceived != int64(turns[u]) {
			t.Errorf("stats of %q count %d turns, published %d", u, st.TurnsReceived, turns[u])
		}
	}
}

// TestInfoLogsCarryNoBodiesOrSecrets runs the pipeline, enrich, a rejected
// event and a failing LLM at info level and checks that the logs contain no
// message text and no password.
func TestInfoLogsCarryNoBodiesOrSecrets(t *testing.T) {
	t.Parallel()
	var logs relBuf
	_, dbURL := storetest.Schema(t)
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	llm := extractortest.NewServer(t, extractortest.Reply{Status: 500, Body: `{"error":{"message":"down"}}`})
	o := &serveOptions{
		conn:    connOptions{natsURL: eventstest.URL(), databaseURL: strings.Replace(dbURL, "postgres@", "postgres:hunter2-secret@", 1), prefix: prefix, stream: stream},
		workers: 2, batchSize: 50, maxAttempts: 1, jobTimeout: time.Minute, ackWait: 30 * time.Second,
		shutdownTimeout: 10 * time.Second, enrichTimeout: time.Second,
		llm: llmOptions{baseURL: llm.URL(), model: "m", apiKey: "sk-very-secret", timeout: 5 * time.Second, concurrency: 1, responseFormat: "json_schema"},
	}
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	svc, err := startService(context.Background(), o, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.stop(context.Background()) })
	const secretText = "my-private-diary-entry-42"
	js, err := jetstream.New(svc.nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.NewPublisher(js, prefix).Publish(context.Background(), events.Turn{ID: "s1", UserID: "alice",
		UserMessage: "I feel " + secretText, AssistantResponse: "reply " + secretText, Timestamp: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.nc.Request(prefix+".turns.alice", []byte(`{"id":"bad","user_id":"alice","user_message":"`+secretText+`"}`), 2*time.Second); err != nil {
		t.Logf("publish invalid event: %v", err)
	}
	if _, err := enricher.NewClient(svc.nc, prefix).Enrich(context.Background(), enricher.EnrichRequest{UserID: "alice", Message: "how do I feel " + secretText}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for tick := time.NewTicker(20 * time.Millisecond); ; <-tick.C {
		out := logs.String()
		if strings.Contains(out, "rejected invalid turn event") && strings.Contains(out, "extraction failed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the invalid event and the failed extraction were not both logged:\n%s", out)
		}
	}
	out := logs.String()
	for _, leak := range []string{secretText, "hunter2-secret", "sk-very-secret"} {
		if strings.Contains(out, leak) {
			t.Errorf("info logs contain %q:\n%s", leak, out)
		}
	}
}
