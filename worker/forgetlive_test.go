package worker_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// A forget recorded unfinished whose process still runs it (a CLI forget,
// or another serve's, while this serve starts) is left to that process: a
// start finished it beside it, counting the events it deleted into neither
// reply, and logged "finished a forget cut short" for a forget nobody cut.
// Once the process is gone (its hold with it), the next start finishes it.
func TestStartLeavesALiveForgetToItsProcess(t *testing.T) {
	e := forgetCutShort(t)
	// The process still running alice's forget: another store on the
	// schema, holding the forget as forget does.
	running := storetest.Open(t, storetest.URL(t, e.store))
	release, ok, err := running.Hold(e.ctx, worker.ForgetHold(events.UserToken("alice")), false)
	if err != nil || !ok {
		t.Fatalf("hold alice's forget: %v, %v", ok, err)
	}

	var logs lockedBuffer
	stop := e.start(extractor.NewRules(), func(c *worker.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	stop()
	if n := e.subjectMsgs(e.stream, e.prefix+".turns.alice"); n != 2 {
		t.Errorf("alice's events after a start beside her live forget: %d; want her 2 left to the forget", n)
	}
	if docs := e.docsOf("alice"); len(docs) != 2 {
		t.Errorf("alice's documents after a start beside her live forget: %q; want her 2 left to the forget", docs)
	}
	if !e.forgetRecord("alice").Unfinished {
		t.Error("the live forget's record was marked finished by the start")
	}
	if !strings.Contains(logs.String(), "running in a live process: left to it") || strings.Contains(logs.String(), "finished a forget cut short") {
		t.Errorf("log of a start beside a live forget:\n%s", logs.String())
	}

	// Its process gone without finishing it: the next start does.
	release()
	var logs2 lockedBuffer
	e.start(extractor.NewRules(), func(c *worker.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs2, nil)) })
	if n := e.subjectMsgs(e.stream, e.prefix+".turns.alice"); n != 0 {
		t.Errorf("alice's events after the next start: %d; want none", n)
	}
	e.checkOnlyAlicePurged()
	if e.forgetRecord("alice").Unfinished {
		t.Error("the record is still unfinished after the next start")
	}
	if !strings.Contains(logs2.String(), "finished a forget cut short") {
		t.Errorf("log of the next start:\n%s", logs2.String())
	}
}

// A forget holds its user from before its memory's transaction until it is
// done: while it waits on the user's documents (locked by another
// transaction here), past the point where it recorded itself unfinished,
// no other process can take the forget alone; once it is done, one can.
func TestForgetHoldsItsUserUntilDone(t *testing.T) {
	e := setup(t)
	e.publish(events.Turn{ID: "alice-1", UserID: "alice", UserMessage: "I live in Paris."})
	e.putDoc("alice", "notes", "a")
	other := storetest.Open(t, storetest.URL(t, e.store))
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute) // bounds a failure only
	defer cancel()

	kv, err := e.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: worker.ForgetsBucket(e.stream), History: 1})
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(ctx, worker.ForgetKey(events.UserToken("alice")))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()

	tx, err := e.store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM collections WHERE owner_kind = 'user' AND owner = 'alice' FOR NO KEY UPDATE`); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	go func() {
		_, err := worker.Forget(ctx, e.js, e.store, e.prefix, e.stream, "alice")
		done <- err
	}()
	// The forget recorded itself unfinished: its memory's transaction
	// committed, and it waits for the documents' lock.
	for unfinished := false; !unfinished; {
		select {
		case <-ctx.Done():
			t.Fatal("the forget never recorded itself unfinished")
		case err := <-done:
			t.Fatalf("the forget ended (%v) before it waited for alice's documents", err)
		case entry := <-w.Updates():
			if entry == nil {
				continue
			}
			var r struct{ Unfinished bool }
			if err := json.Unmarshal(entry.Value(), &r); err != nil {
				t.Fatal(err)
			}
			unfinished = r.Unfinished
		}
	}
	hold := worker.ForgetHold(events.UserToken("alice"))
	if _, ok, err := other.Hold(ctx, hold, true); err != nil || ok {
		t.Fatalf("another process took alice's running forget alone: %v, %v", ok, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("forget: %v", err)
	}
	release, ok, err := other.Hold(ctx, hold, true)
	if err != nil || !ok {
		t.Fatalf("another process cannot take alice's forget alone once it is done: %v, %v", ok, err)
	}
	release()
}
