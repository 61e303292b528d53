package store

import (
	"context"
	"encoding/json"
	"fmt"
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
	TurnAt            time.Time
	// ClampedFrom is the timestamp the frontend sent when it was later than
	// the time JetStream stored the event plus the allowed clock skew; TurnAt
	// then holds the stored time. Nil when the timestamp was taken as sent.
	ClampedFrom *time.Time
	Metadata    json.RawMessage
	StreamSeq   uint64
	Status      string
	Attempts    int
	LastError   string
	ReceivedAt  time.Time
	ProcessedAt *time.Time
}

// InsertTurns records turns as pending, skipping event ids already recorded.
// It returns the event ids it inserted, which are exactly the turns that need
// an extraction job: a redelivered event inserts nothing.
func (s *Store) InsertTurns(ctx context.Context, turns []Turn) ([]string, error) {
	if len(turns) == 0 {
		return nil, nil
	}
	var (
		ids, users, convs, msgs, resps = make([]string, len(turns)), make([]string, len(turns)), make([]string, len(turns)), make([]string, len(turns)), make([]string, len(turns))
		ats                            = make([]time.Time, len(turns))
		clamped                        = make([]*time.Time, len(turns))
		metas                          = make([]*string, len(turns))
		seqs                           = make([]int64, len(turns))
	)
	for i, t := range turns {
		ids[i], users[i], convs[i], msgs[i], resps[i] = t.EventID, t.UserID, t.ConversationID, t.UserMessage, t.AssistantResponse
		ats[i], clamped[i] = t.TurnAt, t.ClampedFrom
		seqs[i] = int64(t.StreamSeq)
		if len(t.Metadata) > 0 && string(t.Metadata) != "null" {
			m := string(t.Metadata)
			metas[i] = &m
		}
	}
	rows, err := s.db.Query(ctx, `
		INSERT INTO turns (event_id, user_id, conversation_id, user_message, assistant_response, turn_at, metadata, stream_seq, clamped_from)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::jsonb[], $8::bigint[], $9::timestamptz[])
		ON CONFLICT (event_id) DO NOTHING
		RETURNING event_id`,
		ids, users, convs, msgs, resps, ats, metas, seqs, clamped)
	if err != nil {
		return nil, fmt.Errorf("insert turns: %w", err)
	}
	inserted, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("insert turns: %w", err)
	}
	return inserted, nil
}

const turnColumns = `event_id, user_id, conversation_id, user_message, assistant_response, turn_at, clamped_from,
	metadata, coalesce(stream_seq, 0), status, attempts, coalesce(last_error, ''), received_at, processed_at`

func scanTurn(row pgx.CollectableRow) (Turn, error) {
	var (
		t   Turn
		seq int64
	)
	err := row.Scan(&t.EventID, &t.UserID, &t.ConversationID, &t.UserMessage, &t.AssistantResponse, &t.TurnAt, &t.ClampedFrom,
		&t.Metadata, &seq, &t.Status, &t.Attempts, &t.LastError, &t.ReceivedAt, &t.ProcessedAt)
	t.StreamSeq = uint64(seq)
	return t, err
}

// UnprocessedTurns returns the turns among eventIDs that are not yet
// processed, ordered by turn time.
func (s *Store) UnprocessedTurns(ctx context.Context, eventIDs []string) ([]Turn, error) {
	return s.unprocessedTurns(ctx, eventIDs, "")
}

// LockUnprocessedTurns is UnprocessedTurns with the rows locked FOR UPDATE
// until the transaction ends. Call it inside InTx: the lock makes two jobs
// racing on the same turn (a rescued job and its original) store it once.
func (s *Store) LockUnprocessedTurns(ctx context.Context, eventIDs []string) ([]Turn, error) {
	return s.unprocessedTurns(ctx, eventIDs, " FOR UPDATE")
}

func (s *Store) unprocessedTurns(ctx context.Context, eventIDs []string, lock string) ([]Turn, error) {
	rows, err := s.db.Query(ctx, `SELECT `+turnColumns+` FROM turns
		WHERE event_id = ANY($1) AND status <> 'processed'
		ORDER BY turn_at, event_id`+lock, eventIDs)
	if err != nil {
		return nil, fmt.Errorf("unprocessed turns: %w", err)
	}
	turns, err := pgx.CollectRows(rows, scanTurn)
	if err != nil {
		return nil, fmt.Errorf("unprocessed turns: %w", err)
	}
	return turns, nil
}

// GetTurn returns one turn, or ErrNotFound.
func (s *Store) GetTurn(ctx context.Context, eventID string) (Turn, error) {
	rows, err := s.db.Query(ctx, `SELECT `+turnColumns+` FROM turns WHERE event_id = $1`, eventID)
	if err != nil {
		return Turn{}, fmt.Errorf("get turn: %w", err)
	}
	t, err := pgx.CollectExactlyOneRow(rows, scanTurn)
	if err != nil {
		return Turn{}, notFound("get turn", err)
	}
	return t, nil
}

// MarkProcessed marks turns processed by the given extractor.
func (s *Store) MarkProcessed(ctx context.Context, eventIDs []string, p Provenance) error {
	_, err := s.db.Exec(ctx, `UPDATE turns
		SET status = 'processed', processed_at = now(), attempts = attempts + 1, last_error = NULL, claimed_until = NULL,
		    extractor = $2, model = $3, prompt_version = $4
		WHERE event_id = ANY($1)`, eventIDs, p.Extractor, p.Model, p.PromptVersion)
	if err != nil {
		return fmt.Errorf("mark processed: %w", err)
	}
	return nil
}

// MarkFailed records an extraction failure for turns that are not processed.
// With final set the turns become failed (queryable and re-runnable with
// RetryFailed); otherwise they stay pending with the error noted.
func (s *Store) MarkFailed(ctx context.Context, eventIDs []string, reason string, final bool) error {
	status := StatusPending
	if final {
		status = StatusFailed
	}
	_, err := s.db.Exec(ctx, `UPDATE turns
		SET status = $2, attempts = attempts + 1, last_error = left($3, 2000), claimed_until = NULL
		WHERE event_id = ANY($1) AND status <> 'processed'`, eventIDs, status, reason)
	if err != nil {
		return fmt.Errorf("mark failed: %w", err)
	}
	return nil
}

// FailedTurns lists failed turns, oldest first, optionally for one user.
func (s *Store) FailedTurns(ctx context.Context, userID string, limit int) ([]Turn, error) {
	rows, err := s.db.Query(ctx, `SELECT `+turnColumns+` FROM turns
		WHERE status = 'failed' AND ($1 = '' OR user_id = $1)
		ORDER BY received_at, event_id LIMIT $2`, userID, limit)
	if err != nil {
		return nil, fmt.Errorf("failed turns: %w", err)
	}
	turns, err := pgx.CollectRows(rows, scanTurn)
	if err != nil {
		return nil, fmt.Errorf("failed turns: %w", err)
	}
	return turns, nil
}

// ResetFailed sets the given failed turns back to pending and returns the ids
// it reset, so the caller can enqueue them again in the same transaction.
func (s *Store) ResetFailed(ctx context.Context, eventIDs []string) ([]string, error) {
	rows, err := s.db.Query(ctx, `UPDATE turns SET status = 'pending'
		WHERE event_id = ANY($1) AND status = 'failed' RETURNING event_id`, eventIDs)
	if err != nil {
		return nil, fmt.Errorf("reset failed: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("reset failed: %w", err)
	}
	return ids, nil
}

// UserStats summarises one user's memory.
type UserStats struct {
	TurnsReceived   int64      `json:"turns_received"`
	TurnsProcessed  int64      `json:"turns_processed"`
	TurnsFailed     int64      `json:"turns_failed"`
	TurnsPending    int64      `json:"turns_pending"`
	Facts           int64      `json:"facts"`
	ContextItems    int64      `json:"context_items"`
	LastProcessedAt *time.Time `json:"last_processed_at"`
	// LLMUsage is the model tokens spent on the user's turns, by model.
	LLMUsage map[string]TokenUsage `json:"llm_usage"`
}

// TokenUsage counts model tokens.
type TokenUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	// Extractions counts the extraction calls the tokens were spent on.
	Extractions int64 `json:"extractions"`
}

// AddUsage adds tokens spent extracting a user's turns with model.
func (s *Store) AddUsage(ctx context.Context, userID, model string, u TokenUsage) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO llm_usage (user_id, model, prompt_tokens, completion_tokens, extractions)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (user_id, model) DO UPDATE SET
			prompt_tokens = llm_usage.prompt_tokens + excluded.prompt_tokens,
			completion_tokens = llm_usage.completion_tokens + excluded.completion_tokens,
			extractions = llm_usage.extractions + excluded.extractions`,
		userID, model, u.PromptTokens, u.CompletionTokens, u.Extractions)
	if err != nil {
		return fmt.Errorf("add usage: %w", err)
	}
	return nil
}

// Stats returns per-user counts, or totals over all users when userID is "".
func (s *Store) Stats(ctx context.Context, userID string) (UserStats, error) {
	var st UserStats
	err := s.db.QueryRow(ctx, `
		SELECT
			(SELECT count(*) FROM turns WHERE $1 = '' OR user_id = $1),
			(SELECT count(*) FROM turns WHERE ($1 = '' OR user_id = $1) AND status = 'processed'),
			(SELECT count(*) FROM turns WHERE ($1 = '' OR user_id = $1) AND status = 'failed'),
			(SELECT count(*) FROM turns WHERE ($1 = '' OR user_id = $1) AND status = 'pending'),
			(SELECT count(*) FROM facts WHERE $1 = '' OR user_id = $1),
			(SELECT count(*) FROM context WHERE $1 = '' OR user_id = $1),
			(SELECT max(processed_at) FROM turns WHERE ($1 = '' OR user_id = $1) AND status = 'processed')`,
		userID).Scan(&st.TurnsReceived, &st.TurnsProcessed, &st.TurnsFailed, &st.TurnsPending,
		&st.Facts, &st.ContextItems, &st.LastProcessedAt)
	if err != nil {
		return UserStats{}, fmt.Errorf("stats: %w", err)
	}
	rows, err := s.db.Query(ctx, `SELECT model, sum(prompt_tokens), sum(completion_tokens), sum(extractions)
		FROM llm_usage WHERE $1 = '' OR user_id = $1 GROUP BY model`, userID)
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
			SELECT * FROM c ORDER BY turn_at, event_id`, c.UserID, c.ConversationID, c.Own, c.Limit, c.TTL, c.JobID)
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

// ReleaseClaims ends job jobID's claim on the given turns of userID, so that
// the job's next run, or the job of another turn, can claim them at once.
// Turns another job claimed meanwhile are left alone.
func (s *Store) ReleaseClaims(ctx context.Context, jobID int64, userID string, eventIDs []string) error {
	_, err := s.db.Exec(ctx, `UPDATE turns SET claimed_until = NULL, claimed_by = NULL
		WHERE user_id = $1 AND event_id = ANY($2) AND claimed_by = $3`, userID, eventIDs, jobID)
	if err != nil {
		return fmt.Errorf("release claims: %w", err)
	}
	return nil
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
