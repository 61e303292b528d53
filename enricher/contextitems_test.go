package enricher_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// serviceCode is the code of a *events.ServiceError, 0 for nil and -1 for
// any other error.
func serviceCode(err error) int {
	if err == nil {
		return 0
	}
	if se, ok := errors.AsType[*events.ServiceError](err); ok {
		return se.Code
	}
	return -1
}

// TestContextItemsOverNATS: memory.context.list walks a user's items newest
// first in pages without a keyword; get, update and delete work by id on the
// user's own items, and another user's id answers 404 and stays untouched,
// with alice's and bob's calls interleaved.
func TestContextItemsOverNATS(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	ctx := ctxT(t)
	var writes []store.ContextWrite
	for i := range 7 {
		for _, u := range []string{"alice", "bob"} {
			writes = append(writes, store.ContextWrite{UserID: u, Question: fmt.Sprintf("%s q%d", u, i), Answer: "a",
				CreatedAt: t0.Add(time.Duration(i/2) * time.Minute), EventID: fmt.Sprintf("e%d", i)})
		}
	}
	ids := insertContext(t, st, writes...)
	aliceID, bobID := ids[0], ids[1]

	// Walk alice's items, two per page.
	var (
		listed []events.ContextItem
		after  *events.ContextCursor
	)
	for range 10 {
		two := 2
		page, err := h.client.ListContext(ctx, events.ContextListRequest{UserID: "alice", Limit: &two, After: after})
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, page.Items...)
		if after = page.Next; after == nil {
			break
		}
	}
	if len(listed) != 7 {
		t.Fatalf("listed %d of alice's 7 items: %+v", len(listed), listed)
	}
	for i, it := range listed {
		if want := t0.Add(time.Duration((6-i)/2) * time.Minute); !it.CreatedAt.Equal(want) {
			t.Errorf("item %d is %q at %s, want %s: not newest first", i, it.Question, it.CreatedAt, want)
		}
		if i > 0 && (it.CreatedAt.After(listed[i-1].CreatedAt) || it.CreatedAt.Equal(listed[i-1].CreatedAt) && it.ID > listed[i-1].ID) {
			t.Errorf("item %d (%d, %s) after item %d (%d, %s)", i, it.ID, it.CreatedAt, i-1, listed[i-1].ID, listed[i-1].CreatedAt)
		}
	}

	got, err := h.client.GetContext(ctx, "alice", aliceID)
	if err != nil || got.Question != "alice q0" || got.EventID != "e0" {
		t.Fatalf("get alice's item: %+v, %v", got, err)
	}
	q := "changed"
	for _, c := range []struct {
		user string
		id   int64
	}{{"alice", bobID}, {"bob", aliceID}} {
		if _, err := h.client.GetContext(ctx, c.user, c.id); serviceCode(err) != 404 {
			t.Errorf("%s gets item %d of the other user: %v, want 404", c.user, c.id, err)
		}
		if _, err := h.client.UpdateContext(ctx, events.ContextUpdateRequest{UserID: c.user, ID: c.id, Question: &q}); serviceCode(err) != 404 {
			t.Errorf("%s updates item %d of the other user: %v, want 404", c.user, c.id, err)
		}
		if err := h.client.DeleteContext(ctx, c.user, c.id); serviceCode(err) != 404 {
			t.Errorf("%s deletes item %d of the other user: %v, want 404", c.user, c.id, err)
		}
	}
	if it, err := st.ContextByID(ctx, "bob", bobID); err != nil || it.Question != "bob q0" {
		t.Fatalf("bob's item after alice's calls: %+v, %v", it, err)
	}

	// Update: the new text, same id and source; onto another item's pair: 409.
	a := "A"
	upd, err := h.client.UpdateContext(ctx, events.ContextUpdateRequest{UserID: "alice", ID: aliceID, Question: &q, Answer: &a})
	if err != nil || upd.ID != aliceID || upd.Question != "changed" || upd.Answer != "A" || upd.EventID != "e0" {
		t.Fatalf("update: %+v, %v", upd, err)
	}
	q1, a1 := "ALICE Q1", "a"
	if _, err := h.client.UpdateContext(ctx, events.ContextUpdateRequest{UserID: "alice", ID: aliceID, Question: &q1, Answer: &a1}); serviceCode(err) != 409 {
		t.Errorf("update onto alice q1's pair: %v, want 409", err)
	}
	if got, _ := h.client.GetContext(ctx, "alice", aliceID); got.Question != "changed" {
		t.Errorf("after the refused update the item is %+v", got)
	}
	res, err := h.client.Search(ctx, events.SearchRequest{UserID: "alice", Query: "changed"})
	if err != nil || len(res.Results) != 1 || res.Results[0].ID != aliceID {
		t.Errorf("search finds the updated text: %+v, %v", res, err)
	}

	if err := h.client.DeleteContext(ctx, "alice", aliceID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.GetContext(ctx, "alice", aliceID); serviceCode(err) != 404 {
		t.Errorf("get after delete: %v, want 404", err)
	}
	if err := h.client.DeleteContext(ctx, "alice", aliceID); serviceCode(err) != 404 {
		t.Errorf("second delete: %v, want 404", err)
	}
	if n, _ := st.CountContext(ctx, "bob"); n != 7 {
		t.Errorf("bob has %d items, want 7", n)
	}
}

// TestContextItemBadRequests: what the endpoints refuse before touching the
// store.
func TestContextItemBadRequests(t *testing.T) {
	t.Parallel()
	h := start(t, storetest.New(t), nil)
	for _, c := range []struct{ endpoint, body, says string }{
		{"context.list", `{"user_id":"alice","limit":0}`, ""},
		{"context.list", `{"user_id":"alice","limit":201}`, ""},
		{"context.list", `{"user_id":"alice","after":{"created_at":"2026-11-21T10:00:00Z","id":0}}`, ""},
		{"context.list", `{"user_id":"bob"}`, ""},
		// The id absent is said so (before: "id 0 is not a context item id").
		{"context.get", `{"user_id":"alice"}`, "id is required"},
		{"context.get", `{"user_id":"alice","id":-3}`, "id -3 is not a context item id"},
		{"context.update", `{"user_id":"alice","id":1}`, ""},
		{"context.update", `{"user_id":"alice","id":1,"question":"  "}`, ""},
		{"context.update", `{"user_id":"alice","id":1,"answer":"a\u0000b"}`, ""},
		{"context.update", `{"user_id":"alice","question":"q"}`, "id is required"},
		{"context.delete", `{"user_id":"alice","id":0}`, ""},
	} {
		code, desc := errorCode(t, h.raw(t, h.prefix+"."+c.endpoint+".alice", []byte(c.body)))
		if code != 400 || !strings.Contains(desc, c.says) {
			t.Errorf("%s %s: code %d (%s), want 400 saying %q", c.endpoint, c.body, code, desc, c.says)
		}
	}
}

// TestContextUpdateWaitsForAForgetInProgress: an update is a direct write
// and takes the user's forget lock like store and facts.set: while a forget
// of the user is in progress it waits, then finds the item gone (404), and
// leaves no trace of the user (no clear recorded after the forget).
func TestContextUpdateWaitsForAForgetInProgress(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	ctx := ctxT(t)
	ids := insertContext(t, st, store.ContextWrite{UserID: "alice", Question: "dog?", Answer: "Rex", CreatedAt: t0})
	if _, err := st.InsertTurns(ctx, []store.Turn{{EventID: "e1", UserID: "alice", UserMessage: "hi", TurnAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	hold, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(context.Background()) }()
	if _, err := hold.Exec(ctx, `SELECT 1 FROM turns WHERE user_id = 'alice' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	forgot := make(chan error, 1)
	go func() {
		_, _, err := st.ForgetUser(context.Background(), "alice", events.UserToken("alice"), store.StreamPosition{}, store.RiverJobs{})
		forgot <- err
	}()
	holder := backendPID(t, hold)
	var forgetPID int
	eventstest.Eventually(t, "the forget to wait for the held turn", 30*time.Second, func() (bool, string) {
		forgetPID = waiterOf(t, st, "transactionid", holder)
		return forgetPID != 0, ""
	})

	updated := make(chan error, 1)
	go func() {
		a := "Fido"
		_, err := h.client.UpdateContext(context.Background(), events.ContextUpdateRequest{UserID: "alice", ID: ids[0], Answer: &a})
		updated <- err
	}()
	eventstest.Eventually(t, "the update to wait for the forget", 30*time.Second, func() (bool, string) {
		select {
		case err := <-updated:
			t.Fatalf("the update answered (%v) while a forget of the user was in progress", err)
		default:
		}
		return waiterOf(t, st, "advisory", forgetPID) != 0, ""
	})
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-forgot; err != nil {
		t.Fatal(err)
	}
	if err := <-updated; serviceCode(err) != 404 {
		t.Fatalf("update after the forget: %v, want 404", err)
	}
	var clears int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM context_clears WHERE user_id = 'alice'`).Scan(&clears); err != nil || clears != 0 {
		t.Errorf("alice has %d context clears after the forget (%v), want 0", clears, err)
	}
}
