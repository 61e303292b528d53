package enricher_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestExportCursorOffsetsPastAnyCopyAre409: a cursor naming the user's own
// copy at an offset no copy reaches (past 2 GiB, past int64) is one
// memoryd did not give: a 409, not a 500. Before, an offset over 2^31-1
// failed the page's query (substring takes int4) and was answered 500.
func TestExportCursorOffsetsPastAnyCopyAre409(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	bigMemory(t, st, "alice")
	ctx := slowCtx(t)
	first, err := h.client.ExportPage(ctx, events.ExportRequest{UserID: "alice"})
	if err != nil || first.Next == "" {
		t.Fatal(first.Next, err)
	}
	_, spool, ok := strings.Cut(first.Next, ".")
	if !ok {
		t.Fatalf("cursor %q has no copy id", first.Next)
	}
	for _, off := range []string{"2147483647", "2147483648", "9223372036854775807"} {
		cursor := "s" + off + "." + spool
		if _, err := h.client.ExportPage(ctx, events.ExportRequest{UserID: "alice", Cursor: cursor}); serviceCode(err) != 409 {
			t.Errorf("cursor %q: %v, want a 409", cursor, err)
		}
	}
	// The copy is still there for the export's real next page.
	if _, err := h.client.ExportPage(ctx, events.ExportRequest{UserID: "alice", Cursor: first.Next}); err != nil {
		t.Errorf("the real next page after the tries: %v", err)
	}
}

// forgetDuringExport is a store whose first export of a user is overtaken
// by a forget of the user between its snapshot and the save of its copy.
type forgetDuringExport struct {
	*store.Store
	t *testing.T
}

func (s forgetDuringExport) SpoolExport(ctx context.Context, userID, token string, head int, spool func([]byte, bool) bool) ([]byte, int64, string, error) {
	return s.Store.SpoolExport(ctx, userID, token, head, func(b []byte, whole bool) bool {
		if _, _, err := s.Store.ForgetUser(ctx, userID, token, store.StreamPosition{}); err != nil {
			s.t.Error(err)
		}
		return spool(b, whole)
	})
}

// TestExportFirstPageAcrossAForgetIs409: an export whose first page a
// forget overtakes (between its snapshot and the save of its copy) is a
// 409, start again, and leaves no copy of the forgotten memory behind.
// Before, the first page was answered from the forgotten memory and its
// copy saved after the forget had deleted the user's copies, kept until a
// page read it or reconcile found it unread for an hour.
func TestExportFirstPageAcrossAForgetIs409(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, forgetDuringExport{Store: st, t: t}, nil)
	bigMemory(t, st, "alice")
	ctx := slowCtx(t)
	if page, err := h.client.ExportPage(ctx, events.ExportRequest{UserID: "alice"}); serviceCode(err) != 409 {
		t.Errorf("a first page a forget overtook: %d bytes, next %q, %v; want a 409", len(page.Lines), page.Next, err)
	}
	var n int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM export_spools WHERE user_id = 'alice'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("alice's export copies after her forget: %d, %v; want none", n, err)
	}
}

// TestExportFirstPageHasItsOwnBudget: an export page's work is bounded by
// ExportTimeout, not WriteTimeout: the first page of a long export reads
// and copies the whole memory. Before, a 94 MB memory's first page took
// 9-10 s against the 5 s every write gets, and such a user could not be
// exported at all (an export walk). Here the write budget is 1 ms, which
// no first page meets.
func TestExportFirstPageHasItsOwnBudget(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, func(c *enricher.Config) { c.WriteTimeout = time.Millisecond })
	bigMemory(t, st, "alice")
	ctx := slowCtx(t)
	var got bytes.Buffer
	if err := h.client.Export(ctx, "alice", &got); err != nil {
		t.Fatalf("export with a 1 ms write budget: %v", err)
	}
	if want := storeExport(t, st, "alice"); !bytes.Equal(got.Bytes(), want) {
		t.Errorf("export: %d bytes, want the store's %d", got.Len(), len(want))
	}
}

// TestExportServesPreviousReleaseCursor: during a rolling upgrade an export
// begun on a serve of the release before migration 057 sends its cursor
// ("<line>.<digest>" of the whole export) to a serve of this one for its
// next page. It is served as that release would (its next cursors of the
// same form, so that either release serves them), and the pages
// concatenated are the export. Before, every such page was a 409 and the
// export started again, and with both releases answering, each of the
// export command's 3 tries met one: an upgrade walk saw 28 of 34 exports
// of a 5 MB memory fail while both served.
func TestExportServesPreviousReleaseCursor(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	bigMemory(t, st, "alice")
	ctx := slowCtx(t)
	want := storeExport(t, st, "alice")
	sum := sha256.Sum256(want)
	digest := hex.EncodeToString(sum[:12])
	header, _, _ := bytes.Cut(want, []byte("\n"))
	got := append(append([]byte{}, header...), '\n')
	cursor := "1." + digest // the previous release's cursor after its first page of the header alone
	pages := 0
	for cursor != "" {
		page, err := h.client.ExportPage(ctx, events.ExportRequest{UserID: "alice", Cursor: cursor})
		if err != nil {
			t.Fatalf("page after cursor %q: %v", cursor, err)
		}
		if page.Next != "" && !strings.HasSuffix(page.Next, "."+digest) {
			t.Fatalf("next cursor %q is not of the previous release's form", page.Next)
		}
		got = append(got, page.Lines...)
		cursor = page.Next
		pages++
	}
	if pages < 2 || !bytes.Equal(got, want) {
		t.Fatalf("%d pages, %d bytes; want the export's %d bytes over several pages", pages, len(got), len(want))
	}
	// Another memory's digest is a 409, as the previous release answered.
	if _, err := h.client.ExportPage(ctx, events.ExportRequest{UserID: "alice", Cursor: "1.0123456789abcdef01234567"}); serviceCode(err) != 409 {
		t.Errorf("a stale digest: %v, want a 409", err)
	}
}
