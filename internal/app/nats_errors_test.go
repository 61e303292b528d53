package app_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/internal/app"
)

// TestNATSAsyncErrorsAreLogged: the server's asynchronous errors on a
// memoryd connection (here a slow consumer) are lines of memoryd's log,
// with the subscription's subject, not nats.go's plain line on standard
// error in the middle of a JSON log (a TypeScript walk saw one from serve
// after a NATS restart).
func TestNATSAsyncErrorsAreLogged(t *testing.T) {
	t.Parallel()
	var logs eventstest.SyncBuffer
	nc, err := app.NATSConfig{URL: eventstest.URL(), Name: "memoryd-test"}.Connect(slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	subject := "memoryd_test.slow." + strings.ReplaceAll(t.Name(), "/", "_")
	release := make(chan struct{})
	defer close(release)
	sub, err := nc.Subscribe(subject, func(*nats.Msg) { <-release })
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(1, 1<<20); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if err := nc.Publish(subject, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	eventstest.Eventually(t, "the slow consumer to be logged", 30*time.Second, func() (bool, string) {
		s := logs.String()
		return strings.Contains(s, `"msg":"nats error"`) && strings.Contains(s, "slow consumer") && strings.Contains(s, subject), s
	})
}
