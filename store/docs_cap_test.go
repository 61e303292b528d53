package store_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestDocsCap checks the documents cap (DocumentPut.MaxTotalBytes): a put
// that would bring the documents' content over it is refused with a
// *DocsCapError and writes nothing (not its collection, not a pending
// document, not a replacement); a replacement counts its new size in place
// of the old one; unchanged and shrinking puts pass even over the cap.
func TestDocsCap(t *testing.T) {
	ctx, s := setup(t)
	text := func(n int, c byte) string { return strings.Repeat(string(c), n-1) + "." }
	capped := func(p store.DocumentPut, max int64) (store.PutResult, error) {
		p.MaxTotalBytes = max
		if p.Chunk == nil {
			p.Chunk = chunkWith
		}
		return s.PutDocument(ctx, p)
	}
	mustCap := func(err error, size, total int64) {
		t.Helper()
		var ce *store.DocsCapError
		if !errors.As(err, &ce) || ce.Cap != 250 || ce.Size != size || ce.Total != total {
			t.Fatalf("err %v, want a cap error of a %d byte document to %d bytes over 250", err, size, total)
		}
	}
	for _, id := range []string{"a", "b"} {
		if _, err := capped(store.DocumentPut{Owner: alice, Collection: "c", DocID: id, Content: text(100, id[0])}, 250); err != nil {
			t.Fatal(err)
		}
	}
	// 300 bytes would go over 250: refused, in a new collection too.
	_, err := capped(store.DocumentPut{Owner: alice, Collection: "new", DocID: "c", Content: text(100, 'c')}, 250)
	mustCap(err, 100, 300)
	if _, _, err := s.ListDocuments(ctx, alice, "new", "", 10); !errors.Is(err, store.ErrNoCollection) {
		t.Fatalf("the refused put's collection: %v, want none", err)
	}
	// A pending put (chunked later by a job) is refused at put time.
	_, err = s.PutDocument(ctx, store.DocumentPut{Owner: alice, Collection: "c", DocID: "p", Content: text(100, 'p'), MaxTotalBytes: 250})
	mustCap(err, 100, 300)
	// A replacement counts its new size instead of the old: 150 + 100 fits,
	// 160 + 100 does not, and the refused one leaves the old content.
	r, err := capped(store.DocumentPut{Owner: alice, Collection: "c", DocID: "a", Content: text(150, 'A')}, 250)
	if err != nil {
		t.Fatal(err)
	}
	_, err = capped(store.DocumentPut{Owner: alice, Collection: "c", DocID: "a", Content: text(160, 'x')}, 250)
	mustCap(err, 160, 260)
	docs, _, err := s.ListDocuments(ctx, alice, "c", "", 10)
	if err != nil || len(docs) != 2 || docs[0].Hash != r.Hash || docs[0].Size != 150 {
		t.Fatalf("documents %+v, %v; want a (150 bytes, kept) and b", docs, err)
	}
	// Over a lowered cap, an unchanged put and a shrinking one pass; a
	// growing one does not.
	if r, err := capped(store.DocumentPut{Owner: alice, Collection: "c", DocID: "b", Content: text(100, 'b')}, 100); err != nil || !r.Unchanged {
		t.Fatalf("unchanged put over the cap: %+v, %v", r, err)
	}
	if _, err := capped(store.DocumentPut{Owner: alice, Collection: "c", DocID: "a", Content: text(120, 'A')}, 100); err != nil {
		t.Fatalf("shrinking put over the cap: %v", err)
	}
	var ce *store.DocsCapError
	if _, err := capped(store.DocumentPut{Owner: alice, Collection: "c", DocID: "a", Content: text(121, 'A')}, 100); !errors.As(err, &ce) {
		t.Fatalf("growing put over the cap: %v", err)
	}
	// No cap (0): anything goes.
	if _, err := capped(store.DocumentPut{Owner: alice, Collection: "c", DocID: "big", Content: text(1000, 'z')}, 0); err != nil {
		t.Fatal(err)
	}
}

// TestDocsCapConcurrentPuts checks that concurrent capped puts cannot
// together go over the cap: of 8 puts of 100 bytes under a cap of 450,
// from different owners at once, exactly 4 are stored.
func TestDocsCapConcurrentPuts(t *testing.T) {
	ctx, s := setup(t)
	var (
		wg             sync.WaitGroup
		mu             sync.Mutex
		stored, capped int
	)
	for i := range 8 {
		wg.Go(func() {
			_, err := s.PutDocument(ctx, store.DocumentPut{Owner: store.Owner{User: fmt.Sprintf("u%d", i)}, Collection: "c", DocID: "d",
				Content: strings.Repeat("w ", 50), Chunk: chunkWith, MaxTotalBytes: 450})
			var ce *store.DocsCapError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				stored++
			case errors.As(err, &ce):
				capped++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var total int64
	if err := s.Pool().QueryRow(ctx, `SELECT coalesce(sum(size_bytes), 0)::bigint FROM documents`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if stored != 4 || capped != 4 || total != 400 {
		t.Fatalf("%d stored, %d refused, %d bytes; want 4, 4 and 400", stored, capped, total)
	}
}
