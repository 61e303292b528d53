package app

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor/extractortest"
)

// TestEnrichAnswersWhileTheWorkerStops: a stop waits for a running
// extraction job (its model call held) and enrich answers all the while.
// Before, the enrich service stopped first, so a restart of a lone serve
// answered no request until its jobs returned (a soak: 25-31 s and 90-98
// failed requests a restart, model calls being slow).
func TestEnrichAnswersWhileTheWorkerStops(t *testing.T) {
	t.Parallel()
	a, free := startWithAHeldJob(t, func(c *Config) { c.Ops.Addr = "127.0.0.1:0" })
	health := "http://" + a.OpsAddr() + "/healthz"
	client := events.NewClient(eventstest.Conn(t), a.cfg.Prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ask := func() error {
		_, err := client.Enrich(ctx, events.EnrichRequest{UserID: "alice", Message: "where do I live?"})
		return err
	}
	eventstest.Eventually(t, "enrich answering", time.Minute, func() (bool, string) {
		err := ask()
		return err == nil, "enrich: " + errString(err)
	})

	stopped := make(chan error, 1)
	go func() { stopped <- a.Stop(ctx) }()
	// The operators' endpoint goes first: once it refuses, the stop has
	// moved on to the components.
	eventstest.Eventually(t, "the operators' endpoint stopped", time.Minute, func() (bool, string) {
		resp, err := http.Get(health)
		if err == nil {
			resp.Body.Close()
		}
		return err != nil, "still answering"
	})
	for i := range 20 {
		if err := ask(); err != nil {
			t.Fatalf("enrich request %d while the stop waits for the running job: %v", i, err)
		}
	}
	select {
	case err := <-stopped:
		t.Fatalf("the stop returned (%v) while a job's model call was held", err)
	default:
	}
	free()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// TestStopWhoseDeadlineTheJobsSpendSucceeds: a stop whose deadline a running
// job's held model call uses up returns nil (serve exits 0, as documented):
// the worker's wait ends a reserve before the deadline, which the enrich
// service's stop then has. A review found it returned "requests still in
// progress were cancelled" once the worker stopped first and spent it all.
func TestStopWhoseDeadlineTheJobsSpendSucceeds(t *testing.T) {
	t.Parallel()
	a, _ := startWithAHeldJob(t, nil)
	ctx := context.Background()
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := a.Stop(sctx); err != nil {
		t.Fatalf("a stop whose deadline the running job spent: %v, want nil", err)
	}
}

// startWithAHeldJob starts an App (changed by mod) whose model holds every
// call until the returned free is called (also at the test's end, before
// the app's and the server's cleanups), publishes one turn of alice's and
// returns once its extraction job is waiting on the model.
func startWithAHeldJob(t *testing.T, mod func(*Config)) (a *App, free func()) {
	t.Helper()
	llm := extractortest.NewServer(t)
	asked, release := make(chan struct{}, 1), make(chan struct{})
	llm.SetHandler(func(openai.ChatCompletionRequest) extractortest.Reply {
		select {
		case asked <- struct{}{}:
		default:
		}
		<-release
		return extractortest.Content(`{"facts":{},"context":[]}`)
	})
	var once sync.Once
	free = func() { once.Do(func() { close(release) }) }
	a = startTestApp(t, func(c *Config) {
		c.LLM.BaseURL, c.LLM.Model = llm.URL(), "fake-model"
		if mod != nil {
			mod(c)
		}
	})
	t.Cleanup(free)
	js, err := jetstream.New(eventstest.Conn(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.NewPublisher(js, a.cfg.Prefix).Publish(context.Background(), events.Turn{ID: "t1", UserID: "alice",
		UserMessage: "I live in Oslo", AssistantResponse: "ok", Timestamp: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	<-asked
	return a, free
}
