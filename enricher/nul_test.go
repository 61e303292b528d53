package enricher_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestNULInRequestFields: Postgres text cannot hold NUL, so a request
// string that reaches it with one is a 400 naming the field, never a 500
// "memory store unavailable", a degraded enrich or an empty search.
// The message and queries, which are only searched for, keep working.
func TestNULInRequestFields(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, func(c *enricher.Config) {
		c.Forget = func(context.Context, string) (events.ForgetReply, error) { return events.ForgetReply{}, nil }
	})
	const nulUser = "nul\u0000user"
	nulTok := events.UserToken(nulUser)
	// u has memory and a collection, so that every query reaches rows.
	insertContext(t, st, store.ContextWrite{UserID: "u", Question: "q", Answer: "dog", CreatedAt: t0})
	if _, err := h.client.PutDocument(ctxT(t), events.DocsPutRequest{UserID: "u", Collection: "c", DocID: "d", Content: "x"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		// field "": answered; "-": answered or refused, not a server
		// error (a NUL there can match nothing stored).
		endpoint, token, body, field string
	}{
		// user_id on every endpoint.
		{"enrich", nulTok, `{"user_id":"nul\u0000user","message":"dog"}`, "user_id"},
		{"search", nulTok, `{"user_id":"nul\u0000user","query":"dog"}`, "user_id"},
		{"store", nulTok, `{"user_id":"nul\u0000user","question":"q","answer":"a"}`, "user_id"},
		{"clear", nulTok, `{"user_id":"nul\u0000user","all":true}`, "user_id"},
		{"facts.set", nulTok, `{"user_id":"nul\u0000user","key":"k","value":"v"}`, "user_id"},
		{"facts.get", nulTok, `{"user_id":"nul\u0000user","key":"k"}`, "user_id"},
		{"facts.clear", nulTok, `{"user_id":"nul\u0000user","key":"k"}`, "user_id"},
		{"facts.list", nulTok, `{"user_id":"nul\u0000user"}`, "user_id"},
		{"facts.history", nulTok, `{"user_id":"nul\u0000user","key":"k"}`, "user_id"},
		{"stats", nulTok, `{"user_id":"nul\u0000user"}`, "user_id"},
		{"forget", nulTok, `{"user_id":"nul\u0000user"}`, "user_id"},
		{"context.list", nulTok, `{"user_id":"nul\u0000user"}`, "user_id"},
		{"context.get", nulTok, `{"user_id":"nul\u0000user","id":1}`, "user_id"},
		{"context.delete", nulTok, `{"user_id":"nul\u0000user","id":1}`, "user_id"},
		{"context.update", nulTok, `{"user_id":"nul\u0000user","id":1,"answer":"a"}`, "user_id"},
		{"export", nulTok, `{"user_id":"nul\u0000user"}`, "user_id"},
		{"import", nulTok, `{"user_id":"nul\u0000user","lines":[{"memoryd_export":1}]}`, "user_id"},
		{"language", nulTok, `{"user_id":"nul\u0000user"}`, "user_id"},
		{"docs.put", nulTok, `{"user_id":"nul\u0000user","collection":"c","doc_id":"d","content":"x"}`, "user_id"},
		{"docs.delete", nulTok, `{"user_id":"nul\u0000user","collection":"c","doc_id":"d"}`, "user_id"},
		{"docs.list", nulTok, `{"user_id":"nul\u0000user","collection":"c"}`, "user_id"},
		{"docs.search", nulTok, `{"user_id":"nul\u0000user","query":"x"}`, "user_id"},
		{"docs.defaults", nulTok, `{"user_id":"nul\u0000user"}`, "user_id"},
		{"shared.docs.list", "team", `{"user_id":"te\u0000am","collection":"c"}`, "user_id"},
		// The other strings that reach Postgres.
		{"enrich", "u", `{"user_id":"u","message":"dog","scope":"s\u0000"}`, "scope"},
		{"enrich", "u", `{"user_id":"u","message":"dog","collections":["c\u0000"]}`, "collection"},
		{"search", "u", `{"user_id":"u","query":"dog","scope":"s\u0000"}`, "scope"},
		{"clear", "u", `{"user_id":"u","question":"q\u0000"}`, "-"},
		{"facts.set", "u", `{"user_id":"u","key":"k\u0000","value":"v"}`, "key"},
		{"facts.set", "u", `{"user_id":"u","key":"k","value":"v\u0000"}`, "value"},
		{"facts.get", "u", `{"user_id":"u","key":"k\u0000"}`, "key"},
		{"facts.clear", "u", `{"user_id":"u","key":"k\u0000"}`, "key"},
		{"facts.history", "u", `{"user_id":"u","key":"k\u0000"}`, "key"},
		{"facts.list", "u", `{"user_id":"u","after":{"source_at":"2026-01-01T00:00:00Z","key":"a\u0000"}}`, "after"},
		{"context.list", "u", `{"user_id":"u","scope":"s\u0000"}`, "scope"},
		{"context.update", "u", `{"user_id":"u","id":1,"question":"q\u0000"}`, "question"},
		{"export", "u", `{"user_id":"u","cursor":"c\u0000"}`, "-"},
		{"import", "u", `{"user_id":"u","lines":[{"memoryd_export":1},{"type":"fact","key":"k\u0000","value":"v"}]}`, "line"},
		{"language", "u", `{"user_id":"u","language":"e\u0000n"}`, "language"},
		{"docs.put", "u", `{"user_id":"u","collection":"c\u0000","doc_id":"d","content":"x"}`, "collection"},
		{"docs.put", "u", `{"user_id":"u","collection":"c","doc_id":"d\u0000","content":"x"}`, "doc_id"},
		{"docs.put", "u", `{"user_id":"u","collection":"c","source":"s\u0000","content":"x"}`, "source"},
		{"docs.put", "u", `{"user_id":"u","collection":"c","doc_id":"d2","content":"x","metadata":{"a":"\u0000"}}`, "metadata"},
		{"docs.delete", "u", `{"user_id":"u","collection":"c","doc_id":"d\u0000"}`, "doc_id"},
		{"docs.list", "u", `{"user_id":"u","collection":"c","after":"a\u0000"}`, "after"},
		{"docs.search", "u", `{"user_id":"u","query":"x","collections":["c\u0000"]}`, "-"},
		{"docs.search", "u", `{"user_id":"u","query":"x","collections":["team/c\u0000"]}`, "-"},
		{"docs.defaults", "u", `{"user_id":"u","collections":["c\u0000"]}`, "-"},
		// Searched for only: NUL is a separator.
		{"enrich", "u", `{"user_id":"u","message":"dog\u0000cat"}`, ""},
		{"search", "u", `{"user_id":"u","query":"dog\u0000cat"}`, ""},
		{"docs.search", "u", `{"user_id":"u","query":"dog\u0000cat"}`, ""},
	}
	for _, tt := range tests {
		msg := h.raw(t, h.prefix+"."+tt.endpoint+"."+tt.token, []byte(tt.body))
		code, desc := errorCode(t, msg)
		if tt.field == "-" {
			if code >= 500 {
				t.Errorf("%s %s: code %d %q; want no server error", tt.endpoint, tt.body, code, desc)
			}
			continue
		}
		if tt.field == "" {
			var r events.EnrichReply
			if code != 0 || json.Unmarshal(msg.Data, &r) != nil || r.Degraded {
				t.Errorf("%s %s: code %d %q, reply %s; want it answered", tt.endpoint, tt.body, code, desc, msg.Data)
			}
			continue
		}
		if code != 400 || !strings.Contains(desc, tt.field) {
			t.Errorf("%s %s: code %d %q, reply %s; want 400 naming %s", tt.endpoint, tt.body, code, desc, msg.Data, tt.field)
		}
	}
}
