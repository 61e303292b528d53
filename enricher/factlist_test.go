package enricher_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestListKeyWritesOverNATS: facts.set on a list key (or its alias) stores
// the value as the list's items, replacing the items stated before;
// facts.clear clears the items with the fact, so that an earlier turn's add
// stays out and a later turn's add starts the list again.
func TestListKeyWritesOverNATS(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	ctx := ctxT(t)
	extracted := func(op store.FactOp, value string, at time.Time, event string) store.FactWrite {
		return store.FactWrite{UserID: "u", Key: "allergies", Value: value, SourceAt: at, EventID: event, Op: op, List: true,
			Provenance: store.Provenance{Extractor: "rules"}}
	}
	upsertFacts(t, st, extracted(store.FactAdd, "dust", t0, "e0"))

	reply, err := h.client.SetFact(ctx, "u", "allergies", "peanuts, shellfish")
	if err != nil || !reply.OK || reply.Fact.Key != "allergies" || reply.Fact.Value != "peanuts, shellfish" {
		t.Fatalf("facts.set of a list = %+v, %v; want peanuts, shellfish", reply, err)
	}
	// A later turn adds to the list the direct write made.
	upsertFacts(t, st, extracted(store.FactAdd, "soy", time.Now().Add(time.Minute), "e1"))
	if f, err := h.client.GetFact(ctx, "u", "allergies"); err != nil || f.Value != "peanuts, shellfish, soy" || f.EventID != "e1" {
		t.Fatalf("after a later add: %+v, %v", f, err)
	}
	// An alias names the list key; the list becomes the value's items (a
	// later turn's item stays: it was stated after this request).
	reply, err = h.client.SetFact(ctx, "u", "allergy", "milk; eggs")
	if err != nil || !reply.OK || reply.Fact.Key != "allergies" || reply.Fact.Value != "eggs, milk, soy" {
		t.Fatalf("facts.set of a list by its alias = %+v, %v; want allergies = eggs, milk, soy", reply, err)
	}
	if f, err := h.client.GetFact(ctx, "u", "allergy"); err != nil || f.Key != "allergies" || f.Value != "eggs, milk, soy" {
		t.Fatalf("get by the alias = %+v, %v; want the allergies fact", f, err)
	}
	if hist, err := h.client.FactHistory(ctx, events.FactHistoryRequest{UserID: "u", Key: "allergy"}); err != nil || hist.Key != "allergies" || len(hist.Changes) == 0 {
		t.Fatalf("history by the alias = %+v, %v; want the allergies history", hist, err)
	}
	msg := h.raw(t, h.prefix+".facts.set.u", []byte(`{"user_id":"u","key":"allergies","value":" , ;"}`))
	if code, _ := errorCode(t, msg); code != 400 {
		t.Fatalf("facts.set of a list with no item: code %d, want 400", code)
	}

	if n, err := h.client.ClearFact(ctx, "u", "allergies"); err != nil || n != 1 {
		t.Fatalf("facts.clear = %d, %v", n, err)
	}
	var items int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM fact_items WHERE user_id = 'u'`).Scan(&items); err != nil || items != 0 {
		t.Fatalf("%d items left after facts.clear (%v)", items, err)
	}
	// An add of a turn stamped before the clear stays out; a later one
	// starts the list again, alone.
	upsertFacts(t, st, extracted(store.FactAdd, "dust", t0.Add(time.Hour), "e2"))
	if _, err := h.client.GetFact(ctx, "u", "allergies"); !isNotFound(err) {
		t.Fatalf("after an earlier add: %v, want not found", err)
	}
	upsertFacts(t, st, extracted(store.FactAdd, "pollen", time.Now().Add(time.Hour), "e3"))
	if f, err := h.client.GetFact(ctx, "u", "allergies"); err != nil || f.Value != "pollen" {
		t.Fatalf("after a later add: %+v, %v; want pollen", f, err)
	}
	if n, err := h.client.ClearFact(ctx, "u", "allergy"); err != nil || n != 1 {
		t.Fatalf("facts.clear by the alias = %d, %v; want the list cleared", n, err)
	}
}

func isNotFound(err error) bool {
	var se *events.ServiceError
	return errors.As(err, &se) && se.Code == 404
}

// TestListKeyAsAJSONArray: a list set to a JSON array of strings, as a
// model or a script sends it, stores its strings as the items; before,
// split at commas, it stored `["climbing"` and `"go"]` with ok true. A
// value in brackets that is no such array is a 400; other keys keep such
// a value as sent.
func TestListKeyAsAJSONArray(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	ctx := ctxT(t)
	for _, tt := range []struct{ value, want string }{
		{`["climbing","go"]`, "climbing, go"},
		{` [ "chess" , "board games; cards" ] `, "board games, cards, chess"},
		{`["Ünïcode ☕", ""]`, "Ünïcode ☕"},
	} {
		reply, err := h.client.SetFact(ctx, "u", "hobbies", tt.value)
		if err != nil || !reply.OK || reply.Fact.Value != tt.want {
			t.Errorf("facts.set hobbies %s = %+v, %v; want %q", tt.value, reply, err, tt.want)
		}
	}
	for _, value := range []string{`["climbing", 3]`, `[climbing, go]`, `[]`, `[""]`} {
		msg := h.raw(t, h.prefix+".facts.set.u", []byte(`{"user_id":"u","key":"hobbies","value":`+strconv.Quote(value)+`}`))
		if code, text := errorCode(t, msg); code != 400 {
			t.Errorf("facts.set hobbies %s: code %d (%s), want 400", value, code, text)
		}
	}
	if f, err := h.client.GetFact(ctx, "u", "hobbies"); err != nil || f.Value != "Ünïcode ☕" {
		t.Errorf("after the refused sets: %+v, %v; want the last list kept", f, err)
	}
	if reply, err := h.client.SetFact(ctx, "u", "favorite_array", `["a","b"]`); err != nil || reply.Fact.Value != `["a","b"]` {
		t.Errorf("a free key: %+v, %v; want the value as sent", reply, err)
	}
}

// TestSetFactTrimsTheValue: a single-valued key's value is trimmed, as a
// key and list items are; "  Lisbon  " kept its spaces.
func TestSetFactTrimsTheValue(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	ctx := ctxT(t)
	reply, err := h.client.SetFact(ctx, "u", " location ", "  Lisbon \n")
	if err != nil || !reply.OK || reply.Fact.Key != "location" || reply.Fact.Value != "Lisbon" {
		t.Fatalf("facts.set = %+v, %v; want location = Lisbon", reply, err)
	}
	if f, err := h.client.GetFact(ctx, "u", "location"); err != nil || f.Value != "Lisbon" {
		t.Fatalf("facts.get = %+v, %v; want Lisbon", f, err)
	}
}

// TestClearRefusesAQuestionNoItemHas: clear by a question holding a NUL or
// over store's limit is a 400, as the other requests' text is; it was a
// clear of nothing, recorded as a clear.
func TestClearRefusesAQuestionNoItemHas(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	for _, q := range []string{"a\x00b", strings.Repeat("q", events.MaxQuestionBytes+1)} {
		body, _ := json.Marshal(events.ClearRequest{UserID: "u", Question: q})
		msg := h.raw(t, h.prefix+".clear.u", body)
		if code, text := errorCode(t, msg); code != 400 || !strings.Contains(text, "question") {
			t.Errorf("clear of a %d-byte question: code %d (%s), want a 400 naming the question", len(q), code, text)
		}
	}
	var clears int
	if err := st.Pool().QueryRow(ctxT(t), `SELECT count(*) FROM context_clears WHERE user_id = 'u'`).Scan(&clears); err != nil || clears != 0 {
		t.Errorf("%d clears recorded (%v), want none", clears, err)
	}
}
