package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// spoolSetup gives alice and bob some memory each.
func spoolSetup(t *testing.T) *store.Store {
	t.Helper()
	s := storetest.New(t)
	ctx := context.Background()
	for _, u := range []string{"alice", "bob"} {
		if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: u, Key: "city", Value: "Porto " + u, SourceAt: t0, EventID: "e1"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: u, Question: "Tea? " + u, Answer: strings.Repeat("green ", 100), CreatedAt: t0, EventID: "e1"}}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func always([]byte, bool) bool { return true }

// spoolHead is the first bytes SpoolExport returns in these tests: less
// than any export here, so that every copy is written while it is read.
const spoolHead = 100

// readAll reads a copy in reads of n bytes and checks each says size.
func readAll(t *testing.T, s *store.Store, user, id string, n int, size int64) []byte {
	t.Helper()
	var got []byte
	for off := int64(0); off < size; {
		part, sz, err := s.ReadSpool(context.Background(), user, user, id, off, n)
		if err != nil || sz != size || len(part) == 0 {
			t.Fatalf("ReadSpool at %d: %d bytes of %d, %v; want some of %d", off, len(part), sz, err, size)
		}
		got, off = append(got, part...), off+int64(len(part))
	}
	return got
}

// spoolCount counts the copies of user and the parts they hold.
func spoolCount(t *testing.T, s *store.Store, user string) (copies, parts int) {
	t.Helper()
	if err := s.Pool().QueryRow(context.Background(), `SELECT (SELECT count(*) FROM export_spools WHERE user_id = $1),
		(SELECT count(*) FROM export_spool_parts p JOIN export_spools c ON c.id = p.spool_id WHERE c.user_id = $1)`, user).Scan(&copies, &parts); err != nil {
		t.Fatal(err)
	}
	return copies, parts
}

// allParts counts every part, of any copy.
func allParts(t *testing.T, s *store.Store) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM export_spool_parts`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSpoolReadsTheSnapshot: a spooled export is the export of its
// snapshot, read in parts from any offset, whatever the memory does after;
// only its own user reads it.
func TestSpoolReadsTheSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := spoolSetup(t)
	want := export(t, ctx, s, "alice")
	data, size, id, err := s.SpoolExport(ctx, "alice", "alice", spoolHead, always)
	if err != nil || id == "" || size != int64(len(want)) || !bytes.Equal(data, want[:spoolHead]) {
		t.Fatalf("SpoolExport: id %q, %d bytes of %d, %v; want a copy of the %d bytes of Export and its first %d", id, len(data), size, err, len(want), spoolHead)
	}
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: "city", Value: "Lisbon", SourceAt: t0.Add(1), EventID: "e2"}}); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for off := int64(0); ; {
		part, size, err := s.ReadSpool(ctx, "alice", "alice", id, off, 37)
		if err != nil || size != int64(len(want)) {
			t.Fatalf("ReadSpool at %d: %d of %d bytes, %v", off, len(part), size, err)
		}
		got, off = append(got, part...), off+int64(len(part))
		if off == size {
			break
		}
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the parts read are not the snapshot's export:\n%s\nwant\n%s", got, want)
	}
	if _, _, err := s.ReadSpool(ctx, "bob", "bob", id, 0, 10); !errors.Is(err, store.ErrSpoolGone) {
		t.Errorf("bob reading alice's copy: %v, want ErrSpoolGone", err)
	}
	// Not kept when spool says so.
	// Not kept when spool says so, long or not.
	for _, head := range []int{spoolHead, 1 << 20} {
		if _, _, id, err := s.SpoolExport(ctx, "bob", "bob", head, func([]byte, bool) bool { return false }); err != nil || id != "" {
			t.Errorf("an export not to keep (head %d): id %q, %v", head, id, err)
		}
	}
	if copies, parts := spoolCount(t, s, "bob"); copies != 0 || parts != 0 {
		t.Errorf("bob's exports not kept left %d copies, %d parts", copies, parts)
	}
	// An export no longer than head is returned whole, and kept when
	// spool says so.
	var bob bytes.Buffer
	if err := s.Export(ctx, "bob", &bob); err != nil {
		t.Fatal(err)
	}
	data, size, id, err = s.SpoolExport(ctx, "bob", "bob", bob.Len(), func(head []byte, whole bool) bool {
		if !whole || !bytes.Equal(head, bob.Bytes()) {
			t.Errorf("spool asked with %d bytes, whole %v; want the whole %d", len(head), whole, bob.Len())
		}
		return true
	})
	if err != nil || id == "" || !bytes.Equal(data, bob.Bytes()) {
		t.Fatalf("a short export kept: id %q, %d bytes, %v", id, len(data), err)
	}
	if got := readAll(t, s, "bob", id, 1000, size); !bytes.Equal(got, bob.Bytes()) {
		t.Errorf("a short export's copy is not the export")
	}
}

// TestSpoolOfAForgottenUserIsGone: a copy saved before a forget goes
// with it (see TestSpoolSavedAcrossAForgetIsNotKept for one whose save
// the forget overtakes).
func TestSpoolOfAForgottenUserIsGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := spoolSetup(t)
	_, _, id, err := s.SpoolExport(ctx, "bob", "bob", spoolHead, always)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ForgetUser(ctx, "bob", "bob", store.StreamPosition{}); err != nil {
		t.Fatal(err)
	}
	if copies, parts := spoolCount(t, s, "bob"); copies != 0 || allParts(t, s) != 0 {
		t.Errorf("after bob's forget: %d copies, %d parts left", copies, parts)
	}
	if _, _, err := s.ReadSpool(ctx, "bob", "bob", id, 0, 10); !errors.Is(err, store.ErrSpoolGone) {
		t.Errorf("a copy saved before the forget: %v, want ErrSpoolGone", err)
	}
}

// TestSpoolsAreBounded: a copy unread for SpoolTTL is gone and deleted by
// DeleteExpiredSpools; a user's exports keep their newest copies only.
func TestSpoolsAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := spoolSetup(t)
	var ids []string
	ctx = store.WithSpoolPartBytes(ctx, 100)
	for range 6 {
		_, _, id, err := s.SpoolExport(ctx, "alice", "alice", spoolHead, always)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	_, perCopy := spoolCount(t, s, "alice")
	perCopy /= 4
	if perCopy < 2 {
		t.Fatalf("%d parts a copy; want several", perCopy)
	}
	read := func(id string) error {
		_, _, err := s.ReadSpool(ctx, "alice", "alice", id, 0, 10)
		return err
	}
	for i, id := range ids {
		if err := read(id); (i < 2) != errors.Is(err, store.ErrSpoolGone) || (i >= 2 && err != nil) {
			t.Errorf("copy %d of 6: %v; want the two oldest gone and the rest read", i, err)
		}
	}
	if _, err := s.Pool().Exec(ctx, `UPDATE export_spools SET read_at = now() - make_interval(secs => $1) WHERE id = $2`,
		store.SpoolTTL.Seconds()+1, ids[5]); err != nil {
		t.Fatal(err)
	}
	if err := read(ids[5]); !errors.Is(err, store.ErrSpoolGone) {
		t.Errorf("a copy unread for %s: %v, want ErrSpoolGone", store.SpoolTTL, err)
	}
	if n, err := s.DeleteExpiredSpools(ctx); n != 1 || err != nil {
		t.Errorf("DeleteExpiredSpools: %d, %v; want 1", n, err)
	}
	// The parts went with the copies the bound and the expiry deleted.
	if copies, parts := spoolCount(t, s, "alice"); copies != 3 || parts != 3*perCopy || allParts(t, s) != parts {
		t.Errorf("after the bound and an expiry: %d copies, %d parts (%d in all); want 3 copies of %d parts", copies, parts, allParts(t, s), perCopy)
	}
	if err := read(ids[4]); err != nil {
		t.Errorf("a copy read a moment ago: %v", err)
	}
}

// TestSpoolSavedAcrossAForgetIsNotKept: a forget that commits between an
// export's snapshot and the save of its copy leaves no copy of the
// forgotten memory in the database, read or not: the save is refused
// (ErrSpoolGone, the export starts again). Before, the copy was saved
// and stayed, with the forgotten user's memory, until a page read it or
// reconcile found it unread for SpoolTTL.
func TestSpoolSavedAcrossAForgetIsNotKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := spoolSetup(t)
	// Short and long: the copy written after the read, and as it is read.
	for _, head := range []int{1 << 20, spoolHead} {
		_, _, id, err := s.SpoolExport(store.WithSpoolPartBytes(ctx, 64), "alice", "alice", head, func([]byte, bool) bool {
			if _, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}); err != nil {
				t.Fatal(err)
			}
			return true
		})
		if !errors.Is(err, store.ErrSpoolGone) || id != "" {
			t.Errorf("SpoolExport (head %d) across a forget: id %q, %v; want ErrSpoolGone and no copy", head, id, err)
		}
		if copies, parts := spoolCount(t, s, "alice"); copies != 0 || allParts(t, s) != 0 {
			t.Errorf("head %d: alice's copies after a forget, none read: %d copies, %d parts (%d in all); want none", head, copies, parts, allParts(t, s))
		}
	}
}

// bigSpoolMemory gives user context of about n bytes, in items of
// various sizes and multi-byte text, so that parts end inside lines and
// inside runes.
func bigSpoolMemory(t *testing.T, s *store.Store, user string, n int) {
	t.Helper()
	var items []store.ContextWrite
	for i, size := 0, 0; size < n; i++ {
		a := strings.Repeat(fmt.Sprintf("é%d\"\n ", i), 1+(i*7919)%3000)
		items = append(items, store.ContextWrite{UserID: user, Question: fmt.Sprintf("q %d ü", i), Answer: a, CreatedAt: t0.Add(time.Duration(i%17) * time.Second), EventID: "e"})
		size += len(a)
	}
	if _, err := s.InsertContext(context.Background(), items); err != nil {
		t.Fatal(err)
	}
}

// TestSpoolPartsReadAcrossBoundaries: a copy written in parts reads back
// as the export from any offset for any length, within a part, across
// one or several, to its end; at the real part size too. Before migration
// 063 the copy was one bytea built whole in memory.
func TestSpoolPartsReadAcrossBoundaries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := spoolSetup(t)
	bigSpoolMemory(t, s, "alice", 2<<20+256<<10) // past two parts
	want := export(t, ctx, s, "alice")
	size := int64(len(want))
	// At the real part size: pages of a typical length, and reads around
	// each part's end.
	head, sz, id, err := s.SpoolExport(ctx, "alice", "alice", 1000, always)
	if err != nil || sz != size || !bytes.Equal(head, want[:1000]) {
		t.Fatalf("SpoolExport: %d bytes of %d, %v; want the first 1000 of %d", len(head), sz, err, size)
	}
	if got := readAll(t, s, "alice", id, 1000000, size); !bytes.Equal(got, want) {
		t.Errorf("pages of 1000000 bytes: %d bytes, not the export's %d", len(got), size)
	}
	for _, off := range []int64{1<<20 - 1, 1<<20 - 7, 2<<20 - 3, size - 5} {
		part, _, err := s.ReadSpool(ctx, "alice", "alice", id, off, 1<<20+10)
		if end := min(off+1<<20+10, size); err != nil || !bytes.Equal(part, want[off:end]) {
			t.Errorf("read at %d: %d bytes, %v; want the export's %d to %d", off, len(part), err, off, end)
		}
	}
	// Small parts, of a small memory (3 MB in 64-byte parts is 49,000
	// rows: 20 s of the suite): every offset of a stretch over three
	// parts, every length around a part.
	bigSpoolMemory(t, s, "bob", 20<<10)
	want = export(t, ctx, s, "bob")
	size = int64(len(want))
	_, _, id, err = s.SpoolExport(store.WithSpoolPartBytes(ctx, 64), "bob", "bob", spoolHead, always)
	if err != nil {
		t.Fatal(err)
	}
	for off := int64(0); off < 200; off++ {
		for _, n := range []int{1, 63, 64, 65, 129, 1000} {
			part, sz, err := s.ReadSpool(ctx, "bob", "bob", id, off, n)
			if end := min(off+int64(n), size); err != nil || sz != size || !bytes.Equal(part, want[off:end]) {
				t.Fatalf("read of %d at %d: %d bytes of %d, %v; want the export's %d to %d", n, off, len(part), sz, err, off, end)
			}
		}
	}
	if got := readAll(t, s, "bob", id, 4099, size); !bytes.Equal(got, want) {
		t.Errorf("small parts read in pages: %d bytes, not the export's %d", len(got), size)
	}
	// At and past the end: nothing, the size (a 409 for the page).
	for _, off := range []int64{size, size + 1, 1 << 40} {
		if part, sz, err := s.ReadSpool(ctx, "bob", "bob", id, off, 10); err != nil || len(part) != 0 || sz != size {
			t.Errorf("read at %d of %d: %d bytes, size %d, %v; want none", off, size, len(part), sz, err)
		}
	}
	// A serve of a release before 063 reads a copy's data: empty, so that
	// it answers its page 409 (past the end), never bytes of another
	// export.
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT octet_length(data) FROM export_spools WHERE id = $1`, id).Scan(&n); err != nil || n != 0 {
		t.Errorf("the copy's data for a previous release: %d bytes, %v; want none", n, err)
	}
}

// TestSpoolIsOneSnapshot: what changes after the export's snapshot (its
// copy still being saved) is not in the copy.
func TestSpoolIsOneSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := spoolSetup(t)
	bigSpoolMemory(t, s, "alice", 200<<10)
	want := export(t, ctx, s, "alice")
	_, size, id, err := s.SpoolExport(store.WithSpoolPartBytes(ctx, 4096), "alice", "alice", spoolHead, func([]byte, bool) bool {
		if _, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "alice", Question: "new?", Answer: "yes", CreatedAt: t0, EventID: "e9"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DeleteFact(ctx, "alice", "city"); err != nil {
			t.Fatal(err)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, "alice", id, 5000, size); !bytes.Equal(got, want) {
		t.Errorf("the copy holds what changed after its snapshot: %d bytes, want %d", len(got), len(want))
	}
}

// TestSpoolOnAPoolOfOneConnection: with a pool of one connection, which
// cannot write the copy while the snapshot is read, the export is read
// whole and its copy saved after. Writing it as it is read would wait
// for a second connection forever.
func TestSpoolOnAPoolOfOneConnection(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := spoolSetup(t)
	bigSpoolMemory(t, s, "alice", 100<<10)
	cfg := s.Pool().Config()
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	one := store.New(pool)
	want := export(t, ctx, one, "alice")
	head, size, id, err := one.SpoolExport(store.WithSpoolPartBytes(ctx, 1000), "alice", "alice", spoolHead, func(head []byte, whole bool) bool {
		if whole || len(head) != spoolHead {
			t.Errorf("spool asked with %d bytes, whole %v; want the first %d", len(head), whole, spoolHead)
		}
		return true
	})
	if err != nil || id == "" || size != int64(len(want)) || !bytes.Equal(head, want[:spoolHead]) {
		t.Fatalf("SpoolExport on one connection: id %q, %d of %d bytes, %v", id, len(head), size, err)
	}
	if got := readAll(t, one, "alice", id, 3000, size); !bytes.Equal(got, want) {
		t.Errorf("the copy: %d bytes, not the export's %d", len(got), len(want))
	}
}

// TestSpoolOfAPreviousRelease: a copy a serve of a release before 063
// saved (the export whole in data) is read as before, during a rolling
// upgrade.
func TestSpoolOfAPreviousRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := spoolSetup(t)
	want := export(t, ctx, s, "alice")
	const id = "0123456789abcdef0123456789abcdef"
	if _, err := s.Pool().Exec(ctx, `INSERT INTO export_spools (id, user_id, memory, data) VALUES ($1, 'alice', '0', $2)`, id, want); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, "alice", id, 77, int64(len(want))); !bytes.Equal(got, want) {
		t.Errorf("a previous release's copy: %d bytes, not the export's %d", len(got), len(want))
	}
	if _, _, err := s.ReadSpool(ctx, "bob", "bob", id, 0, 10); !errors.Is(err, store.ErrSpoolGone) {
		t.Errorf("bob reading alice's copy: %v, want ErrSpoolGone", err)
	}
}

// TestExportOrderIsBytesWhateverTheCollation: history, which an export
// streams in its query's order (as context), is in byte order of its keys
// (as Go sorts), not the database's collation: the same memory exports to
// the same bytes on any server. Here the column's collation is one where
// "k_a" comes before "k9a". (context's text columns cannot be altered so:
// a trigger names them.)
func TestExportOrderIsBytesWhateverTheCollation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	var icu bool
	if err := s.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_collation WHERE collname = 'und-x-icu')`).Scan(&icu); err != nil || !icu {
		t.Skipf("no ICU collation on this server (%v)", err)
	}
	if _, err := s.Pool().Exec(ctx, `ALTER TABLE fact_history ALTER COLUMN key TYPE text COLLATE "und-x-icu"`); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"k_a", "k9a"} {
		if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: k, Value: "v", SourceAt: t0, EventID: "e"}}); err != nil {
			t.Fatal(err)
		}
	}
	var exp bytes.Buffer
	if err := s.Export(ctx, "alice", &exp); err != nil {
		t.Fatal(err)
	}
	if a, b := bytes.Index(exp.Bytes(), []byte(`"type":"fact_history","key":"k_a"`)), bytes.Index(exp.Bytes(), []byte(`"type":"fact_history","key":"k9a"`)); a < 0 || b < 0 || b > a {
		t.Errorf("history not in byte order (\"k9a\" before \"k_a\"):\n%s", exp.Bytes())
	}
}
