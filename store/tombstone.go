package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Tombstone is what a forget leaves of a user: the user token, the last
// turn-stream sequence the forget covers, and when it happened.
type Tombstone struct {
	UserToken   string
	StreamSeq   uint64
	ForgottenAt time.Time
}

// Covers reports whether the event at stream sequence seq was published
// before the forget, so that nothing of it may be written any more. An event
// without a sequence (0) is covered.
func (t Tombstone) Covers(seq uint64) bool { return seq <= t.StreamSeq }

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
	if _, err := s.db.Exec(ctx, `SELECT count(pg_advisory_xact_lock_shared(`+fmt.Sprintf(userLock, "t")+`))
		FROM (SELECT t FROM unnest($1::text[]) AS t ORDER BY t) AS sorted`, tokens); err != nil {
		return nil, fmt.Errorf("lock users: %w", err)
	}
	return s.tombstones(ctx, tokens)
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

func (s *Store) tombstones(ctx context.Context, tokens []string) (map[string]Tombstone, error) {
	rows, err := s.db.Query(ctx, `SELECT user_token, stream_seq, forgotten_at FROM tombstones WHERE user_token = ANY($1)`, tokens)
	if err != nil {
		return nil, fmt.Errorf("tombstones: %w", err)
	}
	out := map[string]Tombstone{}
	var (
		t   Tombstone
		seq int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&t.UserToken, &seq, &t.ForgottenAt}, func() error {
		t.StreamSeq = uint64(seq)
		out[t.UserToken] = t
		return nil
	}); err != nil {
		return nil, fmt.Errorf("tombstones: %w", err)
	}
	return out, nil
}

// AddTurnUsage adds tokens spent extracting a user's turns, as AddUsage
// does, unless a forget of the user (token) covers the turns (the newest of
// them is at stream sequence seq): a model call that was in flight while the
// user was forgotten leaves no usage behind. The tokens count towards the
// spend of day (see SpendOn). It reports whether it added.
func (s *Store) AddTurnUsage(ctx context.Context, token string, seq uint64, userID, model string, day time.Time, u TokenUsage) (bool, error) {
	added := false
	err := s.InTx(ctx, func(_ pgx.Tx, q *Store) error {
		tombs, err := q.LockUsers(ctx, []string{token})
		if err != nil {
			return err
		}
		if t, ok := tombs[token]; ok && t.Covers(seq) {
			return nil
		}
		added = true
		return q.addUsage(ctx, day, userID, model, u)
	})
	return added, err
}
