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

// An export longer than a page is saved whole at its first page (a spool,
// migration 057) and its later pages are read from that copy: every page
// of one export is cut from one snapshot however the memory changes
// meanwhile, and a page reads its own bytes, not the whole memory again.

// SpoolTTL is how long a spool is kept after its last page was read.
const SpoolTTL = time.Hour

// maxSpoolsPerUser bounds the copies one user's exports keep: a new one
// deletes the oldest beyond it, so that a client starting exports in a
// loop holds at most this many copies of the memory.
const maxSpoolsPerUser = 4

// ErrSpoolGone is wrapped by ReadSpool's error when the export's copy is
// not there: unknown (or another user's), unread for SpoolTTL, replaced
// by newer exports of the user, or the user was forgotten since it was
// made. The export must start again.
var ErrSpoolGone = errors.New("export copy not found")

// SpoolExport reads the user's export (as Export writes it) from one
// snapshot and, when spool says it should be kept for paging, saves it and
// returns its id ("" when not kept). token is the user's subject token: the
// copy records which memory it is of (MemoryID), so that a forget since
// makes it gone. A forget that commits between the snapshot and the save
// makes the save fail with ErrSpoolGone (nothing is saved): the export
// must start again.
func (s *Store) SpoolExport(ctx context.Context, userID, token string, spool func(export []byte) bool) ([]byte, string, error) {
	var (
		buf    bytes.Buffer
		memory string
	)
	// Repeatable read, so that the tombstone and every section are read
	// from one snapshot; not read-only, for the save.
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		q := s.WithTx(tx)
		tombs, err := q.tombstones(ctx, []string{token})
		if err != nil {
			return err
		}
		memory = MemoryID(tombs[token])
		return q.Export(ctx, userID, &buf)
	})
	if err != nil {
		return nil, "", err
	}
	data := buf.Bytes()
	if !spool(data) {
		return data, "", nil
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	err = s.InTx(ctx, func(_ pgx.Tx, q *Store) error {
		// Under the user's lock, which a forget holds to its commit, and
		// first (before any row lock of the deletes below, which a forget
		// of this user waiting for the lock may hold): a forget that
		// committed since the snapshot makes the copy one of a forgotten
		// memory, not saved; one that comes after the save deletes it.
		// Before, such a copy was saved after the forget's delete and kept
		// the forgotten memory until it was read or expired.
		tombs, err := q.LockUsers(ctx, []string{token})
		if err != nil {
			return err
		}
		if MemoryID(tombs[token]) != memory {
			return ErrSpoolGone
		}
		// Expired copies are the reconcile job's (DeleteExpiredSpools):
		// deleted here too, two saves could lock them in different orders.
		if _, err := q.db.Exec(ctx, `INSERT INTO export_spools (id, user_id, memory, data) VALUES ($1, $2, $3, $4)`, id, userID, memory, data); err != nil {
			return err
		}
		_, err = q.db.Exec(ctx, `DELETE FROM export_spools WHERE user_id = $1 AND id NOT IN (
			SELECT id FROM export_spools WHERE user_id = $1 ORDER BY created_at DESC, id LIMIT $2)`, userID, maxSpoolsPerUser)
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("export: save copy: %w", err)
	}
	return data, id, nil
}

// ReadSpool returns at most n bytes of the user's spooled export id from
// byte off, and the export's whole size. It is ErrSpoolGone when the copy
// is not there or its user was forgotten since it was made (the copy is
// then deleted). Each read keeps the copy for another SpoolTTL.
func (s *Store) ReadSpool(ctx context.Context, userID, token, id string, off int64, n int) ([]byte, int64, error) {
	var (
		part      []byte
		size      int64
		memory    string
		forgotten bool
	)
	err := s.InTx(ctx, func(_ pgx.Tx, q *Store) error {
		// substring counts from 1.
		err := q.db.QueryRow(ctx, `UPDATE export_spools SET read_at = now()
			WHERE id = $1 AND user_id = $2 AND read_at >= now() - make_interval(secs => $5)
			RETURNING substring(data FROM $3 FOR $4), octet_length(data), memory`,
			id, userID, off+1, n, SpoolTTL.Seconds()).Scan(&part, &size, &memory)
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
		return nil
	})
	if err == nil && forgotten {
		err = ErrSpoolGone
	}
	if err != nil {
		return nil, 0, fmt.Errorf("export: %w", err)
	}
	return part, size, nil
}

// DeleteExpiredSpools deletes the export copies unread for SpoolTTL and
// returns how many it deleted.
func (s *Store) DeleteExpiredSpools(ctx context.Context) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM export_spools WHERE read_at < now() - make_interval(secs => $1)`, SpoolTTL.Seconds())
	if err != nil {
		return 0, fmt.Errorf("delete expired export copies: %w", err)
	}
	return tag.RowsAffected(), nil
}

// DeleteSpool deletes the user's export copy id (its last page was read),
// and nothing when it is already gone.
func (s *Store) DeleteSpool(ctx context.Context, userID, id string) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM export_spools WHERE id = $1 AND user_id = $2`, id, userID); err != nil {
		return fmt.Errorf("delete export copy: %w", err)
	}
	return nil
}
