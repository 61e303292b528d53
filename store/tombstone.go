package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Tombstone is what a forget leaves of a user: the user token, where the
// turn stream stood when the forget began (its last event, or the user's
// latest turn recorded if later; see StreamPosition), the greatest sequence
// of the user's turns known by sequence alone, and when it happened.
type Tombstone struct {
	UserToken string
	Through   StreamPosition
	// SeqAlone is what a turn without a stored time (recorded by an
	// earlier release) is compared with: at least Through.Seq, and every
	// such turn of the user recorded before the forget. Apart from
	// Through.Seq: such turns may be of a stream since created again, and
	// their sequences would otherwise cover the new stream's turns
	// published just after the forget.
	SeqAlone    uint64
	ForgottenAt time.Time
}

// Covers reports whether the event at stream position p was published
// before the forget, so that nothing of it may be written any more
// (StreamPosition.Before): so every event of a stream deleted before the
// forget is covered, and none of a stream created after it, whatever its
// sequence. An event without a sequence (0) is covered; when either stored
// time is unknown (a tombstone or a turn of an earlier release) the
// sequences alone decide (SeqAlone).
func (t Tombstone) Covers(p StreamPosition) bool {
	if p.Seq == 0 {
		return true
	}
	if p.Stored.IsZero() || t.Through.Stored.IsZero() {
		return p.Seq <= max(t.SeqAlone, t.Through.Seq)
	}
	return p.Before(t.Through)
}

// tombstoneThrough is what a forget's tombstone covers, in the forget's
// transaction, the user's lock held: where the stream stood when the
// forget began (through), raised to cover the user's tombstone (a forget
// before) and every turn of the user recorded (published after through was
// read, or of a stream before): the latest stored time of them, and the
// greatest sequence of those stored no more than twice StoredSkew before
// through (the others are covered by their time); and, for the turns
// without a stored time, the greatest sequence of all (SeqAlone).
func (s *Store) tombstoneThrough(ctx context.Context, userID, token string, through StreamPosition) (Tombstone, error) {
	var (
		tombAlone, tombSeq, recentSeq, oldSeq, allSeq *int64
		tombStored, turnStored                        *time.Time
	)
	since := through.stored().Add(-2 * StoredSkew)
	// The user's turns read once for the four (one read each was most of
	// a forget's time but the delete's, with 30,000 turns).
	err := s.db.QueryRow(ctx, `
		SELECT t.stream_seq, `+tombStoredSeq+`, `+tombStoredAt+`, u.recent, u.stored, u.old, u.every
		FROM (SELECT max(stream_seq) FILTER (WHERE stream_stored_at >= $3) AS recent,
				max(stream_stored_at) FILTER (WHERE stream_seq > 0) AS stored,
				max(stream_seq) FILTER (WHERE stream_stored_at IS NULL) AS old,
				max(stream_seq) AS every
			FROM turns WHERE user_id = $2) u
		LEFT JOIN tombstones t ON t.user_token = $1`, token, userID, since).
		Scan(&tombAlone, &tombSeq, &tombStored, &recentSeq, &turnStored, &oldSeq, &allSeq)
	if err != nil {
		return Tombstone{}, fmt.Errorf("forget: tombstone: %w", err)
	}
	seqOf := func(seq *int64) uint64 {
		if seq == nil {
			return 0
		}
		return uint64(max(*seq, 0))
	}
	alone := max(through.Seq, seqOf(tombAlone), seqOf(oldSeq))
	if through.Stored.IsZero() {
		// When the stream's last event was stored is not known, by
		// sequence alone, as an earlier release did.
		seq := max(alone, seqOf(allSeq))
		return Tombstone{UserToken: token, Through: StreamPosition{Seq: seq}, SeqAlone: seq}, nil
	}
	p := StreamPosition{Seq: max(through.Seq, seqOf(recentSeq)), Stored: through.stored()}
	if turnStored != nil && turnStored.After(p.Stored) {
		p.Stored = turnStored.UTC()
	}
	if tombStored != nil && !tombStored.Before(since) {
		p.Seq, p.Stored = max(p.Seq, seqOf(tombSeq)), maxTime(p.Stored, tombStored.UTC())
	}
	return Tombstone{UserToken: token, Through: p, SeqAlone: max(alone, p.Seq)}, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// tombStoredAt and tombStoredSeq are a tombstone's (aliased t) stored time
// and the sequence that goes with it, NULL (not known) when a forget of an
// earlier release changed the tombstone since (see migration 044): that
// release sets forgotten_at and stream_seq alone.
const (
	tombStoredAt  = `CASE WHEN t.stream_stored_for = t.forgotten_at THEN t.stream_stored_at END`
	tombStoredSeq = `CASE WHEN t.stream_stored_for = t.forgotten_at THEN t.stream_stored_seq END`
)

// userLock is the advisory lock key of a user token, per schema so that
// memoryd instances in other schemas of the database do not contend.
const userLock = `hashtextextended('memoryd.user.' || current_schema() || '.' || %s, 0)`

// LockUsers takes, until the transaction ends, a shared lock on each user
// token that ForgetUser takes exclusively, and then returns the tombstones
// of those tokens. Call it on the Store InTx hands out, before writing
// anything for the users: a forget then waits for the transaction to commit
// and deletes what it wrote, or it committed first and the tombstones
// returned say which events may no longer be written. Locks are taken in
// token order, so two callers never deadlock.
func (s *Store) LockUsers(ctx context.Context, tokens []string) (map[string]Tombstone, error) {
	if len(tokens) == 0 {
		return nil, nil
	}
	tokens = lockOrder(tokens)
	// The lock is a statement of its own: the tombstones must be read with a
	// snapshot taken after it is held (read committed takes one per statement).
	if _, err := s.db.Exec(ctx, lockUsersSQL, tokens); err != nil {
		return nil, fmt.Errorf("lock users: %w", err)
	}
	return s.tombstones(ctx, tokens)
}

// lockUsersSQL takes the shared lock of each user token of $1, in order.
var lockUsersSQL = `SELECT count(pg_advisory_xact_lock_shared(` + fmt.Sprintf(userLock, "t") + `))
		FROM (SELECT t FROM unnest($1::text[]) AS t ORDER BY t) AS sorted`

// LockUsersWithin is SetLockTimeout(d) then LockUsers(tokens), sent as one
// pipelined batch: one round trip to Postgres instead of three, for an
// extraction job's save, which makes both first. The server still runs the
// statements one after the other, each with a snapshot of its own, so
// the tombstones are read after the locks are held, as in LockUsers. An
// error is the first statement's that failed (a lock timeout is the
// lock's 55P03, IsLockWait); the transaction is then aborted and InTx
// rolls it back. Call it first on the Store InTx hands out.
func (s *Store) LockUsersWithin(ctx context.Context, d time.Duration, tokens []string) (map[string]Tombstone, error) {
	// On the pool the batch would be a transaction of its own, its
	// locks gone at its end.
	tx, ok := s.db.(pgx.Tx)
	if !ok {
		return nil, fmt.Errorf("lock users: no transaction (%T)", s.db)
	}
	tokens = lockOrder(tokens)
	var b pgx.Batch
	b.Queue(`SELECT set_config('lock_timeout', $1, true)`, lockTimeoutSetting(d))
	if len(tokens) > 0 {
		b.Queue(lockUsersSQL, tokens)
		b.Queue(tombstonesSQL, tokens)
	}
	res := tx.SendBatch(ctx, &b)
	defer res.Close()
	if _, err := res.Exec(); err != nil {
		return nil, batchError("lock users", "set lock timeout", err)
	}
	if len(tokens) == 0 {
		if err := res.Close(); err != nil {
			return nil, batchError("lock users", "set lock timeout", err)
		}
		return nil, nil
	}
	if _, err := res.Exec(); err != nil {
		return nil, batchError("lock users", "lock users", err)
	}
	rows, err := res.Query()
	if err != nil {
		return nil, batchError("lock users", "tombstones", err)
	}
	tombs, err := scanTombstones(rows)
	if err != nil {
		return nil, err
	}
	if err := res.Close(); err != nil {
		return nil, fmt.Errorf("lock users: %w", err)
	}
	return tombs, nil
}

// batchError names err, read at the result of a pipelined batch's
// statement stmt, for stmt when it is the server's answer to it (an
// ERROR, such as a lock timeout), else for the batch: Postgres sends a
// batch's results only when it reads again (at the batch's end), so an
// ended context or a lost connection fails the read of the first result
// whatever statement was running, typically a lock wait after it
// (TestPipelinedLockWaitCutShort).
func batchError(batch, stmt string, err error) error {
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return fmt.Errorf("%s: %w", batch, err)
}

// TryLockUsers is LockUsers without waiting: it takes the shared lock of
// each user token that no forget holds, returns the tombstones of those,
// and returns as busy the tokens whose lock a forget (or a reset) holds
// now, without waiting for it. The caller leaves the busy users' writes for
// later: one user's forget then holds back no other user's.
func (s *Store) TryLockUsers(ctx context.Context, tokens []string) (tombs map[string]Tombstone, busy []string, err error) {
	if len(tokens) == 0 {
		return nil, nil, nil
	}
	tokens = lockOrder(tokens)
	rows, err := s.db.Query(ctx, `SELECT t, pg_try_advisory_xact_lock_shared(`+fmt.Sprintf(userLock, "t")+`)
		FROM (SELECT t FROM unnest($1::text[]) AS t ORDER BY t) AS sorted`, tokens)
	if err != nil {
		return nil, nil, fmt.Errorf("lock users: %w", err)
	}
	var (
		locked []string
		token  string
		got    bool
	)
	if _, err := pgx.ForEachRow(rows, []any{&token, &got}, func() error {
		if got {
			locked = append(locked, token)
		} else {
			busy = append(busy, token)
		}
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("lock users: %w", err)
	}
	if len(locked) == 0 {
		return nil, busy, nil
	}
	// A statement of its own, after the locks: see LockUsers.
	tombs, err = s.tombstones(ctx, locked)
	return tombs, busy, err
}

// lockOrder returns tokens sorted, without duplicates, in a new slice: the
// order every caller takes user locks in.
func lockOrder(tokens []string) []string {
	tokens = slices.Clone(tokens)
	slices.Sort(tokens)
	return slices.Compact(tokens)
}

// tombstonesSQL reads the tombstones of the tokens $1.
const tombstonesSQL = `SELECT user_token, stream_seq, coalesce(` + tombStoredSeq + `, stream_seq), ` + tombStoredAt + `, forgotten_at
		FROM tombstones t WHERE user_token = ANY($1)`

func (s *Store) tombstones(ctx context.Context, tokens []string) (map[string]Tombstone, error) {
	rows, err := s.db.Query(ctx, tombstonesSQL, tokens)
	if err != nil {
		return nil, fmt.Errorf("tombstones: %w", err)
	}
	return scanTombstones(rows)
}

// scanTombstones reads tombstonesSQL's rows.
func scanTombstones(rows pgx.Rows) (map[string]Tombstone, error) {
	out := map[string]Tombstone{}
	var (
		t                Tombstone
		alone, storedSeq int64
		stored           *time.Time
	)
	if _, err := pgx.ForEachRow(rows, []any{&t.UserToken, &alone, &storedSeq, &stored, &t.ForgottenAt}, func() error {
		t.Through, t.SeqAlone = streamPosition(storedSeq, stored), uint64(max(alone, 0))
		out[t.UserToken] = t
		return nil
	}); err != nil {
		return nil, fmt.Errorf("tombstones: %w", err)
	}
	return out, nil
}

// AddTurnUsage adds tokens spent extracting a user's turns, as AddUsage
// does, but to everyone's count of day alone when a forget of the user
// (token) covers the turns (the newest of them is at stream position at):
// a model call that was in flight while the user was forgotten leaves
// nothing of the user behind, and its tokens, which the model server
// spent, count in everyone's (UsageCall.Forgotten). The tokens count
// towards the spend of day (see SpendOn). A call whose id (not zero) was
// recorded before adds nothing (see AddCallUsageOn). It reports whether it
// added or found the call added as the user's: false when a forget covers
// the turns.
func (s *Store) AddTurnUsage(ctx context.Context, token string, at StreamPosition, userID, model string, day time.Time, u TokenUsage, id CallID) (bool, error) {
	added := false
	err := s.InTx(ctx, func(_ pgx.Tx, q *Store) error {
		tombs, err := q.LockUsers(ctx, []string{token})
		if err != nil {
			return err
		}
		added, err = q.addTurnUsage(ctx, tombs, token, at, userID, model, day, u, id)
		return err
	})
	return added, err
}

// TryAddTurnUsage is AddTurnUsage without a wait for the user's lock: when
// a forget (or a reset) holds it, or waits for it, now, it adds nothing and
// reports busy, for the caller to try again later (see TryLockUsers).
func (s *Store) TryAddTurnUsage(ctx context.Context, token string, at StreamPosition, userID, model string, day time.Time, u TokenUsage, id CallID) (added, busy bool, err error) {
	err = s.InTx(ctx, func(_ pgx.Tx, q *Store) error {
		tombs, held, err := q.TryLockUsers(ctx, []string{token})
		if err != nil {
			return err
		}
		if len(held) > 0 {
			busy = true
			return nil
		}
		added, err = q.addTurnUsage(ctx, tombs, token, at, userID, model, day, u, id)
		return err
	})
	if err != nil {
		return false, false, err
	}
	return added, busy, nil
}

// addTurnUsage is AddTurnUsage's write, the user's lock held (tombs, the
// tombstones read under it).
func (s *Store) addTurnUsage(ctx context.Context, tombs map[string]Tombstone, token string, at StreamPosition, userID, model string, day time.Time, u TokenUsage, id CallID) (bool, error) {
	forgotten := false
	if t, ok := tombs[token]; ok && t.Covers(at) {
		forgotten = true
	}
	return !forgotten, s.addUsages(ctx, day, model, []UsageCall{{ID: id, UserID: userID, Used: u, Forgotten: forgotten}})
}
