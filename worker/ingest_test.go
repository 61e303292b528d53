package worker_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/worker"
)

// TestIngestSaysWhenItRecordsAgain: while turns cannot be recorded the
// ingest logs an error a batch (backing off); when they can again it says
// so once, with how long and how many batches failed, so that an operator
// reading the log after an outage sees where it ended. The outage here is
// the turns table gone (renamed) and back.
func TestIngestSaysWhenItRecordsAgain(t *testing.T) {
	e, logs := ingestFailing(t)
	if strings.Contains(logs.String(), "recording turns again") {
		t.Fatalf("said it records again before it did:\n%s", logs.String())
	}
	if _, err := e.store.Pool().Exec(e.ctx, `ALTER TABLE turns_gone RENAME TO turns`); err != nil {
		t.Fatal(err)
	}
	e.waitDone(2)
	e.waitFor("the ingest to say it records again", func() (bool, string) {
		return strings.Contains(logs.String(), "ingest: recording turns again"), ""
	})
	var again []string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "recording turns again") {
			again = append(again, l)
		}
	}
	if len(again) != 1 || !strings.Contains(again[0], "failed_batches=") || !strings.Contains(again[0], "failed_for=") {
		t.Fatalf("lines saying it records again: %q, want one with failed_batches and failed_for", again)
	}
}

// TestIngestSaysRecordingAgainOnlyWhenItDoes: a batch holding no turn to
// record (events dead-lettered at decode, or opted out) never reaches the
// turns table, so it says nothing about whether turns can be recorded: it
// must not end the outage in the log. Here the turns table is gone the
// whole time while invalid events arrive beside the failing turn.
func TestIngestSaysRecordingAgainOnlyWhenItDoes(t *testing.T) {
	e, logs := ingestFailing(t)
	// Each invalid event its own batch among the failing turn's retries:
	// the next is published once the last is dead-lettered.
	bob := events.TurnSubject(e.prefix, "bob")
	for i := range 5 {
		if _, err := e.js.Publish(e.ctx, bob, fmt.Appendf(nil, `{"id":"bad-%d","user_id":"bob"}`, i)); err != nil {
			t.Fatal(err)
		}
		e.waitFor(fmt.Sprintf("invalid event %d dead-lettered", i), func() (bool, string) {
			dl, err := e.js.Stream(e.ctx, events.DeadLetterStream(e.stream))
			if err != nil {
				return false, err.Error()
			}
			info, err := dl.Info(e.ctx)
			if err != nil {
				return false, err.Error()
			}
			return info.State.Msgs >= uint64(i+1), fmt.Sprint(info.State.Msgs, " dead letters")
		})
	}
	if n := strings.Count(logs.String(), "recording turns again"); n > 0 {
		t.Errorf("said %d times that it records turns again while the turns table was gone:\n%s", n, logs.String())
	}
	if _, err := e.store.Pool().Exec(e.ctx, `ALTER TABLE turns_gone RENAME TO turns`); err != nil {
		t.Fatal(err)
	}
	e.waitDone(2)
}

// ingestFailing starts a worker logging to the returned buffer, records
// one turn, then takes the turns table away (renamed turns_gone) and
// publishes a second turn, returning once its ingest has failed.
func ingestFailing(t *testing.T) (*env, *lockedBuffer) {
	t.Helper()
	e := setup(t)
	logs := &lockedBuffer{}
	e.start(extractor.NewRules(), func(c *worker.Config) { c.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	e.publish(events.Turn{ID: "t1", UserID: "alice", UserMessage: "I live in Oslo"})
	e.waitDone(1)
	if _, err := e.store.Pool().Exec(e.ctx, `ALTER TABLE turns RENAME TO turns_gone`); err != nil {
		t.Fatal(err)
	}
	e.publish(events.Turn{ID: "t2", UserID: "alice", UserMessage: "I work at a bakery"})
	e.waitFor("the ingest to fail", func() (bool, string) {
		return strings.Contains(logs.String(), "ingest: cannot record turns"), ""
	})
	return e, logs
}
