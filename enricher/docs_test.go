package enricher_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

const manual = `# Install

## Linux

Run the installer with sudo. The penguin package needs glibc.

## Windows

Double-click the setup program. Reboot afterwards.

# Usage

Start the daemon and open the dashboard in a browser.
`

func svcCode(err error) int {
	var se *events.ServiceError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

func TestDocsEndpoints(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	ctx := ctxT(t)
	c := h.client

	r, err := c.PutDocument(ctx, events.DocsPutRequest{UserID: "alice", Collection: "manuals", Source: "guide.md", Content: manual,
		Metadata: []byte(`{"team":"ops"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if r.DocID != "guide.md" || r.Unchanged || !r.Searchable || r.Status != events.DocReady || r.Chunks != 3 || r.JobID != 0 {
		t.Fatalf("put = %+v", r)
	}
	again, err := c.PutDocument(ctx, events.DocsPutRequest{UserID: "alice", Collection: "manuals", Source: "guide.md", Content: manual})
	if err != nil || !again.Unchanged || again.Hash != r.Hash || !again.Searchable {
		t.Fatalf("re-put = %+v, %v", again, err)
	}
	s, err := c.SearchDocuments(ctx, events.DocsSearchRequest{UserID: "alice", Query: "what does the penguin package need?"})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Chunks) == 0 {
		t.Fatal("no chunk found")
	}
	top := s.Chunks[0]
	if top.Collection != "manuals" || top.DocID != "guide.md" || top.Source != "guide.md" || top.ChunkIndex != 0 ||
		!slices.Equal(top.HeadingPath, []string{"Install", "Linux"}) || manual[top.Start:top.End] != top.Text ||
		!(top.Score > 0 && top.Score < 1) {
		t.Fatalf("top chunk = %+v", top)
	}
	for i := 1; i < len(s.Chunks); i++ {
		if s.Chunks[i].Score > s.Chunks[i-1].Score {
			t.Fatalf("chunks not best first: %+v", s.Chunks)
		}
	}
	// A threshold over the best score leaves nothing.
	over := top.Score + 0.01
	if s, err := c.SearchDocuments(ctx, events.DocsSearchRequest{UserID: "alice", Query: "penguin package", Threshold: &over}); err != nil || len(s.Chunks) != 0 {
		t.Fatalf("threshold %v: %+v, %v", over, s, err)
	}
	l, err := c.ListDocuments(ctx, events.DocsListRequest{UserID: "alice", Collection: "manuals"})
	if err != nil || len(l.Documents) != 1 || l.Next != "" || l.Documents[0].Status != events.DocReady ||
		l.Documents[0].Size != int64(len(manual)) || !strings.Contains(strings.ReplaceAll(string(l.Documents[0].Metadata), " ", ""), `"team":"ops"`) {
		t.Fatalf("list = %+v, %v", l, err)
	}
	d, err := c.DeleteDocument(ctx, events.DocsDeleteRequest{UserID: "alice", Collection: "manuals", DocID: "guide.md"})
	if err != nil || !d.Deleted {
		t.Fatalf("delete = %+v, %v", d, err)
	}
	if s, err := c.SearchDocuments(ctx, events.DocsSearchRequest{UserID: "alice", Query: "penguin"}); err != nil || len(s.Chunks) != 0 {
		t.Fatalf("after delete: %+v, %v", s, err)
	}
	if _, err := c.ListDocuments(ctx, events.DocsListRequest{UserID: "alice", Collection: "nope"}); svcCode(err) != 404 || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("list of a missing collection: %v", err)
	}
}

func TestDocsEndpointsRejectBadInput(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, func(c *enricher.Config) { c.MaxDocumentBytes = 1000 })
	ctx := ctxT(t)
	for name, req := range map[string]events.DocsPutRequest{
		"too large":        {UserID: "alice", Collection: "c", DocID: "d", Content: strings.Repeat("x", 1001)},
		"no collection":    {UserID: "alice", DocID: "d", Content: "x"},
		"bad collection":   {UserID: "alice", Collection: "a/b", DocID: "d", Content: "x"},
		"no id":            {UserID: "alice", Collection: "c", Content: "x"},
		"negative overlap": {UserID: "alice", Collection: "c", DocID: "d", Content: "x", OverlapTokens: -1},
		"metadata":         {UserID: "alice", Collection: "c", DocID: "d", Content: "x", Metadata: []byte(`"s"`)},
		"chunk tokens":     {UserID: "alice", Collection: "c", DocID: "d", Content: "x", ChunkTokens: 3},
		"nul":              {UserID: "alice", Collection: "c", DocID: "d", Content: "a\x00"},
	} {
		if _, err := h.client.PutDocument(ctx, req); svcCode(err) != 400 {
			t.Errorf("%s: %v, want a 400", name, err)
		}
	}
	// The body's user must be the subject's.
	msg := h.raw(t, h.prefix+".docs.put.bob", mustJSON(t, events.DocsPutRequest{UserID: "alice", Collection: "c", DocID: "d", Content: "x"}))
	if code, _ := errorCode(t, msg); code != 400 {
		t.Fatalf("alice's put on bob's subject: code %d", code)
	}
	if cs, err := st.Collections(ctx, store.Owner{User: "alice"}); err != nil || len(cs) != 0 {
		t.Fatalf("rejected puts left %+v (%v)", cs, err)
	}
}

func TestDocsSharedCollections(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	ctx := ctxT(t)
	c := h.client
	for _, p := range []events.DocsPutRequest{
		{UserID: "alice", Collection: "notes", DocID: "a", Content: "alice feeds the zebra"},
		{UserID: "bob", Collection: "notes", DocID: "b", Content: "bob feeds the zebra"},
		{UserID: "team-x", Shared: true, Collection: "handbook", DocID: "h", Content: "the team zebra policy"},
	} {
		if _, err := c.PutDocument(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	found := func(req events.DocsSearchRequest) []string {
		t.Helper()
		req.Query = "zebra"
		r, err := c.SearchDocuments(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ch := range r.Chunks {
			out = append(out, ch.Collection+":"+ch.DocID)
		}
		slices.Sort(out)
		return out
	}
	if got := found(events.DocsSearchRequest{UserID: "alice"}); !slices.Equal(got, []string{"notes:a"}) {
		t.Fatalf("alice without a grant: %v", got)
	}
	if _, err := c.SearchDocuments(ctx, events.DocsSearchRequest{UserID: "alice", Query: "zebra", Collections: []string{"team-x/handbook"}}); svcCode(err) != 404 {
		t.Fatalf("alice named the shared collection without a grant: %v", err)
	}
	for _, u := range []string{"alice", "bob"} {
		if _, err := st.GrantReader(ctx, "team-x", u); err != nil {
			t.Fatal(err)
		}
	}
	if got := found(events.DocsSearchRequest{UserID: "alice"}); !slices.Equal(got, []string{"notes:a", "team-x/handbook:h"}) {
		t.Fatalf("alice: %v", got)
	}
	if got := found(events.DocsSearchRequest{UserID: "bob", Collections: []string{"team-x/handbook"}}); !slices.Equal(got, []string{"team-x/handbook:h"}) {
		t.Fatalf("bob: %v", got)
	}
	if got := found(events.DocsSearchRequest{UserID: "team-x", Shared: true}); !slices.Equal(got, []string{"handbook:h"}) {
		t.Fatalf("the scope: %v", got)
	}
	// The scope named in the body must be the subject's: a shared
	// subject's permission covers that scope only.
	msg := h.raw(t, h.prefix+".shared.docs.put.team-x", mustJSON(t, events.DocsPutRequest{UserID: "team-y", Collection: "handbook", DocID: "x", Content: "x"}))
	if code, _ := errorCode(t, msg); code != 400 {
		t.Fatalf("another scope's put on team-x's subject: code %d", code)
	}
}

// TestDocsLargePutEnqueues checks that a document over InlineChunkBytes is
// stored pending with its job enqueued in the put's transaction: the
// indexer sees the pending row in that transaction.
func TestDocsLargePutEnqueues(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	var seen []string
	h := start(t, st, func(c *enricher.Config) {
		c.InlineChunkBytes = 100
		c.DocIndexer = func(ctx context.Context, tx pgx.Tx, collectionID int64, docID, hash string) (int64, error) {
			var status string
			if err := tx.QueryRow(ctx, `SELECT status FROM documents WHERE collection_id = $1 AND doc_id = $2 AND content_hash = $3`,
				collectionID, docID, hash).Scan(&status); err != nil {
				return 0, err
			}
			seen = append(seen, docID+":"+status)
			return 42, nil
		}
	})
	ctx := ctxT(t)
	r, err := h.client.PutDocument(ctx, events.DocsPutRequest{UserID: "alice", Collection: "c", DocID: "big", Content: manual})
	if err != nil {
		t.Fatal(err)
	}
	if r.Searchable || r.Status != events.DocPending || r.JobID != 42 || !slices.Equal(seen, []string{"big:pending"}) {
		t.Fatalf("large put = %+v, indexer saw %v", r, seen)
	}
	small, err := h.client.PutDocument(ctx, events.DocsPutRequest{UserID: "alice", Collection: "c", DocID: "small", Content: "tiny"})
	if err != nil || !small.Searchable || small.JobID != 0 || len(seen) != 1 {
		t.Fatalf("small put = %+v, %v (indexer saw %v)", small, err, seen)
	}
	// Put again while still pending (its job may be lost: it ran out of
	// attempts), the same content gets its job again; a ready document's
	// does not.
	again, err := h.client.PutDocument(ctx, events.DocsPutRequest{UserID: "alice", Collection: "c", DocID: "big", Content: manual})
	if err != nil || !again.Unchanged || again.Status != events.DocPending || again.JobID != 42 || !slices.Equal(seen, []string{"big:pending", "big:pending"}) {
		t.Fatalf("pending document put again = %+v, %v (indexer saw %v); want unchanged, its job enqueued again", again, err, seen)
	}
	if again, err := h.client.PutDocument(ctx, events.DocsPutRequest{UserID: "alice", Collection: "c", DocID: "small", Content: "tiny"}); err != nil || !again.Unchanged || again.JobID != 0 || len(seen) != 2 {
		t.Fatalf("ready document put again = %+v, %v (indexer saw %v)", again, err, seen)
	}
	// A failing enqueue rolls the put back.
	h2 := start(t, st, func(c *enricher.Config) {
		c.InlineChunkBytes = 100
		c.DocIndexer = func(context.Context, pgx.Tx, int64, string, string) (int64, error) {
			return 0, errors.New("queue down")
		}
	})
	if _, err := h2.client.PutDocument(ctx, events.DocsPutRequest{UserID: "alice", Collection: "c", DocID: "lost", Content: manual}); svcCode(err) != 500 {
		t.Fatalf("put with a failing enqueue: %v", err)
	}
	l, err := h.client.ListDocuments(ctx, events.DocsListRequest{UserID: "alice", Collection: "c"})
	if err != nil || len(l.Documents) != 2 {
		t.Fatalf("list = %+v, %v (want big and small only)", l, err)
	}
}

// TestDocsCapOverNATS checks the documents cap (Config.MaxDocsSize) over
// NATS: a put that would go over it is a 507 whose description names the
// cap and the sizes, and writes nothing; a large put is refused at put
// time, before its chunking job is enqueued.
func TestDocsCapOverNATS(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	enqueued := 0
	h := start(t, st, func(c *enricher.Config) {
		c.MaxDocsSize = int64(len(manual)) + 5
		c.InlineChunkBytes = 100
		c.DocIndexer = func(context.Context, pgx.Tx, int64, string, string) (int64, error) {
			enqueued++
			return 7, nil
		}
	})
	ctx := ctxT(t)
	if _, err := h.client.PutDocument(ctx, events.DocsPutRequest{UserID: "alice", Collection: "c", DocID: "small", Content: "A small note."}); err != nil {
		t.Fatal(err)
	}
	_, err := h.client.PutDocument(ctx, events.DocsPutRequest{UserID: "alice", Collection: "c", DocID: "big", Content: manual})
	var se *events.ServiceError
	if !errors.As(err, &se) || se.Code != 507 || !strings.Contains(se.Description, "documents cap") ||
		!strings.Contains(se.Description, "--max-docs-size") || !strings.Contains(se.Description, fmt.Sprint(len(manual)+5)) ||
		!strings.Contains(se.Description, fmt.Sprint(len(manual))) {
		t.Fatalf("put over the cap: %v; want a 507 naming the cap and the document's size", err)
	}
	// Nor what every owner's documents would take together: the cap is
	// shared, and the total would tell alice what the others store.
	if total := len("A small note.") + len(manual); strings.Contains(se.Description, fmt.Sprint(total)) {
		t.Fatalf("put over the cap: %q reveals the documents' total %d", se.Description, total)
	}
	l, err := h.client.ListDocuments(ctx, events.DocsListRequest{UserID: "alice", Collection: "c"})
	if err != nil || len(l.Documents) != 1 || enqueued != 0 {
		t.Fatalf("after the refused put: %+v, %v, %d job(s) enqueued; want the small document only, no job", l, err, enqueued)
	}
	// Room made by a delete lets the large put through, as a job.
	if _, err := h.client.DeleteDocument(ctx, events.DocsDeleteRequest{UserID: "alice", Collection: "c", DocID: "small"}); err != nil {
		t.Fatal(err)
	}
	r, err := h.client.PutDocument(ctx, events.DocsPutRequest{UserID: "alice", Collection: "c", DocID: "big", Content: manual})
	if err != nil || r.JobID != 7 || enqueued != 1 {
		t.Fatalf("put within the cap: %+v, %v", r, err)
	}
}

// TestDocsPutRefusesALargeDocumentOfHeadingsOnly: a document over
// InlineChunkBytes (chunked by a job) of headings and front matter only is
// refused at put time with the 400 a small one gets, nothing written and
// no job enqueued. Before, it was stored pending, its put answered ok,
// and its job marked it ready with no chunk: none of its words was ever
// found.
func TestDocsPutRefusesALargeDocumentOfHeadingsOnly(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	enqueued := 0
	h := start(t, st, func(c *enricher.Config) {
		c.InlineChunkBytes = 100
		c.DocIndexer = func(context.Context, pgx.Tx, int64, string, string) (int64, error) {
			enqueued++
			return 42, nil
		}
	})
	ctx := ctxT(t)
	var outline strings.Builder
	outline.WriteString("---\ntitle: Outline\n---\n")
	for i := range 40 {
		fmt.Fprintf(&outline, "# Part %d\n\n## Chapter %d.1\n\n", i, i)
	}
	r, err := h.client.PutDocument(ctx, events.DocsPutRequest{UserID: "alice", Collection: "c", DocID: "outline.md", Content: outline.String()})
	if svcCode(err) != 400 || !strings.Contains(err.Error(), "no text outside its headings") {
		t.Fatalf("put of a %d byte document of headings only = %+v, %v; want a 400 saying it has no text outside its headings", outline.Len(), r, err)
	}
	if enqueued != 0 {
		t.Errorf("the refused put enqueued %d jobs", enqueued)
	}
	if _, err := h.client.ListDocuments(ctx, events.DocsListRequest{UserID: "alice", Collection: "c"}); svcCode(err) != 404 {
		t.Errorf("after the refused put, listing its collection: %v; want a 404 (nothing written)", err)
	}
	// With a line of text it is put, pending its job.
	r, err = h.client.PutDocument(ctx, events.DocsPutRequest{UserID: "alice", Collection: "c", DocID: "outline.md", Content: outline.String() + "One line.\n"})
	if err != nil || r.Status != events.DocPending || enqueued != 1 {
		t.Fatalf("put with a line of text = %+v, %v (%d jobs); want pending with its job", r, err, enqueued)
	}
}
