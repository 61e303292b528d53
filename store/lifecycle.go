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

// ForgetUser deletes everything memoryd keeps about a user in Postgres:
// facts, fact history, context, turns, the extraction jobs that name the
// user's turns and token usage, and leaves a tombstone for the user's token,
// all in one transaction. The tombstone covers the turn stream up to
// throughSeq (the stream's last sequence when the forget began) and every
// turn of the user recorded so far, and only grows; it returns it, so the
// caller purges the stream up to its sequence.
//
// It first takes the user's lock exclusively (see LockUsers): writes for the
// user in flight (ingest, extraction, replay, token usage) commit before it,
// and it deletes what they wrote; those after it see the tombstone. A forget
// that failed half-way can simply be run again.
func (s *Store) ForgetUser(ctx context.Context, userID, token string, throughSeq uint64) (Removed, Tombstone, error) {
	var (
		r    Removed
		tomb = Tombstone{UserToken: token}
	)
	err := s.InTx(ctx, func(_ pgx.Tx, q *Store) error {
		if _, err := q.db.Exec(ctx, `SELECT pg_advisory_xact_lock(`+fmt.Sprintf(userLock, "$1::text")+`)`, token); err != nil {
			return fmt.Errorf("forget: lock user: %w", err)
		}
		var seq int64
		err := q.db.QueryRow(ctx, `
			INSERT INTO tombstones AS t (user_token, stream_seq)
			SELECT $1, greatest($2::bigint, (SELECT max(stream_seq) FROM turns WHERE user_id = $3))
			ON CONFLICT (user_token) DO UPDATE
			SET stream_seq = greatest(t.stream_seq, excluded.stream_seq), forgotten_at = now()
			RETURNING stream_seq, forgotten_at`, token, int64(throughSeq), userID).Scan(&seq, &tomb.ForgottenAt)
		if err != nil {
			return fmt.Errorf("forget: tombstone: %w", err)
		}
		tomb.StreamSeq = uint64(seq)
		// Jobs before turns, which name them. A job of the user goes; a job
		// of several users (replay before migration 012; jobs now name one
		// user) loses the user's event ids, or goes when nothing else is
		// left, so that no job row keeps naming the user's turns. (Another
		// user's turn with the same id loses its place in such a job too;
		// the reconciler requeues it.) A running job finds the turns gone and stores nothing.
		// (Every data-modifying WITH clause runs, read or not.)
		tag, err := q.db.Exec(ctx, `DELETE FROM river_job WHERE kind = $1 AND args->>'user_id' = $2`, ExtractJobKind, userID)
		if err != nil {
			return fmt.Errorf("forget jobs: %w", err)
		}
		jobs := tag.RowsAffected()
		var emptied int64
		err = q.db.QueryRow(ctx, `
			WITH mine AS (
				SELECT coalesce(array_agg(event_id), '{}') AS ids FROM turns WHERE user_id = $2
			), stripped AS (
				SELECT j.id, coalesce((SELECT jsonb_agg(e) FROM jsonb_array_elements_text(j.args->'event_ids') AS e
				                       WHERE e <> ALL (mine.ids)), '[]'::jsonb) AS rest
				FROM river_job j, mine
				WHERE j.kind = $1 AND coalesce(j.args->>'user_id', '') = '' AND j.args->'event_ids' ?| mine.ids
			), emptied AS (
				DELETE FROM river_job j USING stripped s WHERE j.id = s.id AND s.rest = '[]'::jsonb RETURNING 1
			), updated AS (
				UPDATE river_job j SET args = jsonb_set(j.args, '{event_ids}', s.rest)
				FROM stripped s WHERE j.id = s.id AND s.rest <> '[]'::jsonb RETURNING 1
			)
			SELECT count(*) FROM emptied`, ExtractJobKind, userID).Scan(&emptied)
		if err != nil {
			return fmt.Errorf("forget jobs of several users: %w", err)
		}
		// Turns next: deleting them waits for any extraction holding their
		// locks to commit, so the memory it wrote is visible to the deletes
		// below; a later extraction finds no turns and writes nothing.
		tag, err = q.db.Exec(ctx, `DELETE FROM turns WHERE user_id = $1`, userID)
		if err != nil {
			return fmt.Errorf("forget turns: %w", err)
		}
		turns := tag.RowsAffected()
		if r, err = q.deleteMemory(ctx, []string{userID}, true); err != nil {
			return err
		}
		r.Turns, r.Jobs = turns, jobs+emptied
		if _, err := q.db.Exec(ctx, `DELETE FROM llm_usage WHERE user_id = $1`, userID); err != nil {
			return fmt.Errorf("forget usage: %w", err)
		}
		return nil
	})
	if err != nil {
		return Removed{}, Tombstone{}, err
	}
	return r, tomb, nil
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
// keys of the turns that need an extraction job; a turn already pending has
// one. Of several events with one key (a frontend's retry, or a conflicting
// duplicate that ingest dead-lettered), the earliest in the stream counts,
// and a later one changes a recorded turn only if its content is the same.
func (s *Store) RequeueTurns(ctx context.Context, turns []Turn) ([]TurnKey, error) {
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
	// The upsert locks the rows it conflicts with in its own (user, id)
	// order, pending ones included; an extraction's save and a burst's claim
	// lock a user's turns in (turn_at, event_id) order. Locking the existing
	// rows first in that order makes the orders agree, so replay beside
	// extraction cannot deadlock.
	if _, err := s.db.Exec(ctx, `
		SELECT 1 FROM turns t
		WHERE (t.user_id, t.event_id) IN (SELECT u, e FROM unnest($1::text[], $2::text[]) AS x(e, u))
		ORDER BY t.turn_at, t.event_id, t.user_id
		FOR UPDATE`, ids, users); err != nil {
		return nil, fmt.Errorf("requeue turns: lock: %w", err)
	}
	// The WHERE skips rows already pending, which RETURNING then omits.
	rows, err := s.db.Query(ctx, `
		INSERT INTO turns AS t (event_id, user_id, conversation_id, user_message, assistant_response, turn_at, stream_seq, metadata, clamped_from, content_hash)
		SELECT DISTINCT ON (u, e) e, u, c, m, r, a, q, md, cf, memoryd_turn_hash(c, m, r, coalesce(cf, a), md)
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::bigint[], $8::jsonb[], $9::timestamptz[]) AS x(e, u, c, m, r, a, q, md, cf)
		ORDER BY u, e, q
		ON CONFLICT (user_id, event_id) DO UPDATE
		SET status = 'pending', last_error = NULL, user_message = excluded.user_message,
		    assistant_response = excluded.assistant_response, metadata = excluded.metadata, text_cleared_at = NULL,
		    turn_at = excluded.turn_at, clamped_from = excluded.clamped_from, conversation_id = excluded.conversation_id, stream_seq = excluded.stream_seq,
		    content_hash = excluded.content_hash
		WHERE t.status <> 'pending' AND (t.content_hash IS NULL OR t.content_hash = excluded.content_hash)
		RETURNING user_id, event_id`,
		ids, users, convs, msgs, resps, ats, seqs, metas, clamped)
	if err != nil {
		return nil, fmt.Errorf("requeue turns: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[TurnKey])
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
