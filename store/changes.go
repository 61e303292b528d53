package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The summary changes (events.Change's types), written by the operations
// that change many rows at once and silence the row triggers meanwhile
// (quietly). The row triggers (migration 024) write the others.
const (
	changeContextCleared  = "context.cleared"
	changeMemoryImported  = "memory.imported"
	changeMemoryReset     = "memory.reset"
	changeMemoryForgotten = "memory.forgotten"
)

// Change is one committed change of a user's memory waiting in the outbox.
type Change struct {
	// ID is the outbox row's id.
	ID     int64
	UserID string
	// Seq numbers the user's changes in commit order, from 1, without gaps.
	Seq int64
	// Payload is the change's JSON object: its type and the fields of the
	// type (see events.Change), without user_id, seq and at.
	Payload json.RawMessage
	// At is when it was committed (the clock at commit).
	At time.Time
}

// quietly runs fn with the change triggers silenced, so that an operation
// on many rows records one summary (recordChange) rather than a change per
// row. The setting is local to the transaction and reset after fn.
func (s *Store) quietly(ctx context.Context, fn func() error) error {
	if _, err := s.db.Exec(ctx, `SELECT set_config('memoryd.changes_quiet', 'on', true)`); err != nil {
		return fmt.Errorf("silence changes: %w", err)
	}
	if err := fn(); err != nil {
		return err
	}
	if _, err := s.db.Exec(ctx, `SELECT set_config('memoryd.changes_quiet', '', true)`); err != nil {
		return fmt.Errorf("silence changes: %w", err)
	}
	return nil
}

// recordChange writes a summary change of typ for each of the users, with
// count (when not zero) saying how many rows it covers. It must run in the
// transaction of the change it records.
func (s *Store) recordChange(ctx context.Context, typ string, count int64, userIDs ...string) error {
	if _, err := s.db.Exec(ctx, `INSERT INTO memory_changes (user_id, payload)
		SELECT u, jsonb_strip_nulls(jsonb_build_object('type', $2::text, 'count', nullif($3::bigint, 0)))
		FROM unnest($1::text[]) AS u`, userIDs, typ, count); err != nil {
		return fmt.Errorf("record %s change: %w", typ, err)
	}
	return nil
}

// ChangeUsers returns up to limit users with committed changes waiting
// whose id sorts after after ("" for the first), in user id order: a
// publisher pages through them and starts again from "" once a page came
// back short, so that each user gets a turn per pass. It costs an index
// probe per user returned (a "loose index scan" of the (user_id, seq)
// index), whatever the number of changes waiting: a GROUP BY over the
// outbox read every row of it, each round, and a replay can leave
// millions there.
func (s *Store) ChangeUsers(ctx context.Context, after string, limit int) ([]string, error) {
	rows, err := s.db.Query(ctx, `WITH RECURSIVE u AS (
			(SELECT user_id FROM memory_changes WHERE user_id > $1 AND seq IS NOT NULL ORDER BY user_id LIMIT 1)
			UNION ALL
			SELECT (SELECT m.user_id FROM memory_changes m WHERE m.user_id > u.user_id AND m.seq IS NOT NULL
			        ORDER BY m.user_id LIMIT 1)
			FROM u WHERE u.user_id IS NOT NULL
		)
		SELECT user_id FROM u WHERE user_id IS NOT NULL LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("change users: %w", err)
	}
	users, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("change users: %w", err)
	}
	return users, nil
}

// SendChanges hands up to limit of the user's committed changes after seq
// afterSeq (0: from the first), in seq order, to send and deletes them once send returned nil, all in one
// transaction that holds the user's change lock (an advisory lock per user
// and schema), so that of several processes only one sends a user's
// changes at a time and their order holds. Only the changes handed to send
// are deleted (by id). When another process holds the
// lock it returns 0 without waiting; when send fails nothing is deleted
// (they are sent again: delivery is at least once). It returns how many
// changes were sent. A publisher passes the last seq it sent of the user
// so that the read starts past the index entries of the rows it just
// deleted (dead until vacuumed), rather than step over them each batch.
func (s *Store) SendChanges(ctx context.Context, userID string, afterSeq int64, limit int, send func([]Change) error) (int, error) {
	var n int
	err := s.InTx(ctx, func(_ pgx.Tx, q *Store) error {
		var locked bool
		if err := q.db.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtext('memoryd.changes.' || current_schema()), hashtext($1))`,
			userID).Scan(&locked); err != nil || !locked {
			return err
		}
		rows, err := q.db.Query(ctx, `SELECT id, user_id, seq, payload, created_at FROM memory_changes
			WHERE user_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, userID, afterSeq, limit)
		if err != nil {
			return err
		}
		changes, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (c Change, err error) {
			return c, row.Scan(&c.ID, &c.UserID, &c.Seq, &c.Payload, &c.At)
		})
		if err != nil || len(changes) == 0 {
			return err
		}
		if err := send(changes); err != nil {
			return err
		}
		// Exactly the rows sent: a change committed meanwhile (a forget
		// deleting the ones read and writing its own) is not among them.
		ids := make([]int64, len(changes))
		for i, c := range changes {
			ids[i] = c.ID
		}
		if _, err := q.deleteChangesWhere(ctx, `c.id = ANY($1)`, ids); err != nil {
			return err
		}
		n = len(changes)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("send changes: %w", err)
	}
	return n, nil
}

// DropChanges deletes committed changes older than before that were never
// sent (NATS unreachable that long), so that the outbox cannot grow without
// bound, but for each user's newest: published when it can be, it shows a
// subscriber the gap in seq, and the subscriber re-reads the memory. Were
// it dropped too, a user whose last changes went (a forget's
// memory.forgotten among them) would never show one, and a cache would
// keep what memoryd no longer has. It returns how many went.
func (s *Store) DropChanges(ctx context.Context, before time.Time) (int64, error) {
	n, err := s.deleteChangesWhere(ctx, `c.seq IS NOT NULL AND c.created_at < $1
		AND c.seq < (SELECT max(m.seq) FROM memory_changes m WHERE m.user_id = c.user_id)`, before)
	if err != nil {
		return 0, fmt.Errorf("delete expired unsent changes: %w", err)
	}
	return n, nil
}

// deleteChangesWhere deletes the committed changes where (an SQL
// condition on memory_changes as c, with args) selects, locked in id order
// first, and returns how many went. Every writer deleting several changes
// takes them so (the publisher's batch, the drop of old unsent ones, a
// forget of their user): a user's seq follows commit order, not id order,
// and deleted as each statement's plan met them (by id, by (user_id, seq),
// in the table's order), two of them each held a change the other waited
// for (40P01: TestSendChangesBesideForget, TestDropChangesBesideForget).
func (s *Store) deleteChangesWhere(ctx context.Context, where string, args ...any) (int64, error) {
	return s.deleteInIDOrder(ctx, "memory_changes", "c", where, args...)
}

// deleteInIDOrder deletes the rows of table (named alias in where, an SQL
// condition with args) that where selects, locked in id order first, and
// returns how many went: the one order of the writers that delete several
// rows of a table with an id (deleteChangesWhere, deleteSpoolsWhere say
// which and why).
func (s *Store) deleteInIDOrder(ctx context.Context, table, alias, where string, args ...any) (int64, error) {
	tag, err := s.db.Exec(ctx, `WITH locked AS MATERIALIZED (
			SELECT `+alias+`.id FROM `+table+` `+alias+` WHERE `+where+` ORDER BY `+alias+`.id FOR UPDATE OF `+alias+`)
		DELETE FROM `+table+` `+alias+` USING locked l WHERE `+alias+`.id = l.id`, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// PendingChanges counts the committed changes waiting in the outbox.
func (s *Store) PendingChanges(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM memory_changes WHERE seq IS NOT NULL`).Scan(&n); err != nil {
		return 0, fmt.Errorf("pending changes: %w", err)
	}
	return n, nil
}

// ChangeListener is a connection of its own (not one of the pool's)
// listening for the notification a commit with changes sends (pg_notify,
// delivered at commit). Close it when done.
type ChangeListener struct {
	conn   *pgx.Conn
	schema string
}

// ListenChanges opens a connection like the pool's and listens on it.
func (s *Store) ListenChanges(ctx context.Context) (*ChangeListener, error) {
	// ownConn: without the pool's BeforeConnect a listener reconnecting
	// after a rotation used what was read at Open and was refused until a
	// restart.
	conn, err := s.ownConn(ctx)
	if err != nil {
		return nil, fmt.Errorf("listen changes: %w", err)
	}
	l := &ChangeListener{conn: conn}
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&l.schema); err != nil {
		l.Close()
		return nil, fmt.Errorf("listen changes: %w", err)
	}
	if _, err := conn.Exec(ctx, `LISTEN memoryd_changes`); err != nil {
		l.Close()
		return nil, fmt.Errorf("listen changes: %w", err)
	}
	return l, nil
}

// Wait returns nil when changes of this store's schema were committed
// since the last Wait (every schema of the database shares the channel),
// or ctx's error when it ends first, or the connection's error.
func (l *ChangeListener) Wait(ctx context.Context) error {
	for {
		n, err := l.conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait for changes: %w", err)
		}
		if n.Payload == l.schema {
			return nil
		}
	}
}

// Close closes the connection (which ends the listening).
func (l *ChangeListener) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = l.conn.Close(ctx)
}
