package enricher_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// handbook is a small Markdown document: the TLS section is the one a
// question about certificates should find.
const handbook = `# Handbook

## Install

Run the installer and follow the prompts on screen.

## Security

### TLS

Connections are encrypted with TLS; point the client at the certificate authority file with the ca option.

### Passwords

Passwords are hashed with bcrypt before they are stored.
`

func putDoc(t *testing.T, st *store.Store, o store.Owner, collection, source, content string) {
	t.Helper()
	if _, err := st.PutDocument(ctxT(t), store.DocumentPut{Owner: o, Collection: collection, Source: source, Content: content, Chunk: enricher.ChunkDocument}); err != nil {
		t.Fatal(err)
	}
}

// TestEnrichDocumentsCited: a chunk of a document in a collection the
// request names comes back in documents with its provenance, and its
// citation is in the injection of every format; memories and facts stay.
func TestEnrichDocumentsCited(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	putDoc(t, st, store.Owner{User: "alice"}, "kb", "handbook.md", handbook)
	upsertFacts(t, st, store.FactWrite{UserID: "alice", Key: "name", Value: "Alice", SourceAt: t0})
	h := start(t, st, nil)
	want := map[string]string{
		events.FormatInline:   "[1] handbook.md › Handbook › Security › TLS, chunk 1: Connections are encrypted",
		events.FormatSystem:   "(source: [1] handbook.md › Handbook › Security › TLS, chunk 1)",
		events.FormatMarkdown: "### Citations\n- [1] handbook.md › Handbook › Security › TLS, chunk 1",
	}
	for _, format := range []string{events.FormatInline, events.FormatSystem, events.FormatMarkdown} {
		r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: "which certificate authority file do TLS connections use?", Format: format, Collections: []string{"kb"}})
		if r.Degraded || len(r.Documents) == 0 {
			t.Fatalf("%s: %+v", format, r)
		}
		d := r.Documents[0]
		if d.Citation != 1 || d.Collection != "kb" || d.DocumentID != "handbook.md" || d.Source != "handbook.md" ||
			!slices.Equal(d.HeadingPath, []string{"Handbook", "Security", "TLS"}) || d.ChunkIndex != 1 || !strings.Contains(d.Text, "certificate authority") || d.Score <= 0 {
			t.Errorf("%s: first chunk %+v", format, d)
		}
		if !strings.Contains(r.Injection, want[format]) {
			t.Errorf("%s: injection lacks %q:\n%s", format, want[format], r.Injection)
		}
		if len(r.Facts) != 1 || r.Tokens > events.DefaultMaxTokens {
			t.Errorf("%s: facts %v, tokens %d", format, r.Facts, r.Tokens)
		}
	}
}

// TestEnrichDocumentsAccess: bob cannot have alice's private collection
// (a 400, as for one that does not exist); both read a shared one they
// are granted; a request without collections has no documents field.
func TestEnrichDocumentsAccess(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	putDoc(t, st, store.Owner{User: "alice"}, "kb", "handbook.md", handbook)
	putDoc(t, st, store.Owner{Shared: "team"}, "wiki", "wiki.md", handbook)
	for _, u := range []string{"alice", "bob"} {
		if _, err := st.GrantReader(ctxT(t), "team", u); err != nil {
			t.Fatal(err)
		}
	}
	h := start(t, st, nil)
	msg := "certificate authority for TLS?"
	for _, c := range []string{"kb", "nope"} {
		body := mustJSON(t, events.EnrichRequest{UserID: "bob", Message: msg, Collections: []string{c}})
		if code, desc := errorCode(t, h.raw(t, h.client.Subject("enrich", "bob"), body)); code != 400 || desc != fmt.Sprintf("collections: no collection %q (or not readable by this user)", c) {
			t.Errorf("bob reading %q: code %d %q, want 400 naming the collection and nothing else", c, code, desc)
		}
	}
	for _, u := range []string{"alice", "bob"} {
		r := enrich(t, h, events.EnrichRequest{UserID: u, Message: msg, Collections: []string{"team/wiki"}})
		if len(r.Documents) == 0 || r.Documents[0].Collection != "team/wiki" || r.Documents[0].Source != "wiki.md" {
			t.Errorf("%s reading team/wiki: %+v", u, r.Documents)
		}
	}
	raw := h.raw(t, h.client.Subject("enrich", "alice"), mustJSON(t, events.EnrichRequest{UserID: "alice", Message: msg}))
	if bytes.Contains(raw.Data, []byte(`"documents"`)) {
		t.Errorf("no collections, yet documents: %s", raw.Data)
	}
	var r events.EnrichReply
	raw = h.raw(t, h.client.Subject("enrich", "alice"), mustJSON(t, events.EnrichRequest{UserID: "alice", Message: "bananas", Collections: []string{"kb"}}))
	if err := json.Unmarshal(raw.Data, &r); err != nil || r.Documents == nil || len(r.Documents) != 0 {
		t.Errorf("nothing matching: want documents [], got %s", raw.Data)
	}
}

// TestEnrichDocumentsBadRequest: the documents fields are checked.
func TestEnrichDocumentsBadRequest(t *testing.T) {
	t.Parallel()
	h := start(t, storetest.New(t), nil)
	zero, two := 0, 1.5
	for name, req := range map[string]events.EnrichRequest{
		"docs_max_results":             {DocsMaxResults: &zero, Collections: []string{"kb"}},
		"docs_threshold":               {DocsThreshold: &two, Collections: []string{"kb"}},
		"collections: a name is empty": {Collections: []string{" "}},
		"over the limit":               {Collections: slices.Repeat([]string{"kb"}, events.MaxEnrichCollections+1)},
	} {
		req.UserID, req.Message = "alice", "hello there"
		if code, desc := errorCode(t, h.raw(t, h.client.Subject("enrich", "alice"), mustJSON(t, req))); code != 400 || !strings.Contains(desc, name) {
			t.Errorf("%s: code %d %q", name, code, desc)
		}
	}
}

// TestEnrichDefaultCollections: a user sets default collections over
// memory.docs.defaults; an enrich without a collections field then gets
// their chunks, one with "collections":[] gets none (and no documents
// field); a name the user may not read is a 404 that changes nothing; a
// revoked grant drops the shared default; an empty list clears them.
func TestEnrichDefaultCollections(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	putDoc(t, st, store.Owner{User: "alice"}, "kb", "handbook.md", handbook)
	putDoc(t, st, store.Owner{User: "bob"}, "private", "bob.md", handbook)
	putDoc(t, st, store.Owner{Shared: "team"}, "wiki", "wiki.md", handbook)
	if _, err := st.GrantReader(ctxT(t), "team", "alice"); err != nil {
		t.Fatal(err)
	}
	h := start(t, st, nil)
	ctx := ctxT(t)
	msg := "certificate authority for TLS?"
	ten := 10
	sources := func(r events.EnrichReply) []string {
		var out []string
		for _, d := range r.Documents {
			if !slices.Contains(out, d.Collection) {
				out = append(out, d.Collection)
			}
		}
		slices.Sort(out)
		return out
	}
	if r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: msg}); r.Documents != nil {
		t.Fatalf("no defaults yet, documents %+v", r.Documents)
	}
	got, err := h.client.DocDefaults(ctx, events.DocsDefaultsRequest{UserID: "alice", Collections: []string{"team/wiki", "kb", "kb"}})
	if err != nil || !slices.Equal(got.Collections, []string{"team/wiki", "kb"}) {
		t.Fatalf("set defaults = %+v, %v", got, err)
	}
	// The 404 names which one, as enrich's 400 does: the CLI prints
	// only this description.
	if _, err := h.client.DocDefaults(ctx, events.DocsDefaultsRequest{UserID: "alice", Collections: []string{"kb", "private"}}); svcCode(err) != 404 ||
		!strings.Contains(err.Error(), `no collection "private"`) {
		t.Fatalf("defaults naming an unreadable collection: %v, want a 404 naming \"private\"", err)
	}
	if got, err := h.client.DocDefaults(ctx, events.DocsDefaultsRequest{UserID: "alice"}); err != nil || !slices.Equal(got.Collections, []string{"team/wiki", "kb"}) {
		t.Fatalf("read defaults after a refused set = %+v, %v", got, err)
	}
	if r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: msg, DocsMaxResults: &ten}); !slices.Equal(sources(r), []string{"kb", "team/wiki"}) {
		t.Fatalf("enrich without collections read %v, want the defaults", sources(r))
	}
	raw := h.raw(t, h.client.Subject("enrich", "alice"), []byte(`{"user_id":"alice","message":"certificate authority for TLS?","collections":[]}`))
	if bytes.Contains(raw.Data, []byte(`"documents"`)) {
		t.Fatalf("collections [] opts out, yet documents: %s", raw.Data)
	}
	if r := enrich(t, h, events.EnrichRequest{UserID: "bob", Message: msg}); r.Documents != nil {
		t.Fatalf("bob has no defaults, yet documents %+v", r.Documents)
	}
	if ok, err := st.RevokeReader(ctx, "team", "alice"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: msg, DocsMaxResults: &ten}); !slices.Equal(sources(r), []string{"kb"}) {
		t.Fatalf("after the revoke enrich read %v, want [kb]", sources(r))
	}
	if got, err := h.client.DocDefaults(ctx, events.DocsDefaultsRequest{UserID: "alice", Collections: []string{}}); err != nil || len(got.Collections) != 0 || got.Collections == nil {
		t.Fatalf("clear defaults = %+v, %v", got, err)
	}
	if r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: msg}); r.Documents != nil {
		t.Fatalf("defaults cleared, yet documents %+v", r.Documents)
	}
}

// A document search that does not answer in time (its tables locked, as
// by the VACUUM FULL operations.md describes for reclaiming documents'
// space) leaves the documents out of the reply, which keeps the facts and
// memories already read, degraded and saying why. Before, the whole reply
// was degraded and empty: every user with default collections got no
// memory while the tables were locked.
func TestEnrichKeepsMemoriesWhenDocumentsTimeOut(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	putDoc(t, st, store.Owner{User: "alice"}, "kb", "handbook.md", handbook)
	upsertFacts(t, st, store.FactWrite{UserID: "alice", Key: "name", Value: "Alice", SourceAt: t0})
	if _, err := st.InsertContext(ctxT(t), []store.ContextWrite{{UserID: "alice", Question: "which certificate do I use for TLS?", Answer: "the company CA", CreatedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	h := start(t, st, func(c *enricher.Config) { c.Timeout = 2 * time.Second })
	req := events.EnrichRequest{UserID: "alice", Message: "which certificate authority file do TLS connections use?", Collections: []string{"kb"}}

	// A connection of the test's own, outside the store's small pool.
	conn, err := pgx.Connect(ctxT(t), storetest.URL(t, st))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctxT(t), `LOCK TABLE doc_chunks IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	r := enrich(t, h, req)
	if !r.Degraded || !strings.Contains(r.Reason, "document search") || len(r.Facts) != 1 || len(r.Context) != 1 || len(r.Documents) != 0 {
		t.Errorf("with the documents' table locked: degraded %v (%q), %d facts, %d memories, %d documents; want the facts and the memory, no documents, degraded saying why",
			r.Degraded, r.Reason, len(r.Facts), len(r.Context), len(r.Documents))
	}
	if !strings.Contains(r.Injection, "Alice") || !strings.Contains(r.Injection, "company CA") {
		t.Errorf("injection lacks the fact or the memory:\n%s", r.Injection)
	}
	if err := tx.Rollback(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if r := enrich(t, h, req); r.Degraded || len(r.Documents) == 0 {
		t.Errorf("after the lock: degraded %v (%q), %d documents", r.Degraded, r.Reason, len(r.Documents))
	}
}
