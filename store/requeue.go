package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequeueTurns records turns read again from the stream for a replay: new
// ones are inserted, known ones that are not pending are set back to pending
// with their content refreshed from the event, which also gives a turn whose
// text was cleared after the retention period its text back. It returns the
// keys of the turns that need an extraction job; a turn already pending has
// one. Of several events with one key (a frontend's retry, or a conflicting
// duplicate that ingest dead-lettered), the earliest in the stream counts,
// and a later one changes a recorded turn only if its content is the same.
//
// A turn processed after extractedSince (non-zero: a reset's
// ResetMark.Committed) is left as it is: ingest extracted it after the
// reset, so its memory is already the rebuilt one. Extracted again, a
// model given other earlier turns words it otherwise, and the user kept
// both items of the one turn.
func (s *Store) RequeueTurns(ctx context.Context, turns []Turn, extractedSince time.Time) ([]TurnKey, error) {
	if len(turns) == 0 {
		return nil, nil
	}
	n := len(turns)
	ids, users, convs, msgs, resps := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	ats := make([]time.Time, n)
	seqs := make([]int64, n)
	streams := make([]*time.Time, n)
	metas := make([]*string, n)
	clamped := make([]*time.Time, n)
	offsets := make([]int32, n)
	for i, t := range turns {
		ids[i], users[i], convs[i], msgs[i], resps[i] = t.EventID, t.UserID, t.ConversationID, t.UserMessage, t.AssistantResponse
		ats[i], seqs[i], streams[i], clamped[i] = t.TurnAt, int64(t.Placed.Seq), t.Placed.storedOrNil(), t.ClampedFrom
		offsets[i] = turnOffset(t.TurnAt)
		metas[i] = metadataParam(t.Metadata)
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
	var since *time.Time
	if !extractedSince.IsZero() {
		since = &extractedSince
	}
	// The WHERE skips rows already pending, which RETURNING then omits.
	rows, err := s.db.Query(ctx, `
		INSERT INTO turns AS t (event_id, user_id, conversation_id, user_message, assistant_response, turn_at, stream_seq, stream_stored_at, metadata, clamped_from, content_hash, turn_offset)
		SELECT DISTINCT ON (u, e) e, u, c, m, r, a, q, qc, md, cf, memoryd_turn_hash(c, m, r, coalesce(cf, a), md), tz
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::bigint[], $8::jsonb[], $9::timestamptz[], $10::timestamptz[], $11::int[]) AS x(e, u, c, m, r, a, q, md, cf, qc, tz)
		ORDER BY u, e, q
		ON CONFLICT (user_id, event_id) DO UPDATE
		SET status = 'pending', last_error = NULL, user_message = excluded.user_message,
		    assistant_response = excluded.assistant_response, metadata = excluded.metadata, text_cleared_at = NULL,
		    turn_at = excluded.turn_at, turn_offset = excluded.turn_offset, clamped_from = excluded.clamped_from, conversation_id = excluded.conversation_id, stream_seq = excluded.stream_seq, stream_stored_at = excluded.stream_stored_at,
		    content_hash = excluded.content_hash
		WHERE t.status <> 'pending' AND NOT ($12::timestamptz IS NOT NULL AND t.status = 'processed' AND t.processed_at > $12::timestamptz)
		  AND (t.content_hash IS NULL OR t.content_hash IN (`+
		turnHashes("excluded.conversation_id", "excluded.user_message", "excluded.assistant_response",
			"coalesce(excluded.clamped_from, excluded.turn_at)", "excluded.metadata")+`))
		RETURNING user_id, event_id`,
		ids, users, convs, msgs, resps, ats, seqs, metas, clamped, streams, offsets, since)
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
	return s.PendingTurnsUpTo(ctx, userIDs, 0)
}

// PendingTurnsUpTo is PendingTurns counting only the turns stored in the
// stream at or before sequence maxSeq (and those recorded without a
// sequence); maxSeq 0 counts every pending turn. A replay waits for the
// turns it read, not for live turns recorded after it began reading: with
// a steady flow of turns beside a model that takes seconds, some of those
// are always pending, and the wait never ended.
func (s *Store) PendingTurnsUpTo(ctx context.Context, userIDs []string, maxSeq uint64) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, `SELECT count(*) FROM turns WHERE status = 'pending' AND ($1 OR user_id = ANY($2))
		AND ($3::bigint = 0 OR stream_seq IS NULL OR stream_seq <= $3::bigint)`,
		len(userIDs) == 0, userIDs, int64(maxSeq)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("pending turns: %w", err)
	}
	return n, nil
}
