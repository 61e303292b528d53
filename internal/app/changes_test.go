package app

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
)

// TestServePublishesChanges: a served memoryd publishes what the write
// endpoints change on <prefix>.changes.<token>, in order, a forget
// starting the numbering again; a change is published only after its
// reply said ok, so it is in by the time it is awaited.
func TestServePublishesChanges(t *testing.T) {
	t.Parallel()
	// Polling once an hour: serve's own commits do not notify, so the
	// changes arrive only if those commits wake the publisher.
	svc := startTestApp(t, func(c *Config) { c.Changes.PollInterval = time.Hour })
	var notify string
	if err := svc.store.Pool().QueryRow(context.Background(), `SELECT current_setting('memoryd.change_notify', true)`).Scan(&notify); err != nil || notify != "off" {
		t.Fatalf("serve's shared pool: memoryd.change_notify %q (%v), want off", notify, err)
	}
	client := events.NewClient(svc.nc, svc.cfg.Prefix)
	var (
		mu  sync.Mutex
		got []events.Change
	)
	var raw [][]byte // the messages as sent, for the schema
	rawSub, err := svc.nc.Subscribe(events.ChangesSubject(svc.cfg.Prefix, "alice"), func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		raw = append(raw, m.Data)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rawSub.Unsubscribe()
	sub, err := client.Changes("alice", func(c events.Change, err error) {
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		got = append(got, c)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := svc.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := client.SetFact(ctx, "alice", "name", "Alice"); err != nil {
		t.Fatal(err)
	}
	stored, err := client.Store(ctx, events.StoreRequest{UserID: "alice", Question: "favourite tea?", Answer: "oolong"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Clear(ctx, events.ClearRequest{UserID: "alice", All: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Forget(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	want := []events.Change{
		{UserID: "alice", Seq: 1, Type: events.ChangeFactSet, Key: "name", Value: "Alice"},
		{UserID: "alice", Seq: 2, Type: events.ChangeContextStored, ID: stored.ID, Question: "favourite tea?", Answer: "oolong"},
		{UserID: "alice", Seq: 3, Type: events.ChangeContextCleared, Count: 1},
		{UserID: "alice", Seq: 4, Type: events.ChangeMemoryForgotten},
	}
	var last []events.Change
	eventstest.Eventually(t, "the forget's change", time.Minute, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		last = slices.Clone(got)
		return len(last) > 0 && last[len(last)-1].Type == events.ChangeMemoryForgotten && len(raw) >= len(last), ""
	})
	for i := range last {
		last[i].At = time.Time{}
	}
	// Every message as sent is an instance of the documented schema.
	var schema jsonschema.Schema
	data, err := os.ReadFile("../../docs/schemas/change.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(raw) < len(last) {
		t.Fatalf("%d raw messages, %d changes", len(raw), len(last))
	}
	for _, m := range raw {
		var v map[string]any
		if err := json.Unmarshal(m, &v); err != nil {
			t.Fatal(err)
		}
		if err := resolved.Validate(v); err != nil {
			t.Errorf("change %s: %v", m, err)
		}
	}
	// The forget deletes what was not sent yet: the first k changes
	// arrive, in order, then the forget's (a gap in seq for the others).
	k := len(last) - 1
	if k > 3 || !slices.Equal(last[:k], want[:k]) || last[k] != want[3] {
		t.Fatalf("changes = %+v\nwant %+v, or a prefix of its first three and the last", last, want)
	}
}
