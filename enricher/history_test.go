package enricher_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestFactProvenanceOnTheWire: every reply that carries a fact (enrich,
// facts.get, facts.list, facts.set) says which turn and conversation stated
// its value and when; a facts.set value has a source time and no turn.
func TestFactProvenanceOnTheWire(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	upsertFacts(t, st, store.FactWrite{UserID: "u", Key: "city", Value: "Paris", SourceAt: t0, EventID: "ev-1", ConversationID: "conv-1"})
	ctx := ctxT(t)
	check := func(where string, f events.Fact) {
		t.Helper()
		if f.Key != "city" || f.EventID != "ev-1" || f.ConversationID != "conv-1" || !f.SourceAt.Equal(t0) || f.SourceAt.Location() != time.UTC {
			t.Errorf("%s: fact %+v, want city from ev-1 in conv-1 at %s", where, f, t0)
		}
	}
	r := enrich(t, h, events.EnrichRequest{UserID: "u", Message: "where"})
	if len(r.Facts) != 1 {
		t.Fatalf("enrich facts = %+v", r.Facts)
	}
	check("enrich", r.Facts[0])
	f, err := h.client.GetFact(ctx, "u", "city")
	if err != nil {
		t.Fatal(err)
	}
	check("facts.get", f)
	list, err := h.client.ListFacts(ctx, "u")
	if err != nil || len(list) != 1 {
		t.Fatalf("facts.list = %+v, %v", list, err)
	}
	check("facts.list", list[0])

	// A direct write: no turn, no conversation, on the wire as absent.
	msg := h.raw(t, h.prefix+".facts.set.u", []byte(`{"user_id":"u","key":"city","value":"Rome"}`))
	if code, desc := errorCode(t, msg); code != 0 {
		t.Fatalf("facts.set: %d %s", code, desc)
	}
	var set struct {
		OK   bool                       `json:"ok"`
		Fact map[string]json.RawMessage `json:"fact"`
	}
	if err := json.Unmarshal(msg.Data, &set); err != nil {
		t.Fatal(err)
	}
	if _, ok := set.Fact["source_at"]; !set.OK || !ok {
		t.Fatalf("facts.set reply %s lacks source_at", msg.Data)
	}
	for _, absent := range []string{"event_id", "conversation_id"} {
		if _, ok := set.Fact[absent]; ok {
			t.Errorf("facts.set reply %s carries %s", msg.Data, absent)
		}
	}
}

// TestFactHistoryEndpoint: facts.history over NATS returns one key's changes
// newest first with their operations and sources, paged without gaps or
// repeats; bad requests and another user's token are refused; one user
// never sees another's history.
func TestFactHistoryEndpoint(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	ctx := ctxT(t)
	for i, city := range []string{"Paris", "Rome", "Oslo"} {
		upsertFacts(t, st,
			store.FactWrite{UserID: "alice", Key: "city", Value: city, SourceAt: t0.Add(time.Duration(i) * time.Hour),
				EventID: fmt.Sprint("ev-", i), ConversationID: "conv-a"},
			store.FactWrite{UserID: "bob", Key: "city", Value: "bob-" + city, SourceAt: t0, EventID: fmt.Sprint("bob-", i)})
	}
	if n, err := h.client.ClearFact(ctx, "alice", "city"); err != nil || n != 1 {
		t.Fatalf("clear = %d, %v", n, err)
	}
	if _, err := h.client.SetFact(ctx, "alice", "city", "Lisbon"); err != nil {
		t.Fatal(err)
	}

	type change struct{ op, old, new, event, conv string }
	want := []change{
		{"set", "", "Lisbon", "", ""},
		{"clear", "Oslo", "", "", ""},
		{"set", "Rome", "Oslo", "ev-2", "conv-a"},
		{"set", "Paris", "Rome", "ev-1", "conv-a"},
		{"set", "", "Paris", "ev-0", "conv-a"},
	}
	deref := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	for _, size := range []int{1, 2, 5, events.MaxHistoryResults} {
		var got []events.FactChange
		req := events.FactHistoryRequest{UserID: "alice", Key: "  city ", MaxResults: &size}
		for pages := 0; ; pages++ {
			if pages > len(want) {
				t.Fatalf("size %d: more pages than changes", size)
			}
			r, err := h.client.FactHistory(ctx, req)
			if err != nil {
				t.Fatalf("size %d: %v", size, err)
			}
			if r.Key != "city" || r.Changes == nil || len(r.Changes) > size {
				t.Fatalf("size %d: page %+v", size, r)
			}
			got = append(got, r.Changes...)
			if r.NextBefore == 0 {
				break
			}
			req.Before = r.NextBefore
		}
		if len(got) != len(want) {
			t.Fatalf("size %d: %d changes, want %d: %+v", size, len(got), len(want), got)
		}
		for i, w := range want {
			c := got[i]
			g := change{c.Op, deref(c.OldValue), deref(c.NewValue), c.EventID, c.ConversationID}
			if g != w || (w.old == "") != (c.OldValue == nil) || (w.new == "") != (c.NewValue == nil) || c.ChangedAt.IsZero() {
				t.Errorf("size %d: change %d = %+v, want %+v", size, i, c, w)
			}
			// A set has a source time (the turn's, or the facts.set's); a
			// clear has none.
			if (c.Op == "set") == c.SourceAt.IsZero() {
				t.Errorf("size %d: change %d source time %v", size, i, c.SourceAt)
			}
			if c.EventID == "ev-1" && !c.SourceAt.Equal(t0.Add(time.Hour)) {
				t.Errorf("size %d: ev-1's source time %v, want %s", size, c.SourceAt, t0.Add(time.Hour))
			}
		}
	}

	// A key never set: an empty page, not an error.
	r, err := h.client.FactHistory(ctx, events.FactHistoryRequest{UserID: "alice", Key: "pet"})
	if err != nil || r.Changes == nil || len(r.Changes) != 0 || r.NextBefore != 0 {
		t.Fatalf("history of a key never set = %+v, %v", r, err)
	}
	// bob's history is bob's.
	r, err = h.client.FactHistory(ctx, events.FactHistoryRequest{UserID: "bob", Key: "city"})
	if err != nil || len(r.Changes) != 3 {
		t.Fatalf("bob's history = %+v, %v", r, err)
	}
	for _, c := range r.Changes {
		if !strings.HasPrefix(c.EventID, "bob-") || !strings.HasPrefix(*c.NewValue, "bob-") {
			t.Errorf("bob's history holds %+v", c)
		}
	}

	// Refused: malformed or out-of-range requests, and alice's user_id on
	// mallory's token, which carries no data back.
	for _, tt := range []struct{ token, body, want string }{
		{"alice", `{"user_id":"alice"}`, "key is required"},
		{"alice", `{"user_id":"alice","key":"  "}`, "key is required"},
		{"alice", mustString(t, map[string]string{"user_id": "alice", "key": strings.Repeat("k", 300)}), "key is 300 bytes"},
		{"alice", `{"user_id":"alice","key":"city","max_results":0}`, "max_results 0 is not in 1..100"},
		{"alice", `{"user_id":"alice","key":"city","max_results":101}`, "max_results 101"},
		{"alice", `{"user_id":"alice","key":"city","before":-1}`, "before -1"},
		{"alice", `{"user_id":"alice","key":"city","before":"7"}`, `"before" must be a whole number`},
		{"mallory", `{"user_id":"alice","key":"city"}`, "user_id"},
	} {
		msg := h.raw(t, h.prefix+".facts.history."+tt.token, []byte(tt.body))
		code, desc := errorCode(t, msg)
		if code != 400 || !strings.Contains(desc, tt.want) || len(msg.Data) != 0 {
			t.Errorf("%s %s: code %d %q, data %q; want 400 containing %q", tt.token, tt.body, code, desc, msg.Data, tt.want)
		}
	}
}
