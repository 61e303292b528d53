package store

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"golang.org/x/text/unicode/norm"
)

// ContextItem is one remembered question/answer pair.
type ContextItem struct {
	ID             int64
	UserID         string
	Question       string
	Answer         string
	CreatedAt      time.Time
	EventID        string
	ConversationID string
	// Score is the search relevance in 0..1; zero outside search results.
	Score float64
}

// ContextWrite is a context item to insert.
type ContextWrite struct {
	UserID         string
	Question       string
	Answer         string
	CreatedAt      time.Time // the turn's timestamp
	EventID        string
	ConversationID string
	// Placed is the turn's place in the turn stream, for an item
	// extracted from a turn (zero otherwise): a clear that recorded a
	// later position of that stream covers the item whatever CreatedAt
	// says (see StreamPosition).
	Placed StreamPosition
	Provenance
}

// ContentHash is the dedup key of a context item: SHA-256 over the user id and
// the normalised question and answer, NUL-separated. NUL cannot occur in
// Postgres text, so the fields cannot run into each other, and including the
// user id keeps one user's memory from ever blocking another's.
func ContentHash(userID, question, answer string) []byte {
	return pairHash(userID, normalize(question), normalize(answer))
}

func pairHash(userID, question, answer string) []byte {
	h := sha256.New()
	h.Write([]byte(userID))
	h.Write([]byte{0})
	h.Write([]byte(question))
	h.Write([]byte{0})
	h.Write([]byte(answer))
	return h.Sum(nil)
}

// normalize puts s in Unicode NFKC, lowercases it and collapses white
// space, so that pairs differing only in case, spacing or Unicode form
// count as the same memory: a composed or decomposed accent ("café" typed,
// "café" pasted from a macOS file name), full-width Latin letters and
// digits as Japanese input methods type them ("ＩＫＥＡ"), ligatures ("ﬁ").
// Search folds the same forms (migration 049).
func normalize(s string) string {
	return fold(norm.NFKC.String(s))
}

// legacyNormalize is normalize as it was before migration 051, without
// NFKC. Hashes recorded then and never re-derived from text (the clears in
// context_clears, and what an older export carries) are matched by it too
// (see clearKeys).
func legacyNormalize(s string) string {
	return fold(s)
}

// fold lowercases s and collapses its white space, rune for rune.
func fold(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range strings.TrimSpace(s) {
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// questionHash is the key of a clear by question: SHA-256 over the user id
// and the normalised question, NUL-separated. It cannot equal a ContentHash,
// whose input has one NUL more (no field holds NUL).
func questionHash(userID, question string) []byte {
	return questionKey(userID, normalize(question))
}

func questionKey(userID, question string) []byte {
	h := sha256.New()
	h.Write([]byte(userID))
	h.Write([]byte{0})
	h.Write([]byte(question))
	return h.Sum(nil)
}

// eventKey is the key of context_clears that covers every item extracted
// from one turn, the user's event eventID (nil without one). A clear by id
// or by question records the keys of the deleted items' turns beside
// their pairs' (DeleteContext), so that the turn extracted again by
// another model, which words its pairs otherwise, does not bring back what
// was cleared (a facts walk: a cleared item came back reworded after a
// model change and a replay). eventKeySQL spells the same in SQL. Its
// input is unlike a content or question hash's (those hold NULs, and no
// field does), so it equals neither.
func eventKey(userID, eventID string) []byte {
	if eventID == "" {
		return nil
	}
	h := sha256.Sum256([]byte("memoryd-event:" + strconv.Itoa(len(userID)) + ":" + userID + eventID))
	return h[:]
}

// eventKeySQL is eventKey of the SQL expressions {user} and {event}.
const eventKeySQL = `sha256(convert_to('memoryd-event:' || octet_length({user})::text || ':' || {user} || {event}, 'UTF8'))`

// clearedTurn is the condition, on a context row x, that a clear covers
// x's turn (its eventKey is recorded): nothing extracted from that turn
// again is stored, so a reset or a re-extraction of the turn keeps x
// rather than delete what no extraction brings back (the turn's items no
// one cleared).
var clearedTurn = `(x.event_id <> '' AND EXISTS (SELECT 1 FROM context_clears ct
	WHERE ct.user_id = x.user_id AND ct.hash = ` + strings.NewReplacer("{user}", "x.user_id", "{event}", "x.event_id").Replace(eventKeySQL) + `))`

// clearKeys are the keys of context_clears that cover a pair: its content
// hash and its question's, under normalize and, since a clear recorded
// before migration 051 holds a hash of legacyNormalize, under that too.
// The legacy keys are the current ones unless NFKC changes the text.
type clearKeys struct {
	hash, question, legacyHash, legacyQuestion []byte
}

func keysOf(userID, question, answer string) clearKeys {
	nq := normalize(question) // once for both hashes: this runs for every item written
	k := clearKeys{hash: pairHash(userID, nq, normalize(answer)), question: questionKey(userID, nq)}
	k.legacyHash, k.legacyQuestion = k.hash, k.question
	if !norm.NFKC.IsNormalString(question) || !norm.NFKC.IsNormalString(answer) {
		lq := legacyNormalize(question)
		k.legacyHash, k.legacyQuestion = pairHash(userID, lq, legacyNormalize(answer)), questionKey(userID, lq)
	}
	return k
}

// InsertContext inserts context items, skipping any whose content hash the
// user already has, and any that a clear (DeleteContext) covers: a clear of
// all the user's items, of the pair or of its question, at or after the
// item's time. It returns the ids of the rows inserted, in input order with
// 0 for a duplicate or a cleared item.
//
// A duplicate of an existing item is not dropped silently: the existing row
// is locked (ON CONFLICT DO UPDATE locks even when its WHERE is false) and its
// created_at moves to the newer turn's time, since the memory was just said
// again. A batch holding a pair more than once writes its first statement
// (its event and conversation) at the latest of their times. The other
// turns that said the pair are kept in said_in (the latest 64), so that a
// clear of the item covers them too (DeleteContext). The lock is
// what keeps a concurrent prune from deleting the row the new pair was
// deduplicated against: pruning skips locked rows, and an insert that
// waited on a row the prune deleted inserts the pair anew.
func (s *Store) InsertContext(ctx context.Context, items []ContextWrite) ([]int64, error) {
	return s.insertContextItems(ctx, items, false)
}

// insertContextItems is InsertContext; with held, the transaction holds
// the reset lock and the items' users' clear locks already (SaveMemory).
func (s *Store) insertContextItems(ctx context.Context, items []ContextWrite, held bool) ([]int64, error) {
	if len(items) == 0 {
		return nil, nil
	}
	n := len(items)
	users, qs, as, events, convs, extractors, models, prompts := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	ats := make([]time.Time, n)
	hashes, qhashes, lhashes, lqhashes, ehashes := make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
	ords := make([]int32, n)
	seqs, streams := make([]int64, n), make([]*time.Time, n)
	for i, it := range items {
		seqs[i], streams[i] = int64(it.Placed.Seq), it.Placed.storedOrNil()
		users[i], qs[i], as[i], events[i], convs[i] = it.UserID, it.Question, it.Answer, it.EventID, it.ConversationID
		extractors[i], models[i], prompts[i] = it.Extractor, it.Model, it.PromptVersion
		ats[i] = it.CreatedAt
		k := keysOf(it.UserID, it.Question, it.Answer)
		hashes[i], qhashes[i], lhashes[i], lqhashes[i] = k.hash, k.question, k.legacyHash, k.legacyQuestion
		ehashes[i] = eventKey(it.UserID, it.EventID)
		ords[i] = int32(i)
	}
	ids := make([]int64, n)
	err := s.inTx(ctx, func(q *Store) error {
		// First, as UpsertFacts: a reset of every user in flight commits
		// first, or waits for this insert (see resetLock).
		if !held {
			if err := q.lockResets(ctx); err != nil {
				return err
			}
			// Held to the end of the transaction: a clear of these users
			// waits for it, and it sees every clear committed before.
			if err := q.lockClears(ctx, users, false); err != nil {
				return err
			}
		}
		if err := q.insertContext(ctx, ids, users, qs, as, ats, events, convs, hashes, extractors, models, prompts, ords, qhashes, seqs, streams, lhashes, lqhashes, ehashes); err != nil {
			return err
		}
		var refs []ContextRef
		hooked := map[int64]bool{}
		for i, id := range ids {
			if id != 0 && !hooked[id] {
				hooked[id] = true
				refs = append(refs, ContextRef{UserID: users[i], ID: id})
			}
		}
		return q.contextWritten(ctx, refs)
	})
	if err != nil {
		return nil, fmt.Errorf("insert context: %w", err)
	}
	// Within one batch only the first of equal pairs is the insert.
	seen := map[int64]bool{}
	for i, id := range ids {
		if seen[id] {
			ids[i] = 0
		}
		seen[id] = id != 0
	}
	return ids, nil
}

// insertContext runs InsertContext's statement on the columns it built (in
// the order of the unnest below) and sets ids[o] for each item o inserted.
// An item is not inserted when a clear covers it: by its turn's time, or by
// its turn's place in the stream (sq, sc) whatever that time.
func (s *Store) insertContext(ctx context.Context, ids []int64, args ...any) error {
	rows, err := s.db.Query(ctx, `
		WITH w AS (
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::text[], $6::text[], $7::bytea[], $8::text[], $9::text[], $10::text[], $11::int[], $12::bytea[], $13::bigint[], $14::timestamptz[], $15::bytea[], $16::bytea[], $17::bytea[])
				AS w(u, q, a, t, e, c, h, x, m, p, o, qh, sq, sc, lh, lqh, eh)
			WHERE NOT EXISTS (SELECT FROM context_clears cl
				WHERE cl.user_id = w.u AND cl.hash IN ('\x'::bytea, w.h, w.qh, w.lh, w.lqh, w.eh)
				  AND (`+clearedTime("cl", "w.sq", "w.sc")+` >= w.t OR `+coveredByPosition("cl", "w.sq", "w.sc")+`))
		), ins AS (
			INSERT INTO context AS c (user_id, question, answer, created_at, event_id, conversation_id, content_hash, extractor, model, prompt_version, said_in)
			SELECT DISTINCT ON (u, h) u, q, a, max(t) OVER pair, e, c, h, x, m, p,
				CASE WHEN count(*) OVER pair = 1 THEN '{}' ELSE memoryd_said_in('{}', e, array_agg(e) OVER pair) END
			FROM w WINDOW pair AS (PARTITION BY u, h ORDER BY o ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
			ORDER BY u, h, o
			ON CONFLICT (user_id, content_hash) DO UPDATE SET created_at = greatest(c.created_at, excluded.created_at),
				said_in = memoryd_said_in(c.said_in, c.event_id, array_prepend(excluded.event_id, excluded.said_in))
			WHERE c.created_at < excluded.created_at
			   OR memoryd_said_in(c.said_in, c.event_id, array_prepend(excluded.event_id, excluded.said_in)) <> c.said_in
			RETURNING id, user_id, content_hash, xmax = 0 AS inserted
		)
		SELECT w.o, ins.id FROM ins JOIN w ON w.u = ins.user_id AND w.h = ins.content_hash WHERE ins.inserted`,
		args...)
	if err != nil {
		return err
	}
	var (
		ord int32
		id  int64
	)
	_, err = pgx.ForEachRow(rows, []any{&ord, &id}, func() error {
		if ids[ord] == 0 {
			ids[ord] = id
		}
		return nil
	})
	return err
}

const contextColumns = `id, user_id, question, answer, created_at, event_id, conversation_id`

func scanContext(row pgx.CollectableRow) (ContextItem, error) {
	var c ContextItem
	err := row.Scan(&c.ID, &c.UserID, &c.Question, &c.Answer, &c.CreatedAt, &c.EventID, &c.ConversationID)
	return c, err
}

// RecentContext returns a user's newest context items, at most limit.
func (s *Store) RecentContext(ctx context.Context, userID string, limit int) ([]ContextItem, error) {
	rows, err := s.db.Query(ctx, `SELECT `+contextColumns+` FROM context
		WHERE user_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2`, userID, limit)
	if err != nil {
		return nil, fmt.Errorf("recent context: %w", err)
	}
	items, err := pgx.CollectRows(rows, scanContext)
	if err != nil {
		return nil, fmt.Errorf("recent context: %w", err)
	}
	return items, nil
}

// CountContext returns how many context items a user has.
func (s *Store) CountContext(ctx context.Context, userID string) (int64, error) {
	var n int64
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM context WHERE user_id = $1`, userID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count context: %w", err)
	}
	return n, nil
}
