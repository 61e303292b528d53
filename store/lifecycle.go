package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Removed counts rows deleted from each table.
type Removed struct {
	Facts       int64 `json:"facts"`
	FactHistory int64 `json:"fact_history"`
	Context     int64 `json:"context"`
	Turns       int64 `json:"turns"`
	Jobs        int64 `json:"jobs"`
}

// ForgetUser deletes everything memoryd keeps about a user in Postgres: facts,
// fact history, context, turns, extraction jobs and token usage, in one
// transaction. A job
// that is running meanwhile finds no turns and stores nothing.
func (s *Store) ForgetUser(ctx context.Context, userID string) (Removed, error) {
	var r Removed
	err := s.InTx(ctx, func(_ pgx.Tx, q *Store) error {
		// Jobs before turns: a turn ingested concurrently then keeps its job
		// or goes with it, never stays pending without one. (River's job
		// rows carry the user id in their args; jobs of several users carry
		// none and simply find the user's turns gone.)
		tag, err := q.db.Exec(ctx, `DELETE FROM river_job WHERE kind = $1 AND args->>'user_id' = $2`, ExtractJobKind, userID)
		if err != nil {
			return fmt.Errorf("forget jobs: %w", err)
		}
		jobs := tag.RowsAffected()
		// Turns next: deleting them waits for any extraction holding their
		// locks to commit, so the memory it wrote is visible to the deletes
		// below; a later extraction finds no turns and writes nothing.
		tag, err = q.db.Exec(ctx, `DELETE FROM turns WHERE user_id = $1`, userID)
		if err != nil {
			return fmt.Errorf("forget turns: %w", err)
		}
		r.Turns = tag.RowsAffected()
		removed, err := q.deleteMemory(ctx, []string{userID}, true)
		if err != nil {
			return err
		}
		removed.Turns, removed.Jobs = r.Turns, jobs
		r = removed
		if _, err := q.db.Exec(ctx, `DELETE FROM llm_usage WHERE user_id = $1`, userID); err != nil {
			return fmt.Errorf("forget usage: %w", err)
		}
		return nil
	})
	return r, err
}

// ExtractJobKind is the River kind of extraction jobs (see worker.ExtractArgs).
const ExtractJobKind = "memoryd_extract"

// ResetMemory deletes the derived memory (facts, fact history, context) of
// the given users, or of every user when userIDs is empty, in one
// transaction, before a replay rebuilds it. Turns are kept, and so are items
// written directly through the memory tools (extractor "direct"): they never
// passed through the stream, so a replay could not bring them back.
func (s *Store) ResetMemory(ctx context.Context, userIDs []string) (Removed, error) {
	var r Removed
	err := s.InTx(ctx, func(_ pgx.Tx, q *Store) error {
		var err error
		r, err = q.deleteMemory(ctx, userIDs, false)
		return err
	})
	return r, err
}

func (s *Store) deleteMemory(ctx context.Context, userIDs []string, withDirect bool) (Removed, error) {
	var r Removed
	all := len(userIDs) == 0
	if withDirect {
		// First, under the users' clear locks (see lockClears for the order).
		if err := s.deleteClears(ctx, all, userIDs); err != nil {
			return r, err
		}
	}
	for _, t := range []struct {
		table string
		n     *int64
	}{{"facts", &r.Facts}, {"context", &r.Context}} {
		tag, err := s.db.Exec(ctx, `DELETE FROM `+t.table+` WHERE ($1 OR user_id = ANY($2)) AND ($3 OR extractor <> 'direct')`, all, userIDs, withDirect)
		if err != nil {
			return r, fmt.Errorf("delete %s: %w", t.table, err)
		}
		*t.n = tag.RowsAffected()
	}
	// History goes with forget only: after a reset the rebuilt facts add to
	// it, keeping what the replay changed visible.
	if withDirect {
		tag, err := s.db.Exec(ctx, `DELETE FROM fact_history WHERE $1 OR user_id = ANY($2)`, all, userIDs)
		if err != nil {
			return r, fmt.Errorf("delete fact_history: %w", err)
		}
		r.FactHistory = tag.RowsAffected()
	}
	return r, nil
}

// RequeueTurns records turns read again from the stream for a replay: new
// ones are inserted, known ones that are not pending are set back to pending
// with their content refreshed from the event, which also gives a turn whose
// text was cleared after the retention period its text back. It returns the
// ids that need an extraction job; a turn already pending has one.
func (s *Store) RequeueTurns(ctx context.Context, turns []Turn) ([]string, error) {
	if len(turns) == 0 {
		return nil, nil
	}
	n := len(turns)
	ids, users, convs, msgs, resps := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	ats := make([]time.Time, n)
	seqs := make([]int64, n)
	metas := make([]*string, n)
	clamped := make([]*time.Time, n)
	for i, t := range turns {
		ids[i], users[i], convs[i], msgs[i], resps[i] = t.EventID, t.UserID, t.ConversationID, t.UserMessage, t.AssistantResponse
		ats[i], seqs[i], clamped[i] = t.TurnAt, int64(t.StreamSeq), t.ClampedFrom
		if len(t.Metadata) > 0 && string(t.Metadata) != "null" {
			m := string(t.Metadata)
			metas[i] = &m
		}
	}
	// xmax = 0 tells an inserted row from an updated one; the WHERE skips
	// rows already pending, which RETURNING then omits.
	rows, err := s.db.Query(ctx, `
		INSERT INTO turns AS t (event_id, user_id, conversation_id, user_message, assistant_response, turn_at, stream_seq, metadata, clamped_from)
		SELECT DISTINCT ON (e) e, u, c, m, r, a, q, md, cf
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::bigint[], $8::jsonb[], $9::timestamptz[]) AS x(e, u, c, m, r, a, q, md, cf)
		ORDER BY e
		ON CONFLICT (event_id) DO UPDATE
		SET status = 'pending', last_error = NULL, user_message = excluded.user_message,
		    assistant_response = excluded.assistant_response, metadata = excluded.metadata, text_cleared_at = NULL,
		    turn_at = excluded.turn_at, clamped_from = excluded.clamped_from, conversation_id = excluded.conversation_id, stream_seq = excluded.stream_seq
		WHERE t.status <> 'pending' AND t.user_id = excluded.user_id
		RETURNING event_id`,
		ids, users, convs, msgs, resps, ats, seqs, metas, clamped)
	if err != nil {
		return nil, fmt.Errorf("requeue turns: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("requeue turns: %w", err)
	}
	return out, nil
}

// PendingTurns counts turns not yet processed or failed, for the given users
// (all when empty).
func (s *Store) PendingTurns(ctx context.Context, userIDs []string) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, `SELECT count(*) FROM turns WHERE status = 'pending' AND ($1 OR user_id = ANY($2))`,
		len(userIDs) == 0, userIDs).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("pending turns: %w", err)
	}
	return n, nil
}

// QueueDepth counts River jobs that are not finished, by queue and state
// (available, scheduled, retryable, running, pending).
func (s *Store) QueueDepth(ctx context.Context) (map[[2]string]int64, error) {
	rows, err := s.db.Query(ctx, `SELECT queue, state::text, count(*) FROM river_job
		WHERE state IN ('available', 'scheduled', 'retryable', 'running', 'pending')
		GROUP BY queue, state`)
	if err != nil {
		return nil, fmt.Errorf("queue depth: %w", err)
	}
	depth := map[[2]string]int64{}
	var (
		queue, state string
		n            int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&queue, &state, &n}, func() error {
		depth[[2]string{queue, state}] = n
		return nil
	}); err != nil {
		return nil, fmt.Errorf("queue depth: %w", err)
	}
	return depth, nil
}
