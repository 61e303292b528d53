package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Turn statuses.
const (
	StatusPending   = "pending"
	StatusProcessed = "processed"
	StatusFailed    = "failed"
)

// Turn is a received turn as stored.
type Turn struct {
	EventID           string
	UserID            string
	ConversationID    string
	UserMessage       string
	AssistantResponse string
	// TurnAt is the turn's time, in the UTC offset its frontend sent
	// (kept in turn_offset: relative dates in the turn are its own day's,
	// migration 060).
	TurnAt time.Time
	// ClampedFrom is the timestamp the frontend sent when it was later than
	// the time JetStream stored the event plus the allowed clock skew; TurnAt
	// then holds the stored time. Nil when the timestamp was taken as sent.
	ClampedFrom *time.Time
	// Metadata is the event's JSON object, nil when it has none. Absent,
	// null and an empty object are the same content (turnHashes).
	Metadata json.RawMessage
	// Scope is the turn's scope ("" none): the context items extracted from
	// it inherit it (migration 018). It is not part of the turn's content
	// hash: a re-publish differing only in scope is a duplicate.
	Scope string
	// Placed is where the turn's event is in the turn stream: its sequence
	// and the creation time of the stream that numbered it (see
	// StreamPosition; zero parts when not known: metadata that could not
	// be read, or a turn recorded by an earlier release).
	Placed      StreamPosition
	Status      string
	Attempts    int
	LastError   string
	ReceivedAt  time.Time
	ProcessedAt *time.Time
}

// TurnKey identifies a turn. Event ids are unique per user only: two users'
// turns may share an id.
type TurnKey struct {
	UserID  string
	EventID string
}

// Key is the turn's key.
func (t Turn) Key() TurnKey { return TurnKey{UserID: t.UserID, EventID: t.EventID} }

// TurnOutcome is what InsertTurns did with one turn.
type TurnOutcome int

const (
	// TurnInserted: the turn is new and recorded pending; it needs an
	// extraction job.
	TurnInserted TurnOutcome = iota
	// TurnDuplicate: the user's turn with this event id is recorded with the
	// same content (a redelivery or a frontend's retry); nothing changed.
	TurnDuplicate
	// TurnConflict: the user's turn with this event id is recorded with
	// different content; nothing changed, and the event must not be taken
	// for the recorded one.
	TurnConflict
)

// UsersWithBacklog returns those of users who have at least n pending
// turns (recorded, neither processed nor failed yet). Each user's count
// stops at n (an index range of turns_user_status_idx), so a user with a
// backlog of millions costs no more than one of n.
func (s *Store) UsersWithBacklog(ctx context.Context, users []string, n int) (map[string]bool, error) {
	if len(users) == 0 || n <= 0 {
		return nil, nil
	}
	rows, err := s.db.Query(ctx, `SELECT u FROM unnest($1::text[]) AS u
		WHERE (SELECT count(*) FROM (SELECT 1 FROM turns t WHERE t.user_id = u AND t.status = 'pending' LIMIT $2) x) >= $2`,
		users, n)
	if err != nil {
		return nil, fmt.Errorf("users with backlog: %w", err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("users with backlog: %w", err)
	}
	m := make(map[string]bool, len(got))
	for _, u := range got {
		m[u] = true
	}
	return m, nil
}

// InsertTurns records turns as pending, keyed by (user, event id), and
// returns what it did with each, in the order of turns: a turn whose key is
// already recorded (or appears earlier in turns) is not inserted, and is a
// duplicate when its content (conversation, message, response, timestamp as
// sent, metadata) is the recorded one's, else a conflict. A recorded turn
// whose text was emptied before content hashes existed counts as the same.
func (s *Store) InsertTurns(ctx context.Context, turns []Turn) ([]TurnOutcome, error) {
	if len(turns) == 0 {
		return nil, nil
	}
	n := len(turns)
	var (
		idx                            = make([]int32, n)
		ids, users, convs, msgs, resps = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		ats                            = make([]time.Time, n)
		offsets                        = make([]int32, n)
		clamped                        = make([]*time.Time, n)
		metas                          = make([]*string, n)
		seqs                           = make([]int64, n)
		streams                        = make([]*time.Time, n)
		scopes                         = make([]string, n)
	)
	for i, t := range turns {
		idx[i] = int32(i)
		ids[i], users[i], convs[i], msgs[i], resps[i] = t.EventID, t.UserID, t.ConversationID, t.UserMessage, t.AssistantResponse
		ats[i], offsets[i], clamped[i] = t.TurnAt, turnOffset(t.TurnAt), t.ClampedFrom
		seqs[i], streams[i] = int64(t.Placed.Seq), t.Placed.storedOrNil()
		scopes[i] = t.Scope
		metas[i] = metadataParam(t.Metadata)
	}
	// The first turn of each key is inserted (DISTINCT ON ... ORDER BY i);
	// every other one is then compared with what the table holds, in a
	// second statement, which also sees a row a concurrent transaction
	// committed while the insert waited on it.
	//
	// New keys are inserted in (user_id, event_id) order, as a replay's
	// RequeueTurns inserts (or sets back to pending) them, not in the
	// batch's (stream) order: an insert waits for another transaction's
	// uncommitted insert or update of the same key, so beside a replay
	// recording the same turns in the other order each waited for the
	// other (40P01, ingest's whole batch failed;
	// TestIngestBesideReplayOfTheSameNewTurns). Nothing reads the insert
	// order: each row carries its stream_seq and turn_at.
	const input = `unnest($1::int[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[], $8::jsonb[], $9::bigint[], $10::timestamptz[], $11::text[], $12::timestamptz[], $13::int[])
		AS x(i, e, u, c, m, r, a, md, q, cf, sc, qc, tz)`
	args := []any{idx, ids, users, convs, msgs, resps, ats, metas, seqs, clamped, scopes, streams, offsets}
	rows, err := s.db.Query(ctx, `
		INSERT INTO turns (event_id, user_id, conversation_id, user_message, assistant_response, turn_at, metadata, stream_seq, stream_stored_at, clamped_from, content_hash, scope, turn_offset)
		SELECT e, u, c, m, r, a, md, q, qc, cf, memoryd_turn_hash(c, m, r, coalesce(cf, a), md), sc, tz
		FROM (SELECT DISTINCT ON (u, e) * FROM `+input+` ORDER BY u, e, i) x
		ORDER BY u, e
		ON CONFLICT (user_id, event_id) DO NOTHING
		RETURNING user_id, event_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("insert turns: %w", err)
	}
	inserted, err := pgx.CollectRows(rows, pgx.RowToStructByPos[TurnKey])
	if err != nil {
		return nil, fmt.Errorf("insert turns: %w", err)
	}
	isNew := make(map[TurnKey]bool, len(inserted))
	for _, k := range inserted {
		isNew[k] = true
	}
	out := make([]TurnOutcome, n)
	var check []int32
	for i, t := range turns {
		if isNew[t.Key()] {
			isNew[t.Key()] = false // later turns of the key are duplicates or conflicts
			continue
		}
		check = append(check, int32(i))
	}
	if len(check) == 0 {
		return out, nil
	}
	rows, err = s.db.Query(ctx, `
		SELECT x.i, t.content_hash IS NULL OR t.content_hash IN (`+turnHashes("x.c", "x.m", "x.r", "coalesce(x.cf, x.a)", "x.md")+`)
		FROM `+input+`
		LEFT JOIN turns t ON t.user_id = x.u AND t.event_id = x.e
		WHERE x.i = ANY($14)`, append(args, check)...)
	if err != nil {
		return nil, fmt.Errorf("insert turns: compare duplicates: %w", err)
	}
	var (
		i    int32
		same bool
	)
	if _, err := pgx.ForEachRow(rows, []any{&i, &same}, func() error {
		out[i] = TurnConflict
		if same {
			out[i] = TurnDuplicate
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("insert turns: compare duplicates: %w", err)
	}
	return out, nil
}

const turnColumns = `event_id, user_id, conversation_id, user_message, assistant_response, turn_at, clamped_from,
	metadata, coalesce(stream_seq, 0), stream_stored_at, status, attempts, coalesce(last_error, ''), received_at, processed_at, scope, turn_offset`

func scanTurn(row pgx.CollectableRow) (Turn, error) {
	var (
		t       Turn
		seq     int64
		created *time.Time
		offset  int32
	)
	err := row.Scan(&t.EventID, &t.UserID, &t.ConversationID, &t.UserMessage, &t.AssistantResponse, &t.TurnAt, &t.ClampedFrom,
		&t.Metadata, &seq, &created, &t.Status, &t.Attempts, &t.LastError, &t.ReceivedAt, &t.ProcessedAt, &t.Scope, &offset)
	t.Placed = streamPosition(seq, created)
	// In its own offset, "Z" (0) in UTC: pgx reads a timestamptz in the
	// process's local zone, which on a host not set to UTC moved a "Z"
	// turn's date (and every turn's recorded before migration 060).
	if offset != 0 {
		t.TurnAt = t.TurnAt.In(time.FixedZone("", int(offset)))
	} else {
		t.TurnAt = t.TurnAt.UTC()
	}
	return t, err
}

// turnOffset is t's UTC offset in seconds, as turn_offset keeps it.
func turnOffset(t time.Time) int32 {
	_, off := t.Zone()
	return int32(off)
}

// UnprocessedTurns returns the turns of userID among eventIDs that are not
// yet processed, ordered by turn time.
//
// Here and in the other functions taking a user and event ids, an empty
// userID matches the ids of any user. Only an extraction job enqueued
// before event ids became unique per user (migration 012) names no user:
// new jobs always name the one user whose turns they hold.
func (s *Store) UnprocessedTurns(ctx context.Context, userID string, eventIDs []string) ([]Turn, error) {
	return s.unprocessedTurns(ctx, userID, eventIDs, "")
}

// LockUnprocessedTurns is UnprocessedTurns with the rows locked FOR UPDATE
// until the transaction ends. Call it inside InTx: the lock makes two jobs
// racing on the same turn (a rescued job and its original) store it once.
func (s *Store) LockUnprocessedTurns(ctx context.Context, userID string, eventIDs []string) ([]Turn, error) {
	return s.unprocessedTurns(ctx, userID, eventIDs, " FOR UPDATE")
}

func (s *Store) unprocessedTurns(ctx context.Context, userID string, eventIDs []string, lock string) ([]Turn, error) {
	rows, err := s.db.Query(ctx, `SELECT `+turnColumns+` FROM turns
		WHERE event_id = ANY($1) AND ($2 = '' OR user_id = $2) AND status <> 'processed'
		ORDER BY turn_at, event_id, user_id`+lock, eventIDs, userID)
	if err != nil {
		return nil, fmt.Errorf("unprocessed turns: %w", err)
	}
	turns, err := pgx.CollectRows(rows, scanTurn)
	if err != nil {
		return nil, fmt.Errorf("unprocessed turns: %w", err)
	}
	return turns, nil
}

// GetTurn returns the user's turn with an event id, or ErrNotFound.
func (s *Store) GetTurn(ctx context.Context, userID, eventID string) (Turn, error) {
	rows, err := s.db.Query(ctx, `SELECT `+turnColumns+` FROM turns WHERE user_id = $1 AND event_id = $2`, userID, eventID)
	if err != nil {
		return Turn{}, fmt.Errorf("get turn: %w", err)
	}
	t, err := pgx.CollectExactlyOneRow(rows, scanTurn)
	if err != nil {
		return Turn{}, notFound("get turn", err)
	}
	return t, nil
}

// MarkProcessed marks the user's turns processed by the given extractor,
// and ends any claim on them: a processed turn is no burst's, and no
// release of a claim (ReleaseClaims, a takeover's) then locks it, which a
// forget relies on to lock the user's processed turns in no order. Their
// processed_at is the clock when it runs, after the save's locks (not the
// transaction's start): a replay after a reset the save waited for tells
// by it that the turn's items outlived the reset (ResetMark.Committed).
func (s *Store) MarkProcessed(ctx context.Context, userID string, eventIDs []string, p Provenance) error {
	_, err := s.db.Exec(ctx, `UPDATE turns
		SET status = 'processed', processed_at = clock_timestamp(), attempts = attempts + 1, last_error = NULL, claimed_until = NULL, claimed_by = NULL,
		    extractor = $2, model = $3, prompt_version = $4
		WHERE event_id = ANY($1) AND ($5 = '' OR user_id = $5)`, eventIDs, p.Extractor, p.Model, p.PromptVersion, userID)
	if err != nil {
		return fmt.Errorf("mark processed: %w", err)
	}
	return nil
}

// ClearProcessedClaims ends at most limit of the claims left on processed
// turns and returns how many it ended. MarkProcessed ends a turn's claim
// since 2026-12-06 (migration-free); the turns processed before, and those
// a process of an earlier release still processes during a rolling
// upgrade, keep theirs, and a forget locks every claimed turn of its user
// in order (forgetUser): for a user of such turns, all of them, as before.
// Batched (the worker's reconcile calls it), so that an upgrade rewrites
// no large table in one statement. A turn not processed keeps its claim,
// its job's. A turn another transaction holds is skipped, not waited
// for: a batch waits on no turn, so it is in no lock cycle with a forget,
// a release of claims or a takeover, which lock turns in (turn_at,
// event_id) order. The batch is found through the claims' partial index
// (turns_claimed_by_idx), which holds only claimed turns, the stale ones
// of older jobs first, until they are cleared.
func (s *Store) ClearProcessedClaims(ctx context.Context, limit int) (int64, error) {
	// By ctid, the rows locked (none can change them meanwhile): joined by
	// key, the plan read the whole table for each batch (a hash join; 1.2 s
	// a batch of 5,000 on 300,000 turns, 0.34 s by ctid).
	tag, err := s.db.Exec(ctx, `WITH stale AS MATERIALIZED (
			SELECT ctid FROM turns
			WHERE claimed_by IS NOT NULL AND status = 'processed'
			ORDER BY claimed_by LIMIT $1
			FOR UPDATE SKIP LOCKED)
		UPDATE turns SET claimed_until = NULL, claimed_by = NULL
		WHERE ctid = ANY (ARRAY(SELECT ctid FROM stale)) AND status = 'processed'`, limit)
	if err != nil {
		return 0, fmt.Errorf("clear processed claims: %w", err)
	}
	return tag.RowsAffected(), nil
}

// MarkFailed records an extraction failure for the user's turns that are not
// processed, for no job: MarkJobFailed of a job that holds no claim (the
// reconciler's, a takeover's, whose jobs' claims are over).
func (s *Store) MarkFailed(ctx context.Context, userID string, eventIDs []string, reason string, final bool) error {
	_, err := s.MarkJobFailed(ctx, 0, userID, eventIDs, reason, final)
	return err
}

// MarkJobFailed records job jobID's extraction failure for the user's
// turns that are not processed, and ends the job's claim on them.
// With final set the turns become failed (queryable and re-runnable with
// RetryFailed); otherwise they stay pending with the error noted.
//
// A turn another job's claim holds (live: claimed_until to come) is left
// as it is, its claim, status, attempts and error: that job is extracting
// it and records its own outcome. The failing job named it without
// holding it (its claim lapsed and the other job took the turn then, or
// it found the turn held and failed before it could claim it). Before,
// the failure ended the other job's claim, and a third job (a new burst
// of the conversation, the failing job's own retry) claimed and extracted
// the turn again while the other's request for it was out
// (TestFailureAfterALapsedClaimLeavesTheNewClaim); a final failure set it
// failed under the other job, whose own retry then found it failed and
// left it so. It returns how many turns it recorded the failure for: not
// those left as they were (another job's, processed, failed already on a
// failure not final), which the job's metrics must not count failed
// (TestFinalFailureCountsNotTheTurnAnotherJobHolds).
func (s *Store) MarkJobFailed(ctx context.Context, jobID int64, userID string, eventIDs []string, reason string, final bool) (int64, error) {
	status := StatusPending
	if final {
		status = StatusFailed
	}
	// Rows are locked in (turn_at, event_id) order, as saves and claims
	// lock them, so that a failure recorded beside them never deadlocks;
	// the claim is read again once the lock is had (a claim committed
	// meanwhile holds the turn).
	// A non-final failure leaves a failed turn failed: it comes from a job
	// that ran beside the one that failed it for good (a burst's retry and
	// a reconciler's job of the same turn), and set it pending with no job
	// left to run it; a retry resets failed turns itself (ResetFailed).
	tag, err := s.db.Exec(ctx, `WITH locked AS MATERIALIZED (
			SELECT user_id, event_id FROM turns
			WHERE event_id = ANY($1) AND ($4 = '' OR user_id = $4) AND status <> 'processed'
				AND ($5 OR status <> 'failed')
				AND (claimed_until IS NULL OR claimed_until < now() OR claimed_by = $6)
			ORDER BY turn_at, event_id, user_id FOR UPDATE)
		UPDATE turns t
		SET status = $2, attempts = attempts + 1, last_error = left($3, 2000),
			claimed_until = CASE WHEN t.claimed_by = $6 THEN NULL ELSE t.claimed_until END
		FROM locked l WHERE t.user_id = l.user_id AND t.event_id = l.event_id`, eventIDs, status, reason, userID, final, jobID)
	if err != nil {
		return 0, fmt.Errorf("mark failed: %w", err)
	}
	return tag.RowsAffected(), nil
}

// CountFailedTurns counts every user's failed turns (through the partial
// index turns_failed_idx: one read of the failed turns alone).
func (s *Store) CountFailedTurns(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM turns WHERE status = 'failed'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count failed turns: %w", err)
	}
	return n, nil
}

// FailedTurns lists failed turns, oldest first, optionally for one user.
func (s *Store) FailedTurns(ctx context.Context, userID string, limit int) ([]Turn, error) {
	turns, _, err := s.FailedTurnsExcept(ctx, userID, limit, "")
	return turns, err
}

// FailedTurnsExcept is FailedTurns without the turns whose last error
// begins with skip (none when skip is empty), and the number of those,
// every one of userID's (or of every user's), not only the limit's first:
// the turns skipped take no place in limit, so that the oldest being
// skipped ones does not hide the others from a retry.
func (s *Store) FailedTurnsExcept(ctx context.Context, userID string, limit int, skip string) ([]Turn, int, error) {
	rows, err := s.db.Query(ctx, `SELECT `+turnColumns+` FROM turns
		WHERE status = 'failed' AND ($1 = '' OR user_id = $1)
		AND ($3 = '' OR left(coalesce(last_error, ''), length($3)) <> $3)
		ORDER BY received_at, event_id LIMIT $2`, userID, limit, skip)
	if err != nil {
		return nil, 0, fmt.Errorf("failed turns: %w", err)
	}
	turns, err := pgx.CollectRows(rows, scanTurn)
	if err != nil {
		return nil, 0, fmt.Errorf("failed turns: %w", err)
	}
	if skip == "" {
		return turns, 0, nil
	}
	var skipped int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM turns
		WHERE status = 'failed' AND ($1 = '' OR user_id = $1)
		AND left(coalesce(last_error, ''), length($2)) = $2`, userID, skip).Scan(&skipped); err != nil {
		return nil, 0, fmt.Errorf("failed turns: count skipped: %w", err)
	}
	return turns, skipped, nil
}

// ResetFailed sets the given failed turns back to pending and returns the
// keys it reset, so the caller can enqueue them again in the same
// transaction.
func (s *Store) ResetFailed(ctx context.Context, keys []TurnKey) ([]TurnKey, error) {
	users, ids := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		users[i], ids[i] = k.UserID, k.EventID
	}
	// Locked in (turn_at, event_id) order, as saves, claims and a replay's
	// requeue lock them: the keys come oldest received first, and an
	// update locks rows as its join meets them, so beside a replay of the
	// same turns each held one the other waited for
	// (TestReplayBesideRetryOfDisorderedFailedTurns).
	rows, err := s.db.Query(ctx, `WITH locked AS MATERIALIZED (
			SELECT t.user_id, t.event_id FROM turns t
			WHERE (t.user_id, t.event_id) IN (SELECT u, e FROM unnest($1::text[], $2::text[]) AS k(u, e)) AND t.status = 'failed'
			ORDER BY t.turn_at, t.event_id, t.user_id FOR UPDATE)
		UPDATE turns t SET status = 'pending'
		FROM locked l
		WHERE t.user_id = l.user_id AND t.event_id = l.event_id AND t.status = 'failed'
		RETURNING t.user_id, t.event_id`, users, ids)
	if err != nil {
		return nil, fmt.Errorf("reset failed: %w", err)
	}
	reset, err := pgx.CollectRows(rows, pgx.RowToStructByPos[TurnKey])
	if err != nil {
		return nil, fmt.Errorf("reset failed: %w", err)
	}
	return reset, nil
}

// UserStats summarises one user's memory.
type UserStats struct {
	TurnsReceived   int64
	TurnsProcessed  int64
	TurnsFailed     int64
	TurnsPending    int64
	Facts           int64
	ContextItems    int64
	LastProcessedAt *time.Time
	// TokensToday is the model tokens spent today (UTC, by the database's
	// clock) on the user's turns, or on everyone's for the totals.
	TokensToday int64
	// LLMUsage is the model tokens spent on the user's turns, by model.
	LLMUsage map[string]TokenUsage
}

// TokenUsage counts model tokens.
type TokenUsage struct {
	PromptTokens     int64
	CompletionTokens int64
	// Extractions counts the extraction calls the tokens were spent on.
	Extractions int64
}

// AddUsage adds tokens spent extracting a user's turns with model, also to
// today's spend (see SpendOn; today by the database's UTC clock).
func (s *Store) AddUsage(ctx context.Context, userID, model string, u TokenUsage) error {
	return s.addUsage(ctx, time.Time{}, userID, model, u, CallID{})
}

// AddUsageOn is AddUsage of the tokens spent, by user, counted towards
// the spend of day (see SpendOn), in the caller's transaction: run it
// inside InTx, after LockUsers has said no forget covers the turns the
// tokens were spent on (AddTurnUsage does both in a transaction of its
// own). The tokens are added with no call id: AddCallUsageOn adds each
// call's once.
func (s *Store) AddUsageOn(ctx context.Context, day time.Time, model string, spent map[string]TokenUsage) error {
	calls := make([]UsageCall, 0, len(spent))
	for _, user := range slices.Sorted(maps.Keys(spent)) {
		calls = append(calls, UsageCall{UserID: user, Used: spent[user]})
	}
	return s.addUsages(ctx, day, model, calls)
}

func (s *Store) addUsage(ctx context.Context, day time.Time, userID, model string, u TokenUsage, id CallID) error {
	return s.addUsages(ctx, day, model, []UsageCall{{ID: id, UserID: userID, Used: u}})
}

// Stats returns per-user counts, or totals over all users when userID is "".
func (s *Store) Stats(ctx context.Context, userID string) (UserStats, error) {
	var st UserStats
	// Two statements, not one with "$1 = '' OR user_id = $1": under a
	// generic plan (pgx prepares, and Postgres may keep a generic plan
	// after five runs) that condition reads every user's rows for one
	// user's stats (a heavy-user walk: 1.6 s for a light user beside a
	// 30,000-turn one). The turns are counted in one pass.
	where, tokens := "TRUE", dailyTotal("(now() AT TIME ZONE 'UTC')::date")
	args := []any{}
	if userID != "" {
		where = "user_id = $1"
		tokens = `(SELECT coalesce(sum(tokens), 0) FROM llm_usage_daily
			WHERE day = (now() AT TIME ZONE 'UTC')::date AND user_id = $1)`
		args = append(args, userID)
	}
	err := s.db.QueryRow(ctx, `
		SELECT t.received, t.processed, t.failed, t.pending,
			(SELECT count(*) FROM facts WHERE `+where+`),
			(SELECT count(*) FROM context WHERE `+where+`),
			t.last, `+tokens+`
		FROM (SELECT count(*) AS received,
				count(*) FILTER (WHERE status = 'processed') AS processed,
				count(*) FILTER (WHERE status = 'failed') AS failed,
				count(*) FILTER (WHERE status = 'pending') AS pending,
				max(processed_at) FILTER (WHERE status = 'processed') AS last
			FROM turns WHERE `+where+`) t`,
		args...).Scan(&st.TurnsReceived, &st.TurnsProcessed, &st.TurnsFailed, &st.TurnsPending,
		&st.Facts, &st.ContextItems, &st.LastProcessedAt, &st.TokensToday)
	if err != nil {
		return UserStats{}, fmt.Errorf("stats: %w", err)
	}
	rows, err := s.db.Query(ctx, `SELECT model, sum(prompt_tokens), sum(completion_tokens), sum(extractions)
		FROM llm_usage WHERE `+where+` GROUP BY model`, args...)
	if err != nil {
		return UserStats{}, fmt.Errorf("stats: %w", err)
	}
	st.LLMUsage = map[string]TokenUsage{}
	var (
		model string
		u     TokenUsage
	)
	if _, err := pgx.ForEachRow(rows, []any{&model, &u.PromptTokens, &u.CompletionTokens, &u.Extractions}, func() error {
		st.LLMUsage[model] = u
		return nil
	}); err != nil {
		return UserStats{}, fmt.Errorf("stats: %w", err)
	}
	return st, nil
}

// Claim is a debounced extraction job's claim on the pending turns of a
// conversation.
type Claim struct {
	// JobID is the River job claiming; a turn it claimed before and still
	// holds is claimable by it again.
	JobID          int64
	UserID         string
	ConversationID string
	// Own lists the job's own turns, claimed first when claimable.
	Own []string
	// OnlyOwn claims none but the turns in Own: a burst's job sending its
	// turns one a request (a split) extracts its own turn alone, and
	// the conversation's later turns are their own jobs' bursts.
	OnlyOwn bool
	// Limit is the most turns claimed; TTL how long the claim lasts unless
	// released (MarkProcessed, MarkFailed, ReleaseClaims).
	Limit int
	TTL   time.Duration
	// LockTimeout bounds the wait for turns another transaction holds
	// (SQLSTATE 55P03 past it, see IsLockWait); 0 waits without bound.
	LockTimeout time.Duration
}

// claimLockClass namespaces the advisory locks of ClaimConversationTurns
// (the two-key form, apart from the one-key locks River takes).
const claimLockClass = 0x6d656d31

// ClaimConversationTurns claims a conversation's pending turns that no other
// job holds, for c.TTL, oldest first, at most c.Limit, always including the
// turns in c.Own when they are claimable, and returns them oldest first.
//
// Claims of one conversation are serialised (a transaction-level advisory
// lock), and a turn another transaction has locked is waited for, not
// skipped: the jobs of a burst run at the same moment, and claims that
// skipped the rows the others had locked so far split the burst between
// them (a model call per part).
func (s *Store) ClaimConversationTurns(ctx context.Context, c Claim) ([]Turn, error) {
	var turns []Turn
	err := s.InTx(ctx, func(tx pgx.Tx, q *Store) error {
		if c.LockTimeout > 0 {
			if err := q.SetLockTimeout(ctx, c.LockTimeout); err != nil {
				return err
			}
		}
		// The user id's length prefix keeps the key unambiguous.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(length($2::text) || ':' || $2 || $3))`,
			claimLockClass, c.UserID, c.ConversationID); err != nil {
			return err
		}
		// pick chooses in the claim's order; locked takes the row locks in
		// (turn_at, event_id) order, as a job's save does, and re-checks each
		// row once another transaction let go of it.
		rows, err := tx.Query(ctx, `
			WITH pick AS (
				SELECT event_id FROM turns
				WHERE user_id = $1 AND conversation_id = $2 AND status = 'pending'
				  AND (claimed_until IS NULL OR claimed_until < now() OR claimed_by = $6)
				  AND (NOT $7::bool OR event_id = ANY($3))
				ORDER BY event_id = ANY($3) DESC, turn_at, event_id
				LIMIT $4
			), locked AS (
				SELECT event_id FROM turns
				WHERE user_id = $1 AND event_id IN (SELECT event_id FROM pick) AND status = 'pending'
				  AND (claimed_until IS NULL OR claimed_until < now() OR claimed_by = $6)
				ORDER BY turn_at, event_id
				FOR UPDATE
			), c AS (
				UPDATE turns SET claimed_until = now() + $5::interval, claimed_by = $6
				WHERE user_id = $1 AND event_id IN (SELECT event_id FROM locked)
				RETURNING `+turnColumns+`
			)
			SELECT * FROM c ORDER BY turn_at, event_id`, c.UserID, c.ConversationID, c.Own, c.Limit, c.TTL, c.JobID, c.OnlyOwn)
		if err != nil {
			return err
		}
		turns, err = pgx.CollectRows(rows, scanTurn)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim conversation turns: %w", err)
	}
	return turns, nil
}

// ClaimTurns claims for c.TTL those of the turns c.Own of c.UserID that a
// conversation's burst could claim (pending, of a conversation) and that
// no other job holds, for a job that is no burst (a retry's, the
// reconciler's, a replay's), and returns the event ids of those another
// job holds, which the caller leaves to it. Before, such a job took no
// claim, and a burst of the turn's conversation that came while its
// request was with the model claimed and extracted the turn too: two
// model calls. Its other fields are ClaimConversationTurns's but
// ConversationID, Limit and OnlyOwn, unused.
//
// The turns are locked in (turn_at, event_id) order, as a burst's claim
// and a save lock them, and each is read again once another transaction
// lets go of it: a burst's claim committed meanwhile holds it.
func (s *Store) ClaimTurns(ctx context.Context, c Claim) (held []string, err error) {
	err = s.InTx(ctx, func(tx pgx.Tx, q *Store) error {
		if c.LockTimeout > 0 {
			if err := q.SetLockTimeout(ctx, c.LockTimeout); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, `
			WITH locked AS MATERIALIZED (
				SELECT event_id, (claimed_until IS NULL OR claimed_until < now() OR claimed_by = $4) AS free FROM turns
				WHERE user_id = $1 AND event_id = ANY($2) AND status = 'pending' AND conversation_id <> ''
				ORDER BY turn_at, event_id
				FOR UPDATE
			), c AS (
				UPDATE turns t SET claimed_until = now() + $3::interval, claimed_by = $4
				FROM locked l WHERE t.user_id = $1 AND t.event_id = l.event_id AND l.free
			)
			SELECT event_id FROM locked WHERE NOT free`, c.UserID, c.Own, c.TTL, c.JobID)
		if err != nil {
			return err
		}
		held, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim turns: %w", err)
	}
	return held, nil
}

// ReleaseClaims ends job jobID's claim on the given turns of userID, so that
// the job's next run, or the job of another turn, can claim them at once.
// Turns another job claimed meanwhile are left alone.
//
// A released turn still names the job (claimed_by, with no claimed_until):
// the jobs of a burst's other turns ended when they found them claimed, so
// the job is the one left to extract them at its next run, and while it
// is live OrphanedTurns leaves them to it. Before, they read as named by
// no job, and the reconciler gave each a job of its own beside the
// burst's next run, which claimed them too: the turn was extracted twice.
func (s *Store) ReleaseClaims(ctx context.Context, jobID int64, userID string, eventIDs []string) error {
	_, err := s.HandOverClaims(ctx, jobID, userID, eventIDs)
	return err
}

// HandOverClaims is ReleaseClaims returning the event ids of the turns it
// released: those still there and still the job's. A caller giving the
// released turns jobs of their own (a burst's split) gives none to a turn
// a forget or a reset deleted meanwhile, or another job took: such a job
// named a forgotten user's turn after her forget.
func (s *Store) HandOverClaims(ctx context.Context, jobID int64, userID string, eventIDs []string) ([]string, error) {
	rows, err := s.db.Query(ctx, `WITH locked AS MATERIALIZED (
			SELECT event_id FROM turns WHERE user_id = $1 AND event_id = ANY($2) AND claimed_by = $3
			ORDER BY turn_at, event_id FOR UPDATE)
		UPDATE turns t SET claimed_until = NULL
		FROM locked l WHERE t.user_id = $1 AND t.event_id = l.event_id AND t.claimed_by = $3
		RETURNING t.event_id`, userID, eventIDs, jobID)
	if err != nil {
		return nil, fmt.Errorf("release claims: %w", err)
	}
	released, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("release claims: %w", err)
	}
	return released, nil
}

// ClaimedTurns returns the event ids of userID's pending turns that job
// jobID's claim holds (claimed_until set, the job's claimed_by), through
// the claims' index: the turns a job that ends without running its
// deferred releases (a panic) claimed, its burst's included, which its
// arguments do not name.
func (s *Store) ClaimedTurns(ctx context.Context, jobID int64, userID string) ([]string, error) {
	rows, err := s.db.Query(ctx, `SELECT event_id FROM turns
		WHERE claimed_by = $1 AND user_id = $2 AND claimed_until IS NOT NULL AND status = 'pending'
		ORDER BY turn_at, event_id`, jobID, userID)
	if err != nil {
		return nil, fmt.Errorf("claimed turns: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("claimed turns: %w", err)
	}
	return ids, nil
}

// PriorConversationTurns returns the newest limit processed turns of a
// conversation before a time, oldest first: read-only context for a burst.
func (s *Store) PriorConversationTurns(ctx context.Context, userID, conversationID string, before time.Time, limit int) ([]Turn, error) {
	rows, err := s.db.Query(ctx, `SELECT * FROM (
			SELECT `+turnColumns+` FROM turns
			WHERE user_id = $1 AND conversation_id = $2 AND status = 'processed' AND turn_at < $3 AND text_cleared_at IS NULL
			ORDER BY turn_at DESC, event_id DESC LIMIT $4
		) t ORDER BY turn_at, event_id`, userID, conversationID, before, limit)
	if err != nil {
		return nil, fmt.Errorf("prior conversation turns: %w", err)
	}
	turns, err := pgx.CollectRows(rows, scanTurn)
	if err != nil {
		return nil, fmt.Errorf("prior conversation turns: %w", err)
	}
	return turns, nil
}

// metadataParam is a turn's metadata as a query argument: nil (NULL) when
// the event has none or "null". An empty object is stored as sent, as
// earlier releases stored it, so that processes of both releases running
// side by side (a rolling upgrade) hash the same; turnHashes makes absent
// and {} the same content.
func metadataParam(raw json.RawMessage) *string {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	m := string(raw)
	return &m
}

// turnHashes lists, for SQL's IN, the content hashes a recorded turn may
// hold for an event with these columns: its own, and those of the same
// event with the empty object for no metadata and no metadata for the
// empty object. A frontend that sends "metadata":{} on a retry of a turn
// first sent without it (a serialiser's default for an empty map) sends
// the same turn.
func turnHashes(conv, msg, resp, sent, meta string) string {
	args := conv + ", " + msg + ", " + resp + ", " + sent
	return "memoryd_turn_hash(" + args + ", " + meta + "), memoryd_turn_hash(" + args + ", coalesce(" + meta + ", '{}'::jsonb)), " +
		"memoryd_turn_hash(" + args + ", nullif(" + meta + ", '{}'::jsonb))"
}
