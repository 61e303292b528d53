package worker_test

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/worker"
)

// TestModelRecoveryIsLogged: when the model server answers again after
// extraction waited for it, the worker says so once, at info, with how
// long it was down and no text of a turn. Before, the log had the
// outage's warnings and then nothing: an operator could not tell from it
// that extraction had resumed (a walk).
func TestModelRecoveryIsLogged(t *testing.T) {
	e := setup(t)
	logs := new(eventstest.SyncBuffer)
	var up atomic.Bool
	e.start(switchedModel(t, &up, time.Second), func(c *worker.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		// A snooze of a second or two: the job runs again by itself,
		// with no other turn to meet the server back (no wake).
		c.JobRetryBase = 2 * time.Second
	})
	e.publish(events.Turn{ID: "t1", UserID: "user-1", UserMessage: "My name is Alice."})
	eventstest.Eventually(t, "the job waiting for the model server", time.Minute, func() (bool, string) {
		return strings.Contains(logs.String(), "model server unreachable"), "no wait logged"
	})
	if strings.Contains(logs.String(), msgModelAnswersAgain) {
		t.Fatalf("recovery logged while the server is down:\n%s", logs)
	}
	up.Store(true)
	e.waitDone(1)
	// Another answer, with no outage between: no second line.
	e.publish(events.Turn{ID: "t2", UserID: "user-2", UserMessage: "My name is Alice."})
	e.waitDone(2)
	out := logs.String()
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, msgModelAnswersAgain) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "level=INFO") || !strings.Contains(lines[0], "down_for=") {
		t.Fatalf("want one info line %q with down_for after the server came back, got %d:\n%s", msgModelAnswersAgain, len(lines), out)
	}
	if strings.Contains(lines[0], "Alice") {
		t.Errorf("the recovery line holds a turn's text: %s", lines[0])
	}
}

const msgModelAnswersAgain = "model server answers again; extraction resumes" // worker.msgModelAnswersAgain

// TestModelRecoveryIsLoggedAfterAttempts: a job that may not wait for the
// model server (MaxModelOutage -1) spends its attempts on it; the
// server's next answer is logged as for a wait.
func TestModelRecoveryIsLoggedAfterAttempts(t *testing.T) {
	e := setup(t)
	logs := new(eventstest.SyncBuffer)
	var up atomic.Bool
	e.start(switchedModel(t, &up, time.Second), func(c *worker.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		c.MaxModelOutage = -1
		c.JobRetryBase = 2 * time.Second
	})
	e.publish(events.Turn{ID: "t1", UserID: "user-1", UserMessage: "My name is Alice."})
	eventstest.Eventually(t, "an attempt spent on the model server", time.Minute, func() (bool, string) {
		return strings.Contains(logs.String(), "spending attempts"), "no attempt logged"
	})
	up.Store(true)
	e.waitDone(1)
	if out := logs.String(); strings.Count(out, msgModelAnswersAgain) != 1 {
		t.Fatalf("want one %q after the attempt spent on the server:\n%s", msgModelAnswersAgain, out)
	}
}
