package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/memoryd/memoryd/chunker"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
)

// chunkWith is the chunker the service uses, as a store.Chunker.
func chunkWith(c store.Collection, source, content string) ([]store.ChunkText, error) {
	cs, err := chunker.Split(content, chunker.Config{MaxTokens: c.ChunkTokens, Overlap: c.OverlapTokens, Code: chunker.CodeLanguage(source)})
	if err != nil {
		return nil, err
	}
	out := make([]store.ChunkText, len(cs))
	for i, ch := range cs {
		out[i] = store.ChunkText{HeadingPath: ch.Headings, Text: ch.Text, Start: ch.Start, End: ch.End}
	}
	return out, nil
}

var alice = store.Owner{User: "alice"}

const guide = `# Install

## Linux

Run the installer with sudo. The penguin package needs glibc.

## Windows

Double-click the setup program. Reboot afterwards.

# Usage

Start the daemon and open the dashboard in a browser.
`

func put(t *testing.T, ctx context.Context, s *store.Store, p store.DocumentPut) store.PutResult {
	t.Helper()
	if p.Chunk == nil {
		p.Chunk = chunkWith
	}
	r, err := s.PutDocument(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func search(t *testing.T, ctx context.Context, s *store.Store, q store.ChunkQuery) store.ChunkCandidates {
	t.Helper()
	c, err := searchAll(ctx, s, q)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// searchAll returns a search's candidates, every one kept by the ranker
// (in their order), so with its text.
func searchAll(ctx context.Context, s *store.Store, q store.ChunkQuery) (store.ChunkCandidates, error) {
	var c store.ChunkCandidates
	hits, err := s.SearchChunks(ctx, q, func(cands store.ChunkCandidates) []store.ChunkHit {
		c = cands
		out := make([]store.ChunkHit, len(cands.Matches))
		for i, m := range cands.Matches {
			out[i] = m.Hit
		}
		return out
	})
	if err != nil {
		return store.ChunkCandidates{}, err
	}
	for i := range hits {
		c.Matches[i].Hit = hits[i]
	}
	return c, nil
}

// TestSearchChunksReadsKeptTexts checks that the candidates come without
// their text, and that the text read afterwards is the kept hits', in the
// ranker's order.
func TestSearchChunksReadsKeptTexts(t *testing.T) {
	ctx, s := setup(t)
	var b strings.Builder
	for i := range 5 {
		fmt.Fprintf(&b, "# Part %d\n\nThe otter paragraph number n%d.\n\n", i, i)
	}
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "c", DocID: "d", Content: b.String()})
	// The vector and lengths written once (migration 026) are what the
	// generated columns computed (the lengths without the parts of
	// camelCase names, 061).
	var differ int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM doc_chunks WHERE
		search <> setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B')
		OR heading_len <> length(memoryd_tsvector_base(ts_config, heading)) OR text_len <> length(memoryd_tsvector_base(ts_config, text))`).Scan(&differ); err != nil {
		t.Fatal(err)
	}
	if differ != 0 {
		t.Fatalf("%d chunks' search columns differ from their text's", differ)
	}
	var cands int
	hits, err := s.SearchChunks(ctx, store.ChunkQuery{Reader: alice, Keywords: []string{"otter"}}, func(c store.ChunkCandidates) []store.ChunkHit {
		cands = len(c.Matches)
		var out []store.ChunkHit
		for _, m := range c.Matches {
			if m.Hit.Text != "" {
				t.Errorf("candidate %d has its text", m.Hit.ChunkIndex)
			}
			if m.Hit.ChunkIndex == 1 || m.Hit.ChunkIndex == 3 {
				out = append(out, m.Hit)
			}
		}
		slices.SortFunc(out, func(a, b store.ChunkHit) int { return b.ChunkIndex - a.ChunkIndex })
		return out
	})
	if err != nil {
		t.Fatal(err)
	}
	if cands != 5 || len(hits) != 2 || hits[0].ChunkIndex != 3 || hits[1].ChunkIndex != 1 {
		t.Fatalf("%d candidates, hits %+v; want 5, chunks 3 then 1", cands, hits)
	}
	for _, h := range hits {
		if want := fmt.Sprintf("n%d.", h.ChunkIndex); !strings.HasSuffix(h.Text, want) {
			t.Errorf("chunk %d text %q, want it to end in %q", h.ChunkIndex, h.Text, want)
		}
	}
	// A hit that is no candidate is an error, not a short answer.
	_, err = s.SearchChunks(ctx, store.ChunkQuery{Reader: alice, Keywords: []string{"otter"}}, func(c store.ChunkCandidates) []store.ChunkHit {
		h := c.Matches[0].Hit
		h.ChunkIndex = 99
		return []store.ChunkHit{h}
	})
	if err == nil {
		t.Fatal("a ranker's made-up hit was not refused")
	}
}

func TestPutDocumentChunksAndSearches(t *testing.T) {
	ctx, s := setup(t)
	r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "manuals", Source: "guide.md", Content: guide,
		Metadata: []byte(`{"lang":"en"}`)})
	if r.Unchanged || r.Status != store.DocReady || r.Chunks != 3 || r.DocID != "guide.md" {
		t.Fatalf("put = %+v, want a new ready document guide.md of 3 chunks", r)
	}
	c := search(t, ctx, s, store.ChunkQuery{Reader: alice, Keywords: []string{"penguins"}})
	if len(c.Matches) != 1 {
		t.Fatalf("penguins matched %d chunks, want 1: %+v", len(c.Matches), c.Matches)
	}
	h := c.Matches[0].Hit
	if h.Collection != "manuals" || h.DocumentID != "guide.md" || h.Source != "guide.md" || h.ChunkIndex != 0 ||
		!slices.Equal(h.HeadingPath, []string{"Install", "Linux"}) || guide[h.Start:h.End] != h.Text ||
		!strings.Contains(h.Text, "penguin package") {
		t.Fatalf("hit = %+v", h)
	}
	if c.Stats.Items != 3 || c.Terms[0] != "penguin" || c.Matches[0].Terms[0] != (store.TermCount{Present: true, Answer: 1}) {
		t.Fatalf("stats %+v terms %v counts %+v", c.Stats, c.Terms, c.Matches[0].Terms)
	}
	// The heading path is the first field: "Windows" is in a heading only.
	c = search(t, ctx, s, store.ChunkQuery{Reader: alice, Keywords: []string{"windows"}})
	if len(c.Matches) != 1 || c.Matches[0].Terms[0] != (store.TermCount{Present: true, Question: 1}) {
		t.Fatalf("windows: %+v", c.Matches)
	}
	docs, next, err := s.ListDocuments(ctx, alice, "manuals", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if next != "" || len(docs) != 1 || docs[0].Status != store.DocReady || docs[0].Chunks != 3 ||
		docs[0].Size != int64(len(guide)) || string(docs[0].Metadata) != `{"lang": "en"}` {
		t.Fatalf("list = %+v next %q", docs, next)
	}
}

func TestPutDocumentSameContentIsNoOp(t *testing.T) {
	ctx, s := setup(t)
	first := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "c", DocID: "d", Content: guide})
	calls := 0
	again := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "c", DocID: "d", Content: guide,
		Metadata: []byte(`{"x":1}`), Chunk: func(c store.Collection, source, s string) ([]store.ChunkText, error) {
			calls++
			return chunkWith(c, source, s)
		}})
	if !again.Unchanged || again.Hash != first.Hash || again.Status != store.DocReady || again.Chunks != first.Chunks || calls != 0 {
		t.Fatalf("re-put = %+v (chunker called %d times), want unchanged", again, calls)
	}
	docs, _, err := s.ListDocuments(ctx, alice, "c", "", 10)
	if err != nil || len(docs) != 1 || string(docs[0].Metadata) != "{}" || !docs[0].UpdatedAt.Equal(docs[0].CreatedAt) {
		t.Fatalf("after the no-op: %+v %v", docs, err)
	}
	changed := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "c", DocID: "d", Content: "Only a giraffe now."})
	if changed.Unchanged || changed.Chunks != 1 {
		t.Fatalf("new content = %+v", changed)
	}
	if c := search(t, ctx, s, store.ChunkQuery{Reader: alice, Keywords: []string{"penguin"}}); len(c.Matches) != 0 {
		t.Fatalf("old chunks still found: %+v", c.Matches)
	}
	if c := search(t, ctx, s, store.ChunkQuery{Reader: alice, Keywords: []string{"giraffe"}}); len(c.Matches) != 1 {
		t.Fatalf("new chunk not found: %+v", c.Matches)
	}
}

func TestPutDocumentRejectsBadInput(t *testing.T) {
	ctx, s := setup(t)
	for name, p := range map[string]store.DocumentPut{
		"no owner":          {Collection: "c", DocID: "d", Content: "x"},
		"two owners":        {Owner: store.Owner{User: "a", Shared: "b"}, Collection: "c", DocID: "d", Content: "x"},
		"bad collection":    {Owner: alice, Collection: "a/b", DocID: "d", Content: "x"},
		"no id":             {Owner: alice, Collection: "c", Content: "x"},
		"nul":               {Owner: alice, Collection: "c", DocID: "d", Content: "a\x00b"},
		"metadata array":    {Owner: alice, Collection: "c", DocID: "d", Content: "x", Metadata: []byte(`[1]`)},
		"metadata too long": {Owner: alice, Collection: "c", DocID: "d", Content: "x", Metadata: []byte(`{"k":"` + strings.Repeat("v", store.MaxMetadataBytes) + `"}`)},
	} {
		if _, err := s.PutDocument(ctx, p); err == nil {
			t.Errorf("%s: put succeeded", name)
		}
	}
	// Each refusal names the fault: a NUL is valid UTF-8 (an audit was
	// told "not UTF-8 text").
	for content, want := range map[string]string{"a\x00b": "holds a NUL byte (at byte 1)", "a\xffb": "is not UTF-8 text"} {
		if _, err := s.PutDocument(ctx, store.DocumentPut{Owner: alice, Collection: "c", DocID: "d", Content: content}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("put of %q: %v, want an error saying it %s", content, err, want)
		}
	}
	if docs, err := s.Collections(ctx, alice); err != nil || len(docs) != 0 {
		t.Fatalf("a rejected put left collections %+v (%v)", docs, err)
	}
}

func TestPendingDocumentIndexedLater(t *testing.T) {
	ctx, s := setup(t)
	r, err := s.PutDocument(ctx, store.DocumentPut{Owner: alice, Collection: "big", DocID: "d", Content: guide})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != store.DocPending {
		t.Fatalf("put without a chunker = %+v, want pending", r)
	}
	if c := search(t, ctx, s, store.ChunkQuery{Reader: alice, Keywords: []string{"penguin"}}); len(c.Matches) != 0 {
		t.Fatal("a pending document is searchable")
	}
	// A stale job (for content since replaced) does nothing.
	if done, err := s.IndexDocument(ctx, r.Collection.ID, "d", store.DocumentHash("older"), chunkWith); err != nil || done {
		t.Fatalf("stale index = %v, %v", done, err)
	}
	if done, err := s.IndexDocument(ctx, r.Collection.ID, "d", r.Hash, chunkWith); err != nil || !done {
		t.Fatalf("index = %v, %v", done, err)
	}
	if done, err := s.IndexDocument(ctx, r.Collection.ID, "d", r.Hash, chunkWith); err != nil || done {
		t.Fatalf("second index = %v, %v, want a no-op", done, err)
	}
	if c := search(t, ctx, s, store.ChunkQuery{Reader: alice, Keywords: []string{"penguin"}}); len(c.Matches) != 1 {
		t.Fatalf("indexed document not found: %+v", c.Matches)
	}
	docs, _, err := s.ListDocuments(ctx, alice, "big", "", 1)
	if err != nil || docs[0].Status != store.DocReady || docs[0].Chunks != 3 {
		t.Fatalf("list = %+v %v", docs, err)
	}
}

func TestChunkSearchAccess(t *testing.T) {
	ctx, s := setup(t)
	bob := store.Owner{User: "bob"}
	team := store.Owner{Shared: "team-x"}
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "notes", DocID: "a", Content: "alice keeps a zebra"})
	put(t, ctx, s, store.DocumentPut{Owner: bob, Collection: "notes", DocID: "b", Content: "bob keeps a zebra"})
	put(t, ctx, s, store.DocumentPut{Owner: team, Collection: "handbook", DocID: "h", Content: "the team zebra policy"})
	docsOf := func(c store.ChunkCandidates) []string {
		var out []string
		for _, m := range c.Matches {
			out = append(out, m.Hit.Collection+":"+m.Hit.DocumentID)
		}
		slices.Sort(out)
		return out
	}
	zebra := []string{"zebra"}
	if got := docsOf(search(t, ctx, s, store.ChunkQuery{Reader: alice, Keywords: zebra})); !slices.Equal(got, []string{"notes:a"}) {
		t.Fatalf("alice before the grant reads %v", got)
	}
	if _, err := searchAll(ctx, s, store.ChunkQuery{Reader: alice, Collections: []string{"team-x/handbook"}, Keywords: zebra}); !errors.Is(err, store.ErrNoCollection) {
		t.Fatalf("alice named the shared collection before the grant: %v", err)
	}
	for _, u := range []string{"alice", "bob"} {
		if ok, err := s.GrantReader(ctx, "team-x", u); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	if got := docsOf(search(t, ctx, s, store.ChunkQuery{Reader: alice, Keywords: zebra})); !slices.Equal(got, []string{"notes:a", "team-x/handbook:h"}) {
		t.Fatalf("alice reads %v", got)
	}
	if got := docsOf(search(t, ctx, s, store.ChunkQuery{Reader: bob, Collections: []string{"team-x/handbook"}, Keywords: zebra})); !slices.Equal(got, []string{"team-x/handbook:h"}) {
		t.Fatalf("bob reads %v", got)
	}
	if got := docsOf(search(t, ctx, s, store.ChunkQuery{Reader: team, Keywords: zebra})); !slices.Equal(got, []string{"handbook:h"}) {
		t.Fatalf("the scope reads %v", got)
	}
	// Deleting alice's collections (forget) leaves bob's and the team's.
	if n, err := s.DeleteCollections(ctx, alice); err != nil || n != 1 {
		t.Fatalf("delete = %d, %v", n, err)
	}
	if got := docsOf(search(t, ctx, s, store.ChunkQuery{Reader: alice, Keywords: zebra})); len(got) != 0 {
		t.Fatalf("after forget alice reads %v", got)
	}
	if got := docsOf(search(t, ctx, s, store.ChunkQuery{Reader: bob, Keywords: zebra})); !slices.Equal(got, []string{"notes:b", "team-x/handbook:h"}) {
		t.Fatalf("bob after alice's forget reads %v", got)
	}
}

func TestDeleteAndListPages(t *testing.T) {
	ctx, s := setup(t)
	for i := range 5 {
		put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "c", DocID: fmt.Sprintf("d%d", i), Content: fmt.Sprintf("doc %d about otters", i)})
	}
	if ok, err := s.DeleteDocument(ctx, alice, "c", "d2"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, err := s.DeleteDocument(ctx, alice, "c", "d2"); err != nil || ok {
		t.Fatalf("second delete = %v, %v", ok, err)
	}
	var ids []string
	after := ""
	for {
		docs, next, err := s.ListDocuments(ctx, alice, "c", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			ids = append(ids, d.DocID)
		}
		if next == "" {
			break
		}
		after = next
	}
	if !slices.Equal(ids, []string{"d0", "d1", "d3", "d4"}) {
		t.Fatalf("pages = %v", ids)
	}
	if c := search(t, ctx, s, store.ChunkQuery{Reader: alice, Keywords: []string{"otters"}}); len(c.Matches) != 4 {
		t.Fatalf("otters in %d chunks, want 4", len(c.Matches))
	}
	if _, _, err := s.ListDocuments(ctx, alice, "nope", "", 2); !errors.Is(err, store.ErrNoCollection) {
		t.Fatalf("list of a missing collection: %v", err)
	}
}

// TestReplaceIsAtomicForSearch replaces a document's content over and over
// while searches run: every search must see all the chunks of one version,
// never some of the old and some of the new.
func TestReplaceIsAtomicForSearch(t *testing.T) {
	ctx, s := setup(t)
	version := func(v int) string {
		var b strings.Builder
		for sec := range 6 {
			fmt.Fprintf(&b, "# Part %d\n\nThe walrus section %d of version v%d.\n\n", sec, sec, v)
		}
		return b.String()
	}
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "c", DocID: "d", Content: version(0)})
	const replaces = 30
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 1)
	var searches atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			c, err := searchAll(ctx, s, store.ChunkQuery{Reader: alice, Keywords: []string{"walrus"}})
			if err != nil {
				errs <- err
				return
			}
			searches.Add(1)
			seen := map[string]bool{}
			for _, m := range c.Matches {
				seen[m.Hit.Text[strings.LastIndex(m.Hit.Text, " ")+1:]] = true
			}
			if len(c.Matches) != 6 || len(seen) != 1 {
				errs <- fmt.Errorf("a search saw %d chunks of versions %v", len(c.Matches), seen)
				return
			}
		}
	}()
	// At least replaces replaces, and on until searches ran beside them.
	for v := 1; v <= replaces || searches.Load() < 20; v++ {
		put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "c", DocID: "d", Content: version(v)})
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	t.Logf("%d searches during the replaces", searches.Load())
}

// TestDocumentsCountInSize checks that the size the pruner measures holds
// the knowledge bases, in the part pruning cannot delete (the floor): a
// --max-db-size under what the documents take is refused at start, and
// pruning never deletes a document to meet the limit.
func TestDocumentsCountInSize(t *testing.T) {
	ctx, s := setup(t)
	before, err := s.MeasureSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&b, "Paragraph %d says something about the archive in words of its own, %x.\n\n", i, i*7919)
	}
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "c", DocID: "big", Content: b.String()})
	after, err := s.MeasureSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	grew := after.DocumentBytes - before.DocumentBytes
	if grew < int64(b.Len()) {
		t.Fatalf("documents grew by %d bytes for a %d byte document", grew, b.Len())
	}
	if after.FloorBytes-before.FloorBytes != grew || after.LiveBytes-before.LiveBytes != grew || after.RealBytes-before.RealBytes < int64(b.Len()) {
		t.Fatalf("floor +%d, live +%d, real +%d: the floor and the live size should grow by the documents' %d, the real size by the document at least",
			after.FloorBytes-before.FloorBytes, after.LiveBytes-before.LiveBytes, after.RealBytes-before.RealBytes, grew)
	}

	// Deleted (a forget of alice), the document counts for nothing, though
	// its files keep their size: pruning must not delete context to make
	// room for it. (Before, the floor kept it: a race walk saw context
	// pruned from 654 items to about 420 for documents no longer there.)
	if _, err := s.DeleteCollections(ctx, alice); err != nil {
		t.Fatal(err)
	}
	gone, err := s.MeasureSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if gone.DocumentBytes > before.DocumentBytes || gone.FloorBytes > before.FloorBytes || gone.RealBytes < after.RealBytes {
		t.Fatalf("after the deletion: documents %d (%d before the put), floor %d (%d before), real %d (%d with the document); want the documents and the floor back, the files as they were",
			gone.DocumentBytes, before.DocumentBytes, gone.FloorBytes, before.FloorBytes, gone.RealBytes, after.RealBytes)
	}
}

// TestDefaultCollectionsForgotten checks that a user's default collections
// go with the user's forget (DeleteCollections), shared ones included, and
// that a shared scope has none.
func TestDefaultCollectionsForgotten(t *testing.T) {
	ctx, s := setup(t)
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "notes", DocID: "a", Content: "The zebra notes."})
	put(t, ctx, s, store.DocumentPut{Owner: store.Owner{Shared: "team-x"}, Collection: "handbook", DocID: "h", Content: "The zebra handbook."})
	if _, err := s.GrantReader(ctx, "team-x", "alice"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.SetDefaultCollections(ctx, "alice", []string{"team-x/handbook", "notes"}); err != nil || !slices.Equal(got, []string{"team-x/handbook", "notes"}) {
		t.Fatalf("set = %v, %v", got, err)
	}
	c := search(t, ctx, s, store.ChunkQuery{Reader: alice, Keywords: []string{"zebra"}, Defaults: true})
	if len(c.Matches) != 2 {
		t.Fatalf("defaults search matched %d chunks, want 2", len(c.Matches))
	}
	if _, err := s.DeleteCollections(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GrantReader(ctx, "team-x", "alice"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.DefaultCollections(ctx, "alice"); err != nil || len(got) != 0 {
		t.Fatalf("after forget and a new grant, defaults %v, %v", got, err)
	}
	if c := search(t, ctx, s, store.ChunkQuery{Reader: store.Owner{Shared: "team-x"}, Keywords: []string{"zebra"}, Defaults: true}); len(c.Matches) != 0 {
		t.Fatalf("a shared scope searched defaults: %d chunks", len(c.Matches))
	}
}

var docJobs = []store.RiverJobs{
	{Kind: "index_document", CollectionField: "collection_id", DocField: "doc_id"},
	{Kind: "memoryd_chunk_embed", CollectionField: "collection_id", DocField: "doc_id", MoreField: "more"},
}

// insertDocJob inserts a River job of kind naming collection coll in state.
func insertDocJob(t *testing.T, ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, kind string, coll int64, state string) {
	t.Helper()
	if _, err := db.Exec(ctx, `INSERT INTO river_job (kind, args, state, max_attempts, queue, priority, scheduled_at, finalized_at)
		VALUES ($1, jsonb_build_object('collection_id', $2::bigint, 'doc_id', 'guide.md'), $3::river_job_state, 5, 'q', 1, now(),
		CASE WHEN $3::text = 'completed' THEN now() END)`, kind, coll, state); err != nil {
		t.Fatal(err)
	}
}

// docJobsLeft lists the River jobs as kind:collection_id.
func docJobsLeft(t *testing.T, ctx context.Context, s *store.Store) []string {
	t.Helper()
	rows, err := s.Pool().Query(ctx, `SELECT kind || ':' || (args->>'collection_id') FROM river_job ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return left
}

// Deleting a user's collections (forget) deletes the River jobs of the
// shapes named that name one of them, whatever their state: their
// arguments hold the document ids. Another owner's jobs stay.
func TestDeleteCollectionsDeletesTheirJobs(t *testing.T) {
	ctx, s := setup(t)
	mine := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", Source: "guide.md", Content: guide})
	other := put(t, ctx, s, store.DocumentPut{Owner: store.Owner{User: "bob"}, Collection: "kb", Source: "guide.md", Content: guide})
	for _, j := range []struct {
		kind  string
		coll  int64
		state string
	}{{"index_document", mine.Collection.ID, "available"}, {"memoryd_chunk_embed", mine.Collection.ID, "completed"},
		{"memoryd_chunk_embed", mine.Collection.ID, "retryable"}, {"memoryd_chunk_embed", other.Collection.ID, "available"},
		{"memoryd_extract", mine.Collection.ID, "available"}} {
		insertDocJob(t, ctx, s.Pool(), j.kind, j.coll, j.state)
	}
	if n, err := s.DeleteCollections(ctx, alice, docJobs...); err != nil || n != 1 {
		t.Fatalf("deleted %d documents, %v; want 1", n, err)
	}
	want := []string{fmt.Sprintf("memoryd_chunk_embed:%d", other.Collection.ID), fmt.Sprintf("memoryd_extract:%d", mine.Collection.ID)}
	if left := docJobsLeft(t, ctx, s); !slices.Equal(left, want) {
		t.Errorf("jobs left %q, want %q", left, want)
	}
}

// A transaction that holds one of the user's documents (a put, a chunking
// job) and inserts a job for it commits while the deletion waits for the
// document: that job goes too. It was left behind when the jobs were
// deleted before the collections.
func TestDeleteCollectionsDeletesJobsOfAWriterItWaitedFor(t *testing.T) {
	ctx, s := setup(t)
	mine := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "guide.md", Content: guide})
	tx, pid := beginWithPID(t, ctx, s)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM documents WHERE collection_id = $1 FOR UPDATE`, mine.Collection.ID); err != nil {
		t.Fatal(err)
	}
	insertDocJob(t, ctx, tx, "memoryd_chunk_embed", mine.Collection.ID, "available")
	done := make(chan error, 1)
	go func() {
		_, err := s.DeleteCollections(ctx, alice, docJobs...)
		done <- err
	}()
	eventstest.Eventually(t, "the deletion to wait for the writer", 30*time.Second, func() (bool, string) {
		var n int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, pid).Scan(&n)
		return err == nil && n > 0, fmt.Sprint(n, err)
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if left := docJobsLeft(t, ctx, s); len(left) != 0 {
		t.Errorf("jobs left %q, want none", left)
	}
}

// A put and a deletion of its collection (a forget's DeleteCollections)
// are one after the other: the deletion waits for the put and deletes its
// document, or the put creates the collection anew. Before, a put that had
// read its collection before a deletion committed failed on the documents'
// foreign key, which a race walk saw answered as "500 memory store
// unavailable" (5 of 30 puts beside forgets of their owner). The put is
// held between reading its collection and writing its document by the
// documents cap's lock, which the test holds.
func TestPutDocumentBesideADeletionOfItsCollection(t *testing.T) {
	ctx, s := setup(t)
	o := store.Owner{User: "alice"}
	put := func(id string) error {
		_, err := s.PutDocument(ctx, store.DocumentPut{Owner: o, Collection: "notes", DocID: id, Content: "# Notes\nThe boat is blue.",
			MaxTotalBytes: 1 << 20})
		return err
	}
	if err := put("d1"); err != nil {
		t.Fatal(err)
	}
	capTx := holdDocsCap(t, ctx, s)
	putDone := make(chan error, 1)
	go func() { putDone <- put("d2") }()
	// The put's backend, once it waits for the cap's lock, and its
	// transaction, which a deletion waiting for the put waits for.
	var putPid int
	eventstest.Eventually(t, "the put to wait for the cap's lock", 30*time.Second, func() (bool, string) {
		err := s.Pool().QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND objid::bigint = (hashtextextended('memoryd.docs_cap.' || current_schema(), 0) & 4294967295)`).Scan(&putPid)
		return err == nil, fmt.Sprint(err)
	})
	deleted := make(chan error, 1)
	go func() {
		_, err := s.DeleteCollections(ctx, o)
		deleted <- err
	}()
	// The deletion either waits for the put, which holds its collection,
	// or (the put holding nothing) finishes first.
	var deleteErr error
	finished := false
	eventstest.Eventually(t, "the deletion to wait for the put or finish", 30*time.Second, func() (bool, string) {
		select {
		case deleteErr = <-deleted:
			finished = true
			return true, ""
		default:
		}
		n := waitersOn(t, ctx, s, putPid)
		return n > 0, "the deletion neither waits nor finished"
	})
	if err := capTx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-putDone; err != nil {
		t.Fatalf("put beside the deletion of its collection (deletion finished first: %v): %v", finished, err)
	}
	if !finished {
		deleteErr = <-deleted
	}
	if deleteErr != nil {
		t.Fatal(deleteErr)
	}
	docs, _, err := s.ListDocuments(ctx, o, "notes", "", 10)
	if err != nil && !errors.Is(err, store.ErrNoCollection) || len(docs) != 0 {
		t.Fatalf("documents after = %+v, %v; want none: the deletion waited for the put and deleted its document", docs, err)
	}
}

// Documents deleted while others stay count for their share of the files
// only, also once a VACUUM has made their space reusable (autovacuum's, or
// the prune's), which leaves no dead row to tell.
func TestDeletedDocumentsCountForNothingAfterAVacuum(t *testing.T) {
	ctx, s := setup(t)
	base, err := s.MeasureSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := range 600 {
		fmt.Fprintf(&b, "Paragraph %d says something about the archive in words of its own, %x.\n\n", i, i*7919)
	}
	for _, id := range []string{"a", "b", "c"} {
		put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "c", DocID: id, Content: id + "\n\n" + b.String()})
	}
	full, err := s.MeasureSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if ok, err := s.DeleteDocument(ctx, alice, "c", id); err != nil || !ok {
			t.Fatalf("delete %s: %v, %v", id, ok, err)
		}
	}
	if _, err := s.Pool().Exec(ctx, `VACUUM collections, documents, doc_chunks, chunk_terms, chunk_embeddings`); err != nil {
		t.Fatal(err)
	}
	one, err := s.MeasureSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	three := full.DocumentBytes - base.DocumentBytes
	if left := one.DocumentBytes - base.DocumentBytes; left > three/2 || left <= 0 {
		t.Fatalf("documents: %d bytes for three, %d for the one left after deleting two and a VACUUM; want about a third", three, left)
	}
}

// Deleting a document deletes the River jobs naming it (chunking and chunk
// embedding, in any state): their arguments hold its id and its content's
// hash, which outlived it for River's retention (found by an audit: 2
// chunking and 18 chunk embed jobs of a deleted document). The jobs of
// another document of the collection, or of the same id in another
// collection, stay; so does a job that holds other documents too (packed:
// it finds the deleted one gone and embeds the others).
func TestDeleteDocumentDeletesItsJobs(t *testing.T) {
	ctx, s := setup(t)
	mine := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "guide.md", Content: guide})
	other := put(t, ctx, s, store.DocumentPut{Owner: store.Owner{User: "bob"}, Collection: "kb", DocID: "guide.md", Content: guide})
	for _, j := range []struct {
		kind, doc string
		coll      int64
		state     string
		packed    bool
	}{{"index_document", "guide.md", mine.Collection.ID, "completed", false}, {"memoryd_chunk_embed", "guide.md", mine.Collection.ID, "available", false},
		{"memoryd_chunk_embed", "other.md", mine.Collection.ID, "available", false}, {"memoryd_chunk_embed", "guide.md", other.Collection.ID, "available", false},
		{"memoryd_chunk_embed", "guide.md", mine.Collection.ID, "available", true}} {
		if _, err := s.Pool().Exec(ctx, `INSERT INTO river_job (kind, args, state, max_attempts, queue, priority, scheduled_at, finalized_at)
			VALUES ($1, jsonb_build_object('collection_id', $2::bigint, 'doc_id', $3::text)
				|| CASE WHEN $5 THEN jsonb_build_object('more', jsonb_build_array(jsonb_build_object('collection_id', $2::bigint, 'doc_id', 'other.md'))) ELSE '{}' END,
			$4::river_job_state, 5, 'q', 1, now(), CASE WHEN $4::text = 'completed' THEN now() END)`, j.kind, j.coll, j.doc, j.state, j.packed); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := s.DeleteDocument(ctx, alice, "kb", "guide.md", docJobs...); err != nil || !ok {
		t.Fatalf("deleted %v, %v", ok, err)
	}
	rows, err := s.Pool().Query(ctx, `SELECT kind || ':' || (args->>'collection_id') || ':' || (args->>'doc_id') || CASE WHEN args ? 'more' THEN ':packed' ELSE '' END
		FROM river_job ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("memoryd_chunk_embed:%d:guide.md", other.Collection.ID), fmt.Sprintf("memoryd_chunk_embed:%d:other.md", mine.Collection.ID),
		fmt.Sprintf("memoryd_chunk_embed:%d:guide.md:packed", mine.Collection.ID)}
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Errorf("jobs left %q, want %q", left, want)
	}
}

// DeleteDocumentsBefore (a forget cut short, finished at the next start)
// deletes a user's documents, emptied collections, their jobs and reader
// grants as they were at the forget's time; what was written after it
// stays, and so does every other owner's.
func TestDeleteDocumentsBefore(t *testing.T) {
	ctx, s := setup(t)
	mine := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "guide.md", Content: guide})
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "old", DocID: "o", Content: "The old otter notes."})
	other := put(t, ctx, s, store.DocumentPut{Owner: store.Owner{User: "bob"}, Collection: "kb", DocID: "guide.md", Content: guide})
	insertDocJob(t, ctx, s.Pool(), "index_document", mine.Collection.ID, "available")
	insertDocJob(t, ctx, s.Pool(), "memoryd_chunk_embed", mine.Collection.ID, "retryable")
	insertDocJob(t, ctx, s.Pool(), "memoryd_chunk_embed", other.Collection.ID, "available")
	if _, err := s.GrantReader(ctx, "team-x", "alice"); err != nil {
		t.Fatal(err)
	}
	forgotten := forgetTime(t, ctx, s)
	// After the forget.
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "later.md", Content: "The later otter notes."})
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "fresh", DocID: "x", Content: "The fresh otter notes."})
	if _, err := s.GrantReader(ctx, "team-y", "alice"); err != nil {
		t.Fatal(err)
	}

	if n, err := s.DeleteDocumentsBefore(ctx, "alice", forgotten, docJobs...); err != nil || n != 2 {
		t.Fatalf("deleted %d documents, %v; want 2", n, err)
	}
	cs, err := s.Collections(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"fresh", "kb"}) {
		t.Errorf("alice's collections left: %q; want fresh and kb (it holds a document put after)", names)
	}
	if docs, _, err := s.ListDocuments(ctx, alice, "kb", "", 10); err != nil || len(docs) != 1 || docs[0].DocID != "later.md" {
		t.Errorf("alice's kb left: %+v, %v; want later.md alone", docs, err)
	}
	if want := []string{fmt.Sprintf("memoryd_chunk_embed:%d", other.Collection.ID)}; !slices.Equal(docJobsLeft(t, ctx, s), want) {
		t.Errorf("jobs left %q, want %q", docJobsLeft(t, ctx, s), want)
	}
	var scopes []string
	rows, err := s.Pool().Query(ctx, `SELECT scope FROM collection_readers WHERE user_id = 'alice' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	if scopes, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || !slices.Equal(scopes, []string{"team-y"}) {
		t.Errorf("alice's grants left: %q, %v; want team-y (granted after)", scopes, err)
	}
	if docs, _, err := s.ListDocuments(ctx, store.Owner{User: "bob"}, "kb", "", 10); err != nil || len(docs) != 1 {
		t.Errorf("bob's kb: %+v, %v", docs, err)
	}
}

// A put after the forget's time into a collection of before it, that
// holds the collection while DeleteDocumentsBefore runs (it read the
// collection, its document not yet written), is kept: the deletion waits
// for it and sees its document before it deletes the emptied collections.
// Before, the deletion's snapshot did not see the put's document, found
// the collection empty, waited for the put's lock on it and then deleted
// it, and the put's document with it by the cascade: a put answered as
// stored, written after the forget, was gone.
func TestDeleteDocumentsBeforeKeepsAPutItWaitedFor(t *testing.T) {
	ctx, s := setup(t)
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "notes", DocID: "d1", Content: "# Notes\nThe boat was red."})
	forgotten := forgetTime(t, ctx, s)
	capTx := holdDocsCap(t, ctx, s)
	putDone := make(chan error, 1)
	go func() {
		_, err := s.PutDocument(ctx, store.DocumentPut{Owner: alice, Collection: "notes", DocID: "d2",
			Content: "# Notes\nThe boat is blue.", Chunk: chunkWith, MaxTotalBytes: 1 << 20})
		putDone <- err
	}()
	var putPid int
	eventstest.Eventually(t, "the put to wait for the cap's lock", 30*time.Second, func() (bool, string) {
		err := s.Pool().QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND objid::bigint = (hashtextextended('memoryd.docs_cap.' || current_schema(), 0) & 4294967295)`).Scan(&putPid)
		return err == nil, fmt.Sprint(err)
	})
	deleted := make(chan error, 1)
	go func() {
		_, err := s.DeleteDocumentsBefore(ctx, "alice", forgotten, docJobs...)
		deleted <- err
	}()
	eventstest.Eventually(t, "the deletion to wait for the put", 30*time.Second, func() (bool, string) {
		n := waitersOn(t, ctx, s, putPid)
		return n > 0, "the deletion does not wait"
	})
	if err := capTx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-putDone; err != nil {
		t.Fatal(err)
	}
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	docs, _, err := s.ListDocuments(ctx, alice, "notes", "", 10)
	if err != nil || len(docs) != 1 || docs[0].DocID != "d2" {
		t.Fatalf("alice's notes after: %+v, %v; want d2, put after the forget's time, alone", docs, err)
	}
}

// DeleteDocumentsBefore deletes the jobs of the documents it deletes, not
// those of a document put after the forget's time in the same collection
// (a pending one would never be chunked), nor a job of several documents
// (MoreField), which finds the deleted ones gone; an emptied collection's
// jobs go with it.
func TestDeleteDocumentsBeforeKeepsTheJobsOfLaterDocuments(t *testing.T) {
	ctx, s := setup(t)
	kb := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "guide.md", Content: guide})
	old := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "old", DocID: "o", Content: "The old otter notes."})
	forgotten := forgetTime(t, ctx, s)
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "later.md", Content: "The later otter notes."})
	job := func(kind string, coll int64, args string) {
		t.Helper()
		if _, err := s.Pool().Exec(ctx, `INSERT INTO river_job (kind, args, state, max_attempts, queue, priority, scheduled_at)
			VALUES ($1, jsonb_build_object('collection_id', $2::bigint) || $3::jsonb, 'available', 5, 'q', 1, now())`, kind, coll, args); err != nil {
			t.Fatal(err)
		}
	}
	job("index_document", kb.Collection.ID, `{"doc_id": "guide.md", "n": 1}`)
	job("memoryd_chunk_embed", kb.Collection.ID, `{"doc_id": "guide.md", "n": 2}`)
	job("index_document", kb.Collection.ID, `{"doc_id": "later.md", "n": 3}`)
	job("memoryd_chunk_embed", kb.Collection.ID, `{"doc_id": "later.md", "n": 4}`)
	job("memoryd_chunk_embed", kb.Collection.ID, `{"doc_id": "guide.md", "more": [{"doc_id": "later.md"}], "n": 5}`)
	job("memoryd_chunk_embed", old.Collection.ID, `{"doc_id": "o", "more": [{"doc_id": "p"}], "n": 6}`)
	if _, err := s.DeleteDocumentsBefore(ctx, "alice", forgotten, docJobs...); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Pool().Query(ctx, `SELECT (args->>'n')::int FROM river_job ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{3, 4, 5}; !slices.Equal(left, want) {
		t.Errorf("jobs left %v, want %v", left, want)
	}
}

// DeleteDocumentsBefore deletes in batches, each committed: a user's
// documents that take longer than a start's budget are deleted over
// several starts (before: one transaction, rolled back at every start).
func TestDeleteDocumentsBeforeKeepsWhatEachBatchDeleted(t *testing.T) {
	ctx, s := setup(t)
	for _, d := range []string{"a", "b", "c", "d", "e"} {
		put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: d, Content: "The otter notes " + d + "."})
	}
	forgotten := forgetTime(t, ctx, s)
	// The last document is held by another transaction: the third batch
	// waits for it until the budget ends.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM documents WHERE doc_id = 'e' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	var holder int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	// The budget ends once the third batch waits for e, not at a time:
	// a stall of the first two batches past a 2 s budget (they take
	// 0.2-0.4 s under -race at load 20) left 2 deleted, not 4.
	budget, cancel := context.WithCancel(store.WithDeleteBatch(ctx, 2))
	type deleted struct {
		n   int64
		err error
	}
	del := make(chan deleted, 1)
	go func() {
		n, err := s.DeleteDocumentsBefore(budget, "alice", forgotten)
		del <- deleted{n, err}
	}()
	if blockedBy(t, s, holder, func() bool { return len(del) > 0 }, "the third batch to wait for e") == 0 {
		d := <-del
		t.Fatalf("deleted %d, %v without waiting for e", d.n, d.err)
	}
	cancel()
	d := <-del
	if n, err := d.n, d.err; err == nil || n != 4 {
		t.Fatalf("deleted %d, %v; want 4 and the budget's end", n, err)
	}
	if docs, _, err := s.ListDocuments(ctx, alice, "kb", "", 10); err != nil || len(docs) != 1 || docs[0].DocID != "e" {
		t.Fatalf("alice's kb after the budget: %+v, %v; want e alone", docs, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The next start goes on.
	if n, err := s.DeleteDocumentsBefore(store.WithDeleteBatch(ctx, 2), "alice", forgotten); err != nil || n != 1 {
		t.Fatalf("deleted %d, %v; want the last one", n, err)
	}
	if cs, err := s.Collections(ctx, alice); err != nil || len(cs) != 0 {
		t.Errorf("alice's collections: %v, %v; want none", cs, err)
	}
}

// A forget cut short after its memory's transaction committed is finished
// by DeleteDocumentsBefore, which cannot tell the user's default
// collections of before the forget from those set after (they have no
// time): the memory's transaction deletes them, so a shared scope granted
// again after the forget does not bring back the default the user chose
// before it. Before, the default stayed, and came back with the grant.
func TestForgetCutShortDeletesTheDefaultCollections(t *testing.T) {
	ctx, s := setup(t)
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "notes", DocID: "a", Content: "The zebra notes."})
	put(t, ctx, s, store.DocumentPut{Owner: store.Owner{Shared: "team-x"}, Collection: "handbook", DocID: "h", Content: "The zebra handbook."})
	if _, err := s.GrantReader(ctx, "team-x", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetDefaultCollections(ctx, "alice", []string{"team-x/handbook", "notes"}); err != nil {
		t.Fatal(err)
	}
	_, tomb, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}, store.RiverJobs{})
	if err != nil {
		t.Fatal(err)
	}
	// Cut short here: the next start finishes the documents.
	if _, err := s.DeleteDocumentsBefore(ctx, "alice", tomb.ForgottenAt, docJobs...); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GrantReader(ctx, "team-x", "alice"); err != nil { // granted again after the forget
		t.Fatal(err)
	}
	if got, err := s.DefaultCollections(ctx, "alice"); err != nil || len(got) != 0 {
		t.Errorf("alice's defaults after the forget and a new grant: %q, %v; want none (chosen before the forget)", got, err)
	}
	// Set after the forget: stays.
	if _, err := s.SetDefaultCollections(ctx, "alice", []string{"team-x/handbook"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteDocumentsBefore(ctx, "alice", tomb.ForgottenAt, docJobs...); err != nil {
		t.Fatal(err)
	}
	if got, err := s.DefaultCollections(ctx, "alice"); err != nil || !slices.Equal(got, []string{"team-x/handbook"}) {
		t.Errorf("alice's defaults set after the forget: %q, %v; want team-x/handbook", got, err)
	}
}

// waitersOn counts the transactions waiting for the one of the backend
// pid (a lock it holds).
// beginWithPID begins a transaction, rolled back when the test ends
// unless committed, and returns it with its backend's pid (for
// waitersOn).
func beginWithPID(t *testing.T, ctx context.Context, s *store.Store) (pgx.Tx, int) {
	t.Helper()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.WithoutCancel(ctx)) })
	var pid int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return tx, pid
}

func waitersOn(t *testing.T, ctx context.Context, s *store.Store, pid int) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks w JOIN pg_locks p
		ON p.pid = $1 AND p.locktype = 'transactionid' AND p.granted AND w.transactionid = p.transactionid
		WHERE w.locktype = 'transactionid' AND NOT w.granted`, pid).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// forgetTime is the database's time now, as a forget's tombstone takes it:
// what is written after it (a later transaction) has a later time.
func forgetTime(t *testing.T, ctx context.Context, s *store.Store) time.Time {
	t.Helper()
	var now time.Time
	if err := s.Pool().QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

// holdDocsCap begins a transaction holding the documents cap's lock: a
// put waits for it between reading its collection and writing its
// document. It is rolled back at the test's end unless committed.
func holdDocsCap(t *testing.T, ctx context.Context, s *store.Store) pgx.Tx {
	t.Helper()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('memoryd.docs_cap.' || current_schema(), 0))`); err != nil {
		t.Fatal(err)
	}
	return tx
}

// A read grant made again after the forget's time (`docs grant` of a
// scope the user held already) is the operator's grant after the forget,
// as a new one is: the forget's finish keeps it. The grant was left as it
// was (nothing changed), with its time from before the forget, and the
// forget then deleted it: granted during the forget, gone after it.
func TestForgetCollectionsKeepsAGrantMadeAgainAfterIt(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.GrantReader(ctx, "team-x", "alice"); err != nil {
		t.Fatal(err)
	}
	forgotten := forgetTime(t, ctx, s)
	if changed, err := s.GrantReader(ctx, "team-x", "alice"); err != nil || changed {
		t.Fatalf("grant again: changed %v, %v; want it reported unchanged", changed, err)
	}
	if _, err := s.ForgetCollections(ctx, "alice", forgotten, docJobs...); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM collection_readers WHERE user_id = 'alice'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("alice's grants after the forget: %d, %v; want team-x, granted again after it", n, err)
	}
}

// A document put again after the forget's time (a new text under a doc id
// of before it) is the user's write after the forget, as a new doc id is,
// and as a restore counts it (userWrittenSince, by put_at): the
// forget's finish keeps it. It was deleted by its created_at, the first
// put's: a put answered as stored during the forget was gone after it.
// Read by put_at (migration 066), the put's own time, apart from
// updated_at, which chunking sets too.
func TestForgetCollectionsKeepsADocumentPutAgainAfterIt(t *testing.T) {
	ctx, s := setup(t)
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "notes", DocID: "d1", Content: "# Notes\nThe boat was red."})
	forgotten := forgetTime(t, ctx, s)
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "notes", DocID: "d1", Content: "# Notes\nThe boat is blue now."})
	if _, err := s.ForgetCollections(ctx, "alice", forgotten, docJobs...); err != nil {
		t.Fatal(err)
	}
	docs, _, err := s.ListDocuments(ctx, alice, "notes", "", 10)
	if err != nil || len(docs) != 1 {
		t.Errorf("alice's notes after the forget: %+v, %v; want d1 as put again after the forget", docs, err)
	}
}

// A document put before a recorded forget and chunked after it (its
// index job ran after the restore of a database from before the forget)
// is not the user's write since the forget: the forget is applied again.
// Chunking set updated_at, which userWrittenSince read as a put since the
// forget, and the forget was never applied again (ErrWrittenSince); it
// reads put_at now (migration 066), which chunking leaves.
func TestReapplyForgetPastADocumentChunkedSince(t *testing.T) {
	ctx, s := setup(t)
	r, err := s.PutDocument(ctx, store.DocumentPut{Owner: alice, Collection: "notes", DocID: "d1", Content: "# Notes\nThe boat was red."})
	if err != nil || r.Status != store.DocPending {
		t.Fatalf("put status %q, %v; want pending (chunked by its job)", r.Status, err)
	}
	recorded := forgetTime(t, ctx, s)
	if done, err := s.IndexDocument(ctx, r.Collection.ID, "d1", r.Hash, chunkWith); err != nil || !done {
		t.Fatalf("index: %v, %v", done, err)
	}
	if _, _, err := s.ReapplyForget(ctx, "alice", "alice", store.StreamPosition{Seq: 1}, recorded); err != nil {
		t.Fatalf("reapply the recorded forget: %v; want it applied (the document was put before it)", err)
	}
}

// A document put again with the content it holds writes nothing (a
// periodic sync's re-puts leave no row version, which the size's high
// water would count against the documents' TOASTed content): it is the
// content of before the forget, which the forget deletes, and a restore
// does not count it as written since.
func TestForgetCollectionsDeletesADocumentPutAgainUnchangedAfterIt(t *testing.T) {
	ctx, s := setup(t)
	d := store.DocumentPut{Owner: alice, Collection: "notes", DocID: "d1", Content: "# Notes\nThe boat was red."}
	put(t, ctx, s, d)
	forgotten := forgetTime(t, ctx, s)
	var before, after int64
	versions := func() (n int64) {
		if err := s.Pool().QueryRow(ctx, `SELECT xmin::text::bigint FROM documents WHERE doc_id = 'd1'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before = versions()
	if r, err := s.PutDocument(ctx, d); err != nil || !r.Unchanged {
		t.Fatalf("put again: %+v, %v; want unchanged", r, err)
	}
	if after = versions(); after != before {
		t.Errorf("the unchanged put wrote the document's row (xmin %d, was %d); want nothing written", after, before)
	}
	if _, _, err := s.ReapplyForget(ctx, "alice", "alice", store.StreamPosition{Seq: 1}, forgotten); err != nil {
		t.Errorf("reapply the forget: %v; want it applied (the content is of before it)", err)
	}
}

// A serve of the release before migration 066 puts new content over a
// document with its own statement, which does not set put_at: the
// migration's trigger does, so a forget running meanwhile keeps the
// document as it keeps one the new release put again, where put_at (the
// earlier put's) would have had it deleted.
func TestForgetCollectionsKeepsADocumentPutAgainByThePreviousRelease(t *testing.T) {
	ctx, s := setup(t)
	r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "notes", DocID: "d1", Content: "# Notes\nThe boat was red."})
	forgotten := forgetTime(t, ctx, s)
	// PutDocument's write before migration 066.
	content := "# Notes\nThe boat is blue now."
	if _, err := s.Pool().Exec(ctx, `
		INSERT INTO documents (collection_id, doc_id, source, content_hash, content, metadata, size_bytes, status, chunks)
		VALUES ($1, $2, '', $3, $4, '{}', $5, 'pending', 0)
		ON CONFLICT (collection_id, doc_id) DO UPDATE SET source = excluded.source,
			content_hash = excluded.content_hash, content = excluded.content, metadata = excluded.metadata,
			size_bytes = excluded.size_bytes, status = excluded.status, chunks = excluded.chunks, updated_at = now()`,
		r.Collection.ID, "d1", store.DocumentHash(content), content, len(content)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForgetCollections(ctx, "alice", forgotten, docJobs...); err != nil {
		t.Fatal(err)
	}
	docs, _, err := s.ListDocuments(ctx, alice, "notes", "", 10)
	if err != nil || len(docs) != 1 {
		t.Errorf("alice's notes after the forget: %+v, %v; want d1 as the previous release put it again after the forget", docs, err)
	}
}
