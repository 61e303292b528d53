package enricher_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// Replies over the NATS server's max_payload (1 MiB by default) were never
// sent: the requester timed out. These tests build memory whose replies
// would exceed it and assert that every endpoint answers, within a bounded
// wait, with the reply cut to fit or a clear error.

// quick bounds one request: silence is the bug. Not the client's default
// 5 s: a reply near a megabyte, measured and encoded to fit (3 to 6
// times its size since each item is encoded once; 10 to 16 before), takes
// seconds under -race on a loaded 2-core CI machine (a facts.history page
// 0.7 to 5.2 s at load average 16 before, and past 5 s in a CI run),
// against milliseconds without the race detector.
func quick(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestHTMLRepliesAreNotEscaped: one item of 200 KB of "<>" (1.2 MB with
// \u003c escapes) is answered by every endpoint that shows it, its text
// intact, and the reply holds "<" as itself.
func TestHTMLRepliesAreNotEscaped(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	html := strings.Repeat("<>", 100000)
	stored, err := h.client.Store(quick(t), events.StoreRequest{UserID: "alice", Question: "tags for the quokka page", Answer: html})
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.client.GetContext(quick(t), "alice", stored.ID)
	if err != nil || got.Answer != html {
		t.Fatalf("context.get: %d bytes, %v", len(got.Answer), err)
	}
	msg := h.rawCtx(quick(t), t, h.prefix+".search.alice", mustJSON(t, events.SearchRequest{UserID: "alice", Query: "quokka"}))
	if code, desc := errorCode(t, msg); code != 0 || !bytes.Contains(msg.Data, []byte("<><>")) || bytes.Contains(msg.Data, []byte(`\u003c`)) {
		t.Fatalf("search: %d %s, %d bytes, want < unescaped", code, desc, len(msg.Data))
	}
	list, err := h.client.ListContext(quick(t), events.ContextListRequest{UserID: "alice"})
	if err != nil || len(list.Items) != 1 || list.Items[0].Answer != html {
		t.Fatalf("context.list: %d items, %v", len(list.Items), err)
	}
	big := 100000
	r, err := h.client.Enrich(quick(t), events.EnrichRequest{UserID: "alice", Message: "quokka tags", MaxTokens: &big})
	if err != nil || r.Degraded || len(r.Context) != 1 || r.Context[0].Answer != html {
		t.Fatalf("enrich: %d items, degraded %v (%s), %v", len(r.Context), r.Degraded, r.Reason, err)
	}
	var want, exported bytes.Buffer
	if err := st.Export(context.Background(), "alice", &want); err != nil {
		t.Fatal(err)
	}
	// The whole export's deadline, not a request's: a 1.2 MB item is
	// many pages, slow under -race on a busy machine.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.client.Export(ctx, "alice", &exported); err != nil || exported.String() != want.String() {
		t.Fatalf("export: %d bytes of %d, %v", exported.Len(), want.Len(), err)
	}
}

// TestLargeRepliesAreCutToFit: plain text over the limit in total: search
// leaves out the lowest-ranked results and says so, enrich fits its budget,
// and each paged endpoint ends its pages early so that a walk lists all.
func TestLargeRepliesAreCutToFit(t *testing.T) {
	t.Parallel()
	// Requests of megabytes under -race on a busy machine: slowCtx, not
	// quick (a CI run beside a migration walk timed out at 5s).
	st := storetest.New(t)
	h := start(t, st, nil)
	var writes []store.ContextWrite
	for i := range 8 {
		writes = append(writes, store.ContextWrite{UserID: "alice", Question: fmt.Sprintf("big item %d about okapi", i),
			Answer: fmt.Sprintf("okapi %d ", i) + strings.Repeat("w", 200000), CreatedAt: t0.Add(time.Duration(i) * time.Minute)})
	}
	insertContext(t, st, writes...)

	eight := 8
	found, err := h.client.Search(slowCtx(t), events.SearchRequest{UserID: "alice", Query: "okapi", MaxResults: &eight})
	if err != nil || len(found.Results) == 0 || len(found.Results) >= 8 || !found.Truncated {
		t.Fatalf("search: %d results, truncated %v, %v; want fewer than 8, truncated", len(found.Results), found.Truncated, err)
	}
	all, err := h.client.Search(slowCtx(t), events.SearchRequest{UserID: "alice", Query: "okapi", MaxResults: func() *int { n := len(found.Results); return &n }()})
	if err != nil || all.Truncated {
		t.Fatalf("search of as many as fit: truncated %v, %v", all.Truncated, err)
	}
	for i := range found.Results {
		if found.Results[i].ID != all.Results[i].ID {
			t.Fatalf("cut search result %d is item %d, want the best first (%d)", i, found.Results[i].ID, all.Results[i].ID)
		}
	}

	big := 100000
	r, err := h.client.Enrich(slowCtx(t), events.EnrichRequest{UserID: "alice", Message: "okapi", MaxTokens: &big, MaxResults: func() *int { n := 50; return &n }()})
	if err != nil || r.Degraded || len(r.Context) == 0 || len(r.Context) >= 8 {
		t.Fatalf("enrich: %d items, degraded %v (%s), %v; want some, not all 8", len(r.Context), r.Degraded, r.Reason, err)
	}

	var listed int
	var after *events.ContextCursor
	for pages := 1; ; pages++ {
		page, err := h.client.ListContext(slowCtx(t), events.ContextListRequest{UserID: "alice", Limit: &eight, After: after})
		if err != nil {
			t.Fatalf("context.list page %d: %v", pages, err)
		}
		if listed += len(page.Items); page.Next == nil {
			if pages == 1 || listed != 8 {
				t.Fatalf("context.list: %d items in %d pages, want 8 in several", listed, pages)
			}
			break
		}
		after = page.Next
	}

	// 150 facts of 8 KiB: 1.2 MB in one reply.
	var facts []store.FactWrite
	for i := range 150 {
		facts = append(facts, store.FactWrite{UserID: "alice", Key: fmt.Sprintf("big_fact_%03d", i), Value: strings.Repeat("v", 8192),
			SourceAt: t0.Add(time.Duration(i%3) * time.Second)})
	}
	upsertFacts(t, st, facts...)
	first := h.rawCtx(quick(t), t, h.prefix+".facts.list.alice", mustJSON(t, events.FactsListRequest{UserID: "alice"}))
	var page events.FactsReply
	if err := json.Unmarshal(first.Data, &page); err != nil || page.Next == nil || len(page.Facts) == 0 {
		t.Fatalf("facts.list first page: %d facts, next %v, %v", len(page.Facts), page.Next, err)
	}
	listedFacts, err := h.client.ListFacts(slowCtx(t), "alice")
	seen := map[string]bool{}
	for _, f := range listedFacts {
		seen[f.Key] = true
	}
	if err != nil || len(listedFacts) != 150 || len(seen) != 150 {
		t.Fatalf("facts.list walk: %d facts (%d keys), %v; want 150", len(listedFacts), len(seen), err)
	}
}

// TestSearchSkipsAnOversizedItem: an item too large for any reply by
// itself, ranked first, is left out of search's results alone: the
// results ranked below it still come (C frontend walk: the reply was
// empty, whatever max_results).
func TestSearchSkipsAnOversizedItem(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	insertContext(t, st,
		store.ContextWrite{UserID: "alice", Question: "zebra zebra zebra: the zebra control dump", Answer: strings.Repeat("\x01", 200000), CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: "what did the vet say?", Answer: "the zebra at the zoo has a cold, and the keepers give it honey and rest for a week or so", CreatedAt: t0})
	found, err := h.client.Search(quick(t), events.SearchRequest{UserID: "alice", Query: "zebra"})
	if err != nil || len(found.Results) != 1 || !strings.Contains(found.Results[0].Answer, "honey") || !found.Truncated {
		t.Fatalf("search with an oversized item first: %d results, truncated %v, %v; want the small item, truncated",
			len(found.Results), found.Truncated, err)
	}
}

// TestTooLargeAloneAnswers: an item too large for any reply by itself
// (text of control characters, 6 bytes each in JSON) is a 413 where it is
// asked for alone or heads a page, is left out of ranked results, and is
// split across export pages.
func TestTooLargeAloneAnswers(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	ctrl := strings.Repeat("\x01", 200000)
	// Stored as a turn's extraction would (a request this size could not
	// be sent over NATS either).
	id := insertContext(t, st, store.ContextWrite{UserID: "alice", Question: "the zebra control dump", Answer: ctrl, CreatedAt: t0})[0]
	_, err := h.client.GetContext(quick(t), "alice", id)
	if svcCode(err) != 413 || !strings.Contains(err.Error(), "max_payload") {
		t.Fatalf("context.get of a 1.2 MB item: %v, want a 413 naming max_payload", err)
	}
	_, err = h.client.ListContext(quick(t), events.ContextListRequest{UserID: "alice"})
	if svcCode(err) != 413 || !strings.Contains(err.Error(), fmt.Sprintf("context item %d", id)) {
		t.Fatalf("context.list headed by a 1.2 MB item: %v, want a 413 naming it", err)
	}
	found, err := h.client.Search(quick(t), events.SearchRequest{UserID: "alice", Query: "zebra"})
	if err != nil || len(found.Results) != 0 || !found.Truncated {
		t.Fatalf("search: %d results, truncated %v, %v; want none, truncated", len(found.Results), found.Truncated, err)
	}
	big := 100000
	r, err := h.client.Enrich(quick(t), events.EnrichRequest{UserID: "alice", Message: "zebra control", MaxTokens: &big})
	if err != nil || r.Degraded || len(r.Context) != 0 {
		t.Fatalf("enrich: %d items, degraded %v, %v; want a reply without the item", len(r.Context), r.Degraded, err)
	}
	var want, exported bytes.Buffer
	if err := st.Export(context.Background(), "alice", &want); err != nil {
		t.Fatal(err)
	}
	// The whole export's deadline, not a request's: a 1.2 MB item is
	// many pages, slow under -race on a busy machine.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.client.Export(ctx, "alice", &exported); err != nil || exported.String() != want.String() {
		t.Fatalf("export: %d bytes of %d, %v", exported.Len(), want.Len(), err)
	}

	// A fact's history: 30 values of 8 KiB of control characters, 1.5 MB.
	for i := range 30 {
		if _, err := h.client.SetFact(quick(t), "alice", "dump", fmt.Sprintf("%02d", i)+strings.Repeat("\x02", 8000)); err != nil {
			t.Fatal(err)
		}
	}
	thirty, listed := 30, 0
	req := events.FactHistoryRequest{UserID: "alice", Key: "dump", MaxResults: &thirty}
	for pages := 1; ; pages++ {
		page, err := h.client.FactHistory(quick(t), req)
		if err != nil {
			t.Fatalf("facts.history page %d: %v", pages, err)
		}
		if listed += len(page.Changes); page.NextBefore == 0 {
			if pages == 1 || listed != 30 {
				t.Fatalf("facts.history: %d changes in %d pages, want 30 in several", listed, pages)
			}
			break
		}
		req.Before = page.NextBefore
	}
}

// TestDocsListHTMLMetadata: 300 documents with 600 "<" of metadata each
// were 1.1 MB escaped; unescaped they are one page.
func TestDocsListHTMLMetadata(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	meta := mustJSON(t, map[string]string{"html": strings.Repeat("<", 600)})
	for i := range 300 {
		if _, err := h.client.PutDocument(ctxT(t), events.DocsPutRequest{UserID: "alice", Collection: "c", DocID: fmt.Sprintf("d%03d", i),
			Content: "tiny", Metadata: meta}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := h.client.ListDocuments(quick(t), events.DocsListRequest{UserID: "alice", Collection: "c", Limit: 300})
	if err != nil || len(page.Documents) != 300 {
		t.Fatalf("docs.list: %d documents, %v; want 300", len(page.Documents), err)
	}
}

// TestSearchKeepsAnHTMLItemThatFits: an item of 200 KB of "<>", 1.2 MB
// if "<" were escaped \u003c but 200 KB as replies write it, ranked first
// in a reply over the payload limit, is cut to as any other item: it
// fits alone, so it is kept, not left out as too large for any reply.
func TestSearchKeepsAnHTMLItemThatFits(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	html := strings.Repeat("<>", 100000)
	insertContext(t, st,
		store.ContextWrite{UserID: "alice", Question: "quokka quokka quokka: tags for the quokka page", Answer: html, CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: "a quokka note", Answer: strings.Repeat("plain words ", 80000), CreatedAt: t0})
	found, err := h.client.Search(quick(t), events.SearchRequest{UserID: "alice", Query: "quokka"})
	if err != nil || len(found.Results) != 1 || found.Results[0].Answer != html || !found.Truncated {
		t.Fatalf("search: %d results, truncated %v, %v; want the HTML item first and alone, truncated", len(found.Results), found.Truncated, err)
	}
}

// TestDocsSearchTooLargeSaysWhatToDo: chunks of a collection of 8,192
// tokens (32 KB each) make a docs.search of 50 results larger than the
// NATS max_payload; its 413 says what to do, as every 413 does, where it
// gave only the sizes (a walk with this repository's docs, headings
// removed so that sections do not end the chunks).
func TestDocsSearchTooLargeSaysWhatToDo(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	// The puts' budget is the test's own: a put of 200 KB took over the
	// default 5 s at a load average of 25 (a CI run beside five helpers).
	h := start(t, st, func(c *enricher.Config) { c.WriteTimeout = 30 * time.Second })
	var text strings.Builder
	for _, name := range []string{"../docs/operations.md", "../docs/protocol.md"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for l := range strings.Lines(string(b)) {
			if s := strings.TrimSpace(l); !strings.HasPrefix(s, "#") && !strings.HasPrefix(s, "```") {
				text.WriteString(l)
			}
		}
	}
	// Twice the text, put in pieces of about 200 KB (cut at lines): a put
	// of all of it in one request passed 5 s under -race.
	all := text.String() + text.String()
	for i := 0; all != ""; i++ {
		n := min(len(all), 200_000)
		if j := strings.IndexByte(all[n:], '\n'); j >= 0 {
			n += j + 1
		} else {
			n = len(all)
		}
		if _, err := h.client.PutDocument(quick(t), events.DocsPutRequest{UserID: "alice", Collection: "big", DocID: fmt.Sprintf("part%d.md", i),
			Content: all[:n], ChunkTokens: 8192}); err != nil {
			t.Fatal(err)
		}
		all = all[n:]
	}
	fifty := 50
	_, err := h.client.SearchDocuments(quick(t), events.DocsSearchRequest{UserID: "alice", Query: "memoryd", MaxResults: &fifty})
	if svcCode(err) != 413 || !strings.Contains(err.Error(), "max_payload") || !strings.Contains(err.Error(), "lower max_results") {
		t.Fatalf("docs.search of 50 chunks of 32 KB: %v; want a 413 saying to lower max_results", err)
	}
}
