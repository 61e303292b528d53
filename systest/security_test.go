package systest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor/extractortest"
)

// TestIsolationUnderRandomInterleavedWrites: many users, random interleaved
// turns and tool writes (store, set, clear, forget); afterwards every read
// endpoint returns, for every user, only that user's data.
func TestIsolationUnderRandomInterleavedWrites(t *testing.T) {
	t.Parallel()
	light(t)
	e := newRelEnv(t, "")
	serve := e.startServe(e.dbURL, "--enrich-timeout", "10s", "--job-timeout", "1m", "--ack-wait", "30s")
	ctx := context.Background()
	client := events.NewClient(e.nc, e.prefix)
	pub := e.pub
	var err error
	// Requests are answered once serve has started its enrich service.
	waitFor(t, "serve answering stats", time.Minute, func() (bool, string) {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := client.Stats(rctx, "probe")
		return err == nil, fmt.Sprint(err)
	}, serve)
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
			_, err = client.Store(ctx, events.StoreRequest{UserID: u, Question: "q " + m + fmt.Sprint(i), Answer: "a " + m})
		case op < 9:
			_, err = client.SetFact(ctx, u, fmt.Sprintf("k%d", i%5), m)
		default:
			if i%3 == 0 {
				_, err = client.Forget(ctx, u)
				forgotten[u] = true
				turns[u] = 0
			} else {
				_, err = client.Clear(ctx, events.ClearRequest{UserID: u, Question: "q " + m + fmt.Sprint(i-1)})
			}
		}
		if err != nil {
			t.Fatalf("op %d for %q: %v", i, u, err)
		}
	}
	// Wait until no turn is pending anywhere.
	waitFor(t, "no turn pending", 2*time.Minute, func() (bool, string) {
		st, err := e.store.Stats(ctx, "")
		return err == nil && st.TurnsPending == 0, fmt.Sprintf("%+v %v", st, err)
	}, serve)
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
		reply, err := client.Enrich(ctx, events.EnrichRequest{UserID: u, Message: "note q a " + own, Threshold: new(0.0), MaxResults: new(50)})
		if err != nil {
			t.Fatal(err)
		}
		check("enrich", fmt.Sprint(reply))
		res, err := client.Search(ctx, events.SearchRequest{UserID: u, Query: "note q " + own, MaxResults: new(50)})
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
	light(t)
	e := newRelEnv(t, "")
	llm := extractortest.NewServer(t, extractortest.Reply{Status: 500, Body: `{"error":{"message":"down"}}`})
	// The secrets reach serve as users pass them: in the database URL and
	// in the environment. (The server trusts local connections, so the
	// password is accepted whatever it is.)
	serve := startServe(t, []string{"MEMORYD_LLM_API_KEY=sk-very-secret"}, e.serveArgs(
		strings.Replace(e.dbURL, "postgres@", "postgres:hunter2-secret@", 1),
		"--log-level", "info", "--max-attempts", "1", "--job-timeout", "1m", "--enrich-timeout", "10s",
		"--llm-base-url", llm.URL(), "--llm-model", "m", "--llm-timeout", "5s")...)
	client := events.NewClient(e.nc, e.prefix)
	waitFor(t, "serve answering enrich", time.Minute, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := client.Stats(ctx, "probe")
		return err == nil, fmt.Sprint(err)
	}, serve)
	const secretText = "my-private-diary-entry-42"
	if _, err := e.pub.Publish(context.Background(), events.Turn{ID: "s1", UserID: "alice",
		UserMessage: "I feel " + secretText, AssistantResponse: "reply " + secretText, Timestamp: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.nc.Request(e.prefix+".turns.alice", []byte(`{"id":"bad","user_id":"alice","user_message":"`+secretText+`"}`), 2*time.Second); err != nil {
		t.Logf("publish invalid event: %v", err)
	}
	if _, err := client.Enrich(context.Background(), events.EnrichRequest{UserID: "alice", Message: "how do I feel " + secretText}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the invalid event and the failed extraction both logged", time.Minute, func() (bool, string) {
		out := serve.logs.String()
		return strings.Contains(out, "rejected invalid turn event") && strings.Contains(out, "extraction failed"), "not yet"
	}, serve)
	out := serve.logs.String()
	for _, leak := range []string{secretText, "hunter2-secret", "sk-very-secret"} {
		if strings.Contains(out, leak) {
			t.Errorf("info logs contain %q:\n%s", leak, out)
		}
	}
}
