package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// An export longer than a page is saved at its first page (a spool,
// migration 057) and its later pages are read from that copy: every page
// of one export is cut from one snapshot however the memory changes
// meanwhile, and a page reads its own bytes, not the whole memory again.
// The copy is written in parts of spoolPartBytes as the export is read
// (migration 063), so that serve holds a part of it at a time, not the
// user's whole memory.

// SpoolTTL is how long a spool is kept after its last page was read.
const SpoolTTL = time.Hour

// maxSpoolsPerUser bounds the copies one user's exports keep: a new one
// deletes the oldest beyond it, so that a client starting exports in a
// loop holds at most this many copies of the memory.
const maxSpoolsPerUser = 4

// spoolPartBytes is the size of a copy's parts (the last one's at most):
// what an export holds in memory beyond its first page while it is saved,
// and what a page reads beyond its own bytes (a part at each end). Each
// copy records its own, so that a release with another size reads it.
const spoolPartBytes = 1 << 20

// ErrSpoolGone is wrapped by ReadSpool's error when the export's copy is
// not there: unknown (or another user's), unread for SpoolTTL, replaced
// by newer exports of the user, or the user was forgotten since it was
// made. The export must start again.
var ErrSpoolGone = errors.New("export copy not found")

// SpoolExport reads the user's export (as Export writes it) from one
// snapshot and returns its first head bytes (all of it when it is no
// longer), its size, and the id of its saved copy ("" when none was
// saved). Once the export is read, before the copy is kept, spool is
// called with those first bytes (whole: they are the whole export) and
// says whether to keep the copy. An export longer than head is written to
// its copy as it is read, on a second connection of the pool, so that at
// most head bytes and a part of it are held in memory (with a pool of one
// or two connections, the export is held whole and its copy written
// after), and
// is not kept when spool says no. token is the user's
// subject token: the copy records which memory it is of (MemoryID), so
// that a forget since makes it gone. A forget that commits between the
// snapshot and the save makes the save fail with ErrSpoolGone (nothing is
// saved, whatever was written of the copy is rolled back): the export
// must start again.
func (s *Store) SpoolExport(ctx context.Context, userID, token string, head int, spool func(head []byte, whole bool) bool) ([]byte, int64, string, error) {
	// Writing the copy while the snapshot's rows are read takes a second
	// connection: a pool of one would wait for it forever, and a pool of
	// two would be the export's alone while it is read (River's fetches,
	// ingest and the change publisher waiting seconds for a connection).
	stream := s.pool.Config().MaxConns > 2
	w := &spoolWriter{ctx: ctx, s: s, userID: userID, head: head, stream: stream, partBytes: spoolPartBytes}
	if n, ok := ctx.Value(spoolPartKey{}).(int); ok {
		w.partBytes = n
	}
	defer w.rollback()
	// Repeatable read, so that the tombstone and every section are read
	// from one snapshot. The copy is written by another transaction (w's)
	// on another connection, while this one's rows are read.
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		q := s.WithTx(tx)
		tombs, err := q.tombstones(ctx, []string{token})
		if err != nil {
			return err
		}
		w.memory = MemoryID(tombs[token])
		return q.Export(ctx, userID, w)
	})
	if err != nil {
		return nil, 0, "", err
	}
	first, whole := w.first, w.tx == nil && len(w.buf) <= head
	if w.tx == nil {
		first = w.buf[:min(head, len(w.buf))]
	}
	if !spool(first, whole) {
		return first, w.size, "", nil
	}
	if err := w.save(token); err != nil {
		return nil, 0, "", fmt.Errorf("export: save copy: %w", err)
	}
	return first, w.size, w.id, nil
}

// spoolPartKey keys a test's part size (WithSpoolPartBytes).
type spoolPartKey struct{}

// spoolWriter takes an export's bytes and writes them to a new copy in
// parts, begun once they are more than head bytes; the copy is kept (save)
// or rolled back. It lives for one SpoolExport call, whose ctx it holds:
// Export writes to it as an io.Writer, which takes no context.
type spoolWriter struct {
	ctx            context.Context
	s              *Store
	userID, memory string
	head           int
	stream         bool   // write the copy while the export is read
	partBytes      int    // spoolPartBytes, unless a test sets it
	first          []byte // the first head bytes, once the copy is begun
	buf            []byte // the bytes not yet written to the copy
	size           int64
	tx             pgx.Tx // the copy's transaction, nil until it is begun
	id             string
	seq            int
}

func (w *spoolWriter) Write(p []byte) (int, error) {
	w.size += int64(len(p))
	w.buf = append(w.buf, p...)
	if w.tx == nil {
		if !w.stream || len(w.buf) <= w.head {
			return len(p), nil
		}
		w.first = bytes.Clone(w.buf[:w.head])
		if err := w.begin(); err != nil {
			return 0, err
		}
	}
	if err := w.flush(false); err != nil {
		return 0, err
	}
	return len(p), nil
}

// begin starts the copy's transaction and inserts the copy, its size not
// yet known.
func (w *spoolWriter) begin() error {
	tx, err := w.s.pool.Begin(w.ctx)
	if err != nil {
		return fmt.Errorf("export: save copy: %w", err)
	}
	w.tx = tx
	var b [16]byte
	_, _ = rand.Read(b[:])
	w.id = hex.EncodeToString(b[:])
	// data is empty: a serve of a release before 063 reading this copy
	// finds nothing at its cursor (a 409), not part of the export.
	if _, err := tx.Exec(w.ctx, `INSERT INTO export_spools (id, user_id, memory, data, part_bytes) VALUES ($1, $2, $3, '', $4)`,
		w.id, w.userID, w.memory, w.partBytes); err != nil {
		return fmt.Errorf("export: save copy: %w", err)
	}
	return nil
}

// flush writes the whole parts buf holds, and with last the rest too.
func (w *spoolWriter) flush(last bool) error {
	n := 0
	for len(w.buf)-n >= w.partBytes || (last && n < len(w.buf)) {
		part := w.buf[n:min(n+w.partBytes, len(w.buf))]
		if _, err := w.tx.Exec(w.ctx, `INSERT INTO export_spool_parts (spool_id, seq, data) VALUES ($1, $2, $3)`, w.id, w.seq, part); err != nil {
			return fmt.Errorf("export: save copy: %w", err)
		}
		w.seq++
		n += len(part)
	}
	// Kept in place, so that buf stays about a part long.
	w.buf = w.buf[:copy(w.buf, w.buf[n:])]
	return nil
}

// save writes what is left of the copy and commits it, unless the user
// was forgotten since the snapshot (ErrSpoolGone, rolled back).
func (w *spoolWriter) save(token string) error {
	if w.tx == nil {
		// An export of at most head bytes that is kept all the same (its
		// bytes, escaped, need more than a page), or one read whole on a
		// pool of one or two connections.
		if err := w.begin(); err != nil {
			return err
		}
	}
	if err := w.flush(true); err != nil {
		return err
	}
	q := w.s.WithTx(w.tx)
	// Under the user's lock, which a forget holds to its commit, and
	// before any row lock of the deletes below (which a forget of this
	// user waiting for the lock may hold): a forget that committed since
	// the snapshot makes the copy one of a forgotten memory, not saved;
	// one that comes after the commit deletes it. The copy's rows written
	// so far are its own transaction's, which no forget sees or waits for.
	tombs, err := q.LockUsers(w.ctx, []string{token})
	if err != nil {
		return err
	}
	if MemoryID(tombs[token]) != w.memory {
		return ErrSpoolGone
	}
	if _, err := w.tx.Exec(w.ctx, `UPDATE export_spools SET size = $2, read_at = now() WHERE id = $1`, w.id, w.size); err != nil {
		return err
	}
	// Expired copies are the reconcile job's (DeleteExpiredSpools):
	// deleted here too, two saves could lock them in different orders.
	// Parts go with their copy (ON DELETE CASCADE). In id order, as the
	// delete of expired copies takes them (see deleteSpoolsWhere).
	if _, err := q.deleteSpoolsWhere(w.ctx, `s.user_id = $1 AND s.id NOT IN (
		SELECT id FROM export_spools WHERE user_id = $1 ORDER BY created_at DESC, id LIMIT $2)`, w.userID, maxSpoolsPerUser); err != nil {
		return err
	}
	err = w.tx.Commit(w.ctx)
	w.tx = nil
	return err
}

// rollback ends a copy not saved.
func (w *spoolWriter) rollback() {
	if w.tx != nil {
		// On a context of its own: the export's may be what ended it.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 5*time.Second)
		defer cancel()
		_ = w.tx.Rollback(ctx)
		w.tx = nil
	}
}

// ReadSpool returns at most n bytes of the user's spooled export id from
// byte off (none at or past its end), and the export's whole size. It
// reads only the parts of the copy those bytes span. It is ErrSpoolGone
// when the copy is not there or its user was forgotten since it was made
// (the copy is then deleted). Each read keeps the copy for another
// SpoolTTL.
func (s *Store) ReadSpool(ctx context.Context, userID, token, id string, off int64, n int) ([]byte, int64, error) {
	var (
		part      []byte
		size      int64
		forgotten bool
	)
	err := s.InTx(ctx, func(_ pgx.Tx, q *Store) error {
		var (
			memory    string
			parts     *int64 // a copy's size, when it is in parts
			partBytes *int32
		)
		err := q.db.QueryRow(ctx, `UPDATE export_spools SET read_at = now()
			WHERE id = $1 AND user_id = $2 AND read_at >= now() - make_interval(secs => $3)
			RETURNING memory, size, part_bytes, octet_length(data)`,
			id, userID, SpoolTTL.Seconds()).Scan(&memory, &parts, &partBytes, &size)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrSpoolGone
		}
		if err != nil {
			return err
		}
		tombs, err := q.tombstones(ctx, []string{token})
		if err != nil {
			return err
		}
		if MemoryID(tombs[token]) != memory {
			// Forgotten since: what the copy holds is gone from memory.
			// Committed, not returned as an error: InTx would roll it back.
			forgotten = true
			_, err := q.db.Exec(ctx, `DELETE FROM export_spools WHERE id = $1`, id)
			return err
		}
		if parts != nil {
			size = *parts
		}
		if off < 0 || off >= size || n <= 0 {
			return nil
		}
		end := min(off+int64(n), size)
		if parts == nil {
			// A copy of a release before 063, whole in data; substring
			// counts from 1.
			return q.db.QueryRow(ctx, `SELECT substring(data FROM $2 FOR $3) FROM export_spools WHERE id = $1`,
				id, off+1, end-off).Scan(&part)
		}
		part, err = q.readParts(ctx, id, int64(*partBytes), off, end)
		return err
	})
	if err == nil && forgotten {
		err = ErrSpoolGone
	}
	if err != nil {
		return nil, 0, fmt.Errorf("export: %w", err)
	}
	return part, size, nil
}

// readParts returns bytes off to end of a copy in parts of partBytes.
func (s *Store) readParts(ctx context.Context, id string, partBytes, off, end int64) ([]byte, error) {
	first, last := off/partBytes, (end-1)/partBytes
	rows, err := s.db.Query(ctx, `SELECT seq, data FROM export_spool_parts WHERE spool_id = $1 AND seq BETWEEN $2 AND $3 ORDER BY seq`,
		id, first, last)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, end-off)
	var (
		seq  int64
		data []byte
	)
	want := first
	if _, err := pgx.ForEachRow(rows, []any{&seq, &data}, func() error {
		at := seq * partBytes
		if seq != want || (seq < last && int64(len(data)) != partBytes) {
			return fmt.Errorf("copy %s: part %d of %d bytes where part %d of %d was due", id, seq, len(data), want, partBytes)
		}
		want++
		out = append(out, data[max(off-at, 0):min(end-at, int64(len(data)))]...)
		return nil
	}); err != nil {
		return nil, err
	}
	if int64(len(out)) != end-off {
		return nil, fmt.Errorf("copy %s: %d bytes read from %d, %d due", id, len(out), off, end-off)
	}
	return out, nil
}

// DeleteExpiredSpools deletes the export copies unread for SpoolTTL and
// returns how many it deleted.
func (s *Store) DeleteExpiredSpools(ctx context.Context) (int64, error) {
	n, err := s.deleteSpoolsWhere(ctx, `s.read_at < now() - make_interval(secs => $1)`, SpoolTTL.Seconds())
	if err != nil {
		return 0, fmt.Errorf("delete expired export copies: %w", err)
	}
	return n, nil
}

// deleteSpoolsWhere deletes the export copies where (an SQL condition on
// export_spools as s, with args) selects, with their parts, locked in id
// order first, and returns how many went. Every writer deleting several
// copies takes them so (the delete of expired ones, a save's of its
// user's oldest, a forget): deleted as each statement's plan met them (a
// user's by creation, the expired ones by their last read), two of them
// each held a copy the other waited for (40P01:
// TestDeleteExpiredSpoolsBesideForget).
func (s *Store) deleteSpoolsWhere(ctx context.Context, where string, args ...any) (int64, error) {
	return s.deleteInIDOrder(ctx, "export_spools", "s", where, args...)
}

// DeleteSpool deletes the user's export copy id (its last page was read),
// and nothing when it is already gone.
func (s *Store) DeleteSpool(ctx context.Context, userID, id string) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM export_spools WHERE id = $1 AND user_id = $2`, id, userID); err != nil {
		return fmt.Errorf("delete export copy: %w", err)
	}
	return nil
}
