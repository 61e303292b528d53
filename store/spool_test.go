package store_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

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

func always([]byte) bool { return true }

// TestSpoolReadsTheSnapshot: a spooled export is the export of its
// snapshot, read in parts from any offset, whatever the memory does after;
// only its own user reads it.
func TestSpoolReadsTheSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := spoolSetup(t)
	var want bytes.Buffer
	if err := s.Export(ctx, "alice", &want); err != nil {
		t.Fatal(err)
	}
	data, id, err := s.SpoolExport(ctx, "alice", "alice", always)
	if err != nil || id == "" || !bytes.Equal(data, want.Bytes()) {
		t.Fatalf("SpoolExport: id %q, %d bytes, %v; want a copy of the %d bytes of Export", id, len(data), err, want.Len())
	}
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: "city", Value: "Lisbon", SourceAt: t0.Add(1), EventID: "e2"}}); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for off := int64(0); ; {
		part, size, err := s.ReadSpool(ctx, "alice", "alice", id, off, 37)
		if err != nil || size != int64(want.Len()) {
			t.Fatalf("ReadSpool at %d: %d of %d bytes, %v", off, len(part), size, err)
		}
		got, off = append(got, part...), off+int64(len(part))
		if off == size {
			break
		}
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("the parts read are not the snapshot's export:\n%s\nwant\n%s", got, want.Bytes())
	}
	if _, _, err := s.ReadSpool(ctx, "bob", "bob", id, 0, 10); !errors.Is(err, store.ErrSpoolGone) {
		t.Errorf("bob reading alice's copy: %v, want ErrSpoolGone", err)
	}
	// Not kept when spool says so.
	if _, id, err := s.SpoolExport(ctx, "bob", "bob", func([]byte) bool { return false }); err != nil || id != "" {
		t.Errorf("an export not to keep: id %q, %v", id, err)
	}
}

// TestSpoolOfAForgottenUserIsGone: a copy saved before a forget goes
// with it (see TestSpoolSavedAcrossAForgetIsNotKept for one whose save
// the forget overtakes).
func TestSpoolOfAForgottenUserIsGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := spoolSetup(t)
	_, id, err := s.SpoolExport(ctx, "bob", "bob", always)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ForgetUser(ctx, "bob", "bob", store.StreamPosition{}); err != nil {
		t.Fatal(err)
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
	for range 6 {
		_, id, err := s.SpoolExport(ctx, "alice", "alice", always)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
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
	_, id, err := s.SpoolExport(ctx, "alice", "alice", func([]byte) bool {
		if _, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}); err != nil {
			t.Fatal(err)
		}
		return true
	})
	if !errors.Is(err, store.ErrSpoolGone) || id != "" {
		t.Errorf("SpoolExport across a forget: id %q, %v; want ErrSpoolGone and no copy", id, err)
	}
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM export_spools WHERE user_id = 'alice'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("alice's copies after a forget, none read: %d, %v; want none", n, err)
	}
}
