package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Day is the UTC day t falls on, as midnight UTC: the unit of the daily
// spend caps.
func Day(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// Spend is model tokens (prompt and completion) spent on one UTC day.
type Spend struct {
	// User is one user's tokens; All every user's, forgotten users
	// included.
	User, All int64
}

// SpendOn returns the tokens spent on day (see Day) on userID's turns and on
// everyone's: one read of the user's row, the day's total row and its
// shards (see addDailyUsage).
func (s *Store) SpendOn(ctx context.Context, day time.Time, userID string) (Spend, error) {
	var sp Spend
	err := s.db.QueryRow(ctx, `
		SELECT coalesce((SELECT tokens FROM llm_usage_daily WHERE day = $1 AND user_id = $2 AND $2 <> ''), 0),
		       `+dailyTotal("$1"), Day(day), userID).Scan(&sp.User, &sp.All)
	if err != nil {
		return Spend{}, fmt.Errorf("spend: %w", err)
	}
	return sp, nil
}

// dailyTotal is the SQL of everyone's tokens on the day day (an SQL
// expression of type date): the day's row of llm_usage_daily with the empty
// user id, which serves before migration 032 write, plus its shards.
func dailyTotal(day string) string {
	return `coalesce((SELECT tokens FROM llm_usage_daily WHERE day = ` + day + ` AND user_id = ''), 0) +
		coalesce((SELECT sum(tokens) FROM llm_usage_daily_shards WHERE day = ` + day + `), 0)`
}

// usageShards is how many rows hold everyone's count of a day (migration
// 032), so that the saves of different users' jobs rarely wait for one
// another's commit.
const usageShards = 16

// addDailyUsage adds tokens[i] to users[i]'s and to everyone's count of
// day (by the database's clock when zero); to everyone's alone when
// forgotten[i] (a forgotten user's: see UsageCall.Forgotten). Everyone's count is spread over
// usageShards rows, a user's shard chosen by a hash of the user, because
// every extraction job adds to it in its save transaction and holds the row
// until it commits; readers sum the shards. The users' rows are written
// first, in user order, then their shards, in shard order, whoever calls:
// written user by user, each with its shard, a save of two users of one
// shard held the shard while it waited for the second user's row, which
// a save of that user held while it waited for the shard (40P01,
// TestAddUsageOfTwoUsersOfAShardBesideAnother).
func (s *Store) addDailyUsage(ctx context.Context, day time.Time, users []string, tokens []int64, forgotten []bool) error {
	var d any // NULL: today by the database's clock
	if !day.IsZero() {
		d = Day(day)
	}
	// The shards' sum reads every row of mine, so every user's row is
	// written before the first shard.
	_, err := s.db.Exec(ctx, `
		WITH w AS (
			SELECT u, t, f FROM unnest($2::text[], $3::bigint[], $5::bool[]) AS w(u, t, f) WHERE t > 0 AND u <> ''
		), mine AS (
			INSERT INTO llm_usage_daily AS d (day, user_id, tokens)
			SELECT coalesce($1::date, (now() AT TIME ZONE 'UTC')::date), u, t FROM w WHERE NOT f ORDER BY u
			ON CONFLICT (day, user_id) DO UPDATE SET tokens = d.tokens + excluded.tokens
			RETURNING day, user_id
		)
		INSERT INTO llm_usage_daily_shards AS s (day, shard, tokens)
		SELECT coalesce($1::date, (now() AT TIME ZONE 'UTC')::date), hashtext(w.u) & ($4 - 1), sum(w.t)
		FROM w LEFT JOIN mine m ON w.u = m.user_id AND NOT w.f
		WHERE w.f OR m.user_id IS NOT NULL
		GROUP BY 1, 2 ORDER BY 2
		ON CONFLICT (day, shard) DO UPDATE SET tokens = s.tokens + excluded.tokens`, d, users, tokens, usageShards, forgotten)
	if err != nil {
		return fmt.Errorf("add daily usage: %w", err)
	}
	return nil
}

// forgetDailyUsage deletes a user's daily counts; everyone's keep the
// user's tokens.
func (s *Store) forgetDailyUsage(ctx context.Context, userID string) error {
	// In (day, user_id) order, as the drop of old counts takes them
	// (DeleteSpendBefore): no index leads with the user, and deleted in
	// the table's order, two old days of the user not yet dropped were
	// each held by one of the two while the other waited for it (40P01,
	// TestDeleteSpendBeforeBesideForget).
	if _, err := s.db.Exec(ctx, `WITH locked AS MATERIALIZED (
			SELECT day FROM llm_usage_daily WHERE user_id = $1 AND $1 <> '' ORDER BY day FOR UPDATE)
		DELETE FROM llm_usage_daily u USING locked l WHERE u.user_id = $1 AND u.day = l.day`, userID); err != nil {
		return fmt.Errorf("forget daily usage: %w", err)
	}
	return nil
}

// DeleteSpendBefore deletes the daily counts of days before day: the caps
// read only today's. It returns how many rows it deleted.
func (s *Store) DeleteSpendBefore(ctx context.Context, day time.Time) (int64, error) {
	var n int64
	// The users' counts locked in key order first, as a forget takes its
	// user's (forgetDailyUsage).
	err := s.db.QueryRow(ctx, `WITH locked AS MATERIALIZED (
			SELECT day, user_id FROM llm_usage_daily WHERE day < $1 ORDER BY day, user_id FOR UPDATE),
		a AS (DELETE FROM llm_usage_daily u USING locked l WHERE u.day = l.day AND u.user_id = l.user_id RETURNING 1),
		b AS (DELETE FROM llm_usage_daily_shards WHERE day < $1 RETURNING 1)
		SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b)`, Day(day)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("delete old spend: %w", err)
	}
	return n, nil
}

// OfflineTurns returns the user's processed turns among eventIDs that the
// extractor named offline processed and that still have their text (the
// turns a spend cap sent to the offline extractor and that are to be
// extracted again by the model), ordered by turn time.
func (s *Store) OfflineTurns(ctx context.Context, userID string, eventIDs []string, offline string) ([]Turn, error) {
	rows, err := s.db.Query(ctx, `SELECT `+turnColumns+` FROM turns
		WHERE user_id = $1 AND event_id = ANY($2) AND status = 'processed' AND extractor = $3
		  AND text_cleared_at IS NULL
		ORDER BY turn_at, event_id`, userID, eventIDs, offline)
	if err != nil {
		return nil, fmt.Errorf("offline turns: %w", err)
	}
	turns, err := pgx.CollectRows(rows, scanTurn)
	if err != nil {
		return nil, fmt.Errorf("offline turns: %w", err)
	}
	return turns, nil
}

// Reextraction is the memory a second extractor (the model) made of turns
// that an offline extractor had processed.
type Reextraction struct {
	UserID string
	// EventIDs are the turns extracted again.
	EventIDs []string
	// Offline is the extractor whose memory of the turns is replaced.
	Offline string
	Facts   []FactWrite
	Context []ContextWrite
	// Provenance is the new extractor's, recorded on the turns.
	Provenance Provenance
}

// ReplaceOffline stores a re-extraction of turns the offline extractor
// processed, so that the turns' memory is the new extractor's and nothing
// is kept twice: it locks the turns that are still the offline extractor's
// (a turn extracted again meanwhile, by a replay or an earlier run, is
// skipped), deletes the context items the offline extractor made of them and
// the facts it wrote from them under a key the new extraction writes too
// (a fact from them under another key stays: nothing said it was wrong),
// then writes the new memory (UpsertFacts, InsertContext: a fact a later turn
// changed stays the later one) and records the new provenance on the turns.
// Run it inside InTx. It returns the event ids it replaced.
func (s *Store) ReplaceOffline(ctx context.Context, r Reextraction) ([]string, error) {
	// In (turn_at, event_id) order, as a save, a claim and a replay's
	// requeue lock a user's turns: by event id, beside a replay of turns
	// whose ids are not in time order, each held a turn the other waited
	// for (TestReplayBesideReplaceOfflineOfDisorderedTurns).
	rows, err := s.db.Query(ctx, `SELECT event_id FROM turns
		WHERE user_id = $1 AND event_id = ANY($2) AND status = 'processed' AND extractor = $3
		ORDER BY turn_at, event_id FOR UPDATE`, r.UserID, r.EventIDs, r.Offline)
	if err != nil {
		return nil, fmt.Errorf("replace offline memory: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(ids) == 0 {
		if err != nil {
			err = fmt.Errorf("replace offline memory: %w", err)
		}
		return nil, err
	}
	var (
		facts      []FactWrite
		items      []ContextWrite
		fevs, keys []string
		listKeys   = map[userKey]bool{}
	)
	open := make(map[string]bool, len(ids))
	for _, id := range ids {
		open[id] = true
	}
	for _, f := range r.Facts {
		if open[f.EventID] && f.UserID == r.UserID {
			facts = append(facts, f)
			fevs, keys = append(fevs, f.EventID), append(keys, f.Key)
			if f.List {
				listKeys[userKey{r.UserID, f.Key}] = true
			}
		}
	}
	for _, it := range r.Context {
		if open[it.EventID] && it.UserID == r.UserID {
			items = append(items, it)
		}
	}
	if err := s.dropTurnItems(ctx, r.UserID, ids, `x.extractor = $3`, r.Offline, facts, items); err != nil {
		return nil, fmt.Errorf("replace offline memory: %w", err)
	}
	// A list key's items the offline extractor stated in these turns go
	// too, under the list's lock; UpsertFacts then rebuilds the key's row
	// from the items left and the new ones. A row left with no item at all
	// is deleted first, or UpsertFacts would adopt its stale value as items.
	if len(listKeys) > 0 {
		_, names := splitKeys(sortedKeys(listKeys))
		if _, err := s.db.Exec(ctx, `DELETE FROM fact_items x USING unnest($2::text[], $3::text[]) AS w(e, k)
			WHERE x.user_id = $1 AND x.event_id = w.e AND x.key = w.k AND x.key = ANY($5) AND x.extractor = $4 AND NOT `+importRecorded(importedItem),
			r.UserID, fevs, keys, r.Offline, names); err != nil {
			return nil, fmt.Errorf("replace offline list items: %w", err)
		}
		if _, err := s.db.Exec(ctx, `DELETE FROM facts f WHERE f.user_id = $1 AND f.key = ANY($2)
			AND NOT EXISTS (SELECT FROM fact_items i WHERE i.user_id = f.user_id AND i.key = f.key)`,
			r.UserID, names); err != nil {
			return nil, fmt.Errorf("replace offline list facts: %w", err)
		}
	}
	if _, err := s.db.Exec(ctx, `DELETE FROM facts x USING unnest($2::text[], $3::text[]) AS w(e, k)
		WHERE x.user_id = $1 AND x.event_id = w.e AND x.key = w.k AND x.extractor = $4 AND NOT `+importRecorded(importedFact),
		r.UserID, fevs, keys, r.Offline); err != nil {
		return nil, fmt.Errorf("replace offline facts: %w", err)
	}
	if _, err := s.UpsertFacts(ctx, facts); err != nil {
		return nil, err
	}
	if _, err := s.InsertContext(ctx, items); err != nil {
		return nil, err
	}
	p := r.Provenance
	if _, err := s.db.Exec(ctx, `UPDATE turns SET extractor = $3, model = $4, prompt_version = $5, processed_at = clock_timestamp()
		WHERE user_id = $1 AND event_id = ANY($2)`, r.UserID, ids, p.Extractor, p.Model, p.PromptVersion); err != nil {
		return nil, fmt.Errorf("replace offline turns: %w", err)
	}
	return ids, nil
}

// DropExtraction deletes the context items earlier extractions saved from
// the user's turns eventIDs (the caller holds the turns' locks), before
// facts and items, their new extraction, are saved in the same
// transaction: a replay without --reset extracts processed turns again,
// and a model wording a turn otherwise left the user both items of it. An
// item the new extraction states again is kept (its id and vector with
// it). The user's own writes (extractor "direct") stay, and so does what
// an import brought (import_sources) or what is left of a turn a clear
// covers. Facts are not deleted: the new extraction's writes of a key
// replace the turn's earlier ones by the facts' rules, and an unchanged
// value records no history. Run it inside InTx.
func (s *Store) DropExtraction(ctx context.Context, userID string, eventIDs []string, facts []FactWrite, items []ContextWrite) error {
	if len(eventIDs) == 0 {
		return nil
	}
	if err := s.dropTurnItems(ctx, userID, eventIDs, `x.extractor <> $3`, "direct", facts, items); err != nil {
		return fmt.Errorf("drop earlier extraction: %w", err)
	}
	return nil
}

// dropTurnItems takes the locks a re-extraction's save of facts and items
// needs, in the order others take them, and deletes the user's context
// items of eventIDs matching extracted (a condition on the item x, with
// extractor as $3) but for those the new extraction states again, those an
// import brought and what is left of a turn a clear covers.
func (s *Store) dropTurnItems(ctx context.Context, userID string, eventIDs []string, extracted, extractor string, facts []FactWrite, items []ContextWrite) error {
	hashes := make([][]byte, 0, len(items))
	for _, it := range items {
		hashes = append(hashes, ContentHash(it.UserID, it.Question, it.Answer))
	}
	// Before the clears' lock and the deletes below, as UpsertFacts takes
	// it (see resetLock).
	if err := s.lockResets(ctx); err != nil {
		return err
	}
	// Exclusive, as a clear and an import take it: the user's writes in
	// flight commit first, and those after wait for this one. The delete
	// of the offline items below bumps the user's embedding generation
	// (021) when they have vectors, and the insert after it may restate
	// or insert a pair another extraction of the user has just written
	// (InsertContext, which bumps the generation at the end of the
	// statement that restated an item): shared, each waited for the
	// other (TestReplaceOfflineBesideExtractionRestatingAPair).
	if err := s.lockClears(ctx, []string{userID}, true); err != nil {
		return err
	}
	// Before the delete locks any item (see lockLanguageShared).
	if err := s.lockLanguageShared(ctx, userID); err != nil {
		return err
	}
	// Every key the new extraction writes is locked here, in the order
	// UpsertFacts takes the same locks: locking only the list keys first
	// could deadlock with a writer taking them in order. Before the
	// items' delete, which bumps the user's embedding generation (021)
	// when they have vectors: an extraction holding a key (UpsertFacts)
	// bumps the generation after it (InsertContext restating an item), and
	// waited for this while this waited for the key
	// (TestReplaceOfflineBesideExtraction).
	touched := make(map[userKey]bool, len(facts))
	for _, f := range facts {
		touched[userKey{f.UserID, f.Key}] = true
	}
	if err := s.lockFactKeys(ctx, sortedKeys(touched)); err != nil {
		return err
	}
	// A turn a clear covers keeps what is left of it: its new extraction
	// is not stored (InsertContext). In id order (see lockItems).
	// What an import brought stays, as a reset keeps it (rebuilt): event
	// ids are unique per user only, and an import's under one of these
	// turns' ids (another memoryd's turn, by the same offline extractor)
	// went with them, though the turn never said it
	// (TestReextractionKeepsWhatAnImportBrought).
	if err := s.lockItems(ctx, "UPDATE", `x.user_id = $1 AND x.event_id = ANY($2) AND `+extracted+` AND NOT x.content_hash = ANY($4) AND NOT `+clearedTurn+` AND NOT `+importRecorded(importedContext),
		userID, eventIDs, extractor, hashes); err != nil {
		return fmt.Errorf("context: %w", err)
	}
	if _, err := s.db.Exec(ctx, `DELETE FROM context x WHERE x.user_id = $1 AND x.event_id = ANY($2) AND `+extracted+` AND NOT x.content_hash = ANY($4) AND NOT `+clearedTurn+` AND NOT `+importRecorded(importedContext),
		userID, eventIDs, extractor, hashes); err != nil {
		return fmt.Errorf("context: %w", err)
	}
	return nil
}
