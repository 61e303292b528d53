package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Removed counts rows deleted from each table.
type Removed struct {
	Facts, FactHistory, Context, Turns, Jobs int64
	// Documents counts the documents of the user's own collections
	// (DeleteCollections, which a forget runs after ForgetUser).
	Documents int64
}

// ForgetUser deletes everything memoryd keeps about a user in Postgres:
// facts and list items, fact history, context (with its vectors), the
// clears, turns, the user's language, the River jobs of each of
// riverJobs's shapes that name the user or the user's turns (see
// deleteUserJobs) and token usage, and
// leaves a tombstone for the user's token, all in one transaction. The
// tombstone covers the turn stream up to through (where the stream stood
// when the forget began: its last sequence and creation time), every turn
// of the user recorded so far, and every turn of a stream created before
// through's (see Tombstone.Covers); it only grows. It returns it, so the
// caller purges the stream up to its sequence.
//
// It first takes the user's lock exclusively (see LockUsers): writes for the
// user in flight (ingest, extraction, replay, token usage) commit before it,
// and it deletes what they wrote; those after it see the tombstone. A forget
// that failed half-way can simply be run again.
//
// The user's changes not yet published are deleted with the rest, and the
// forget is one memory.forgotten change, numbered after the user's earlier
// changes (see changes.go). It refuses a schema a newer memoryd migrated
// (Config.SchemaVersion), deleting nothing.
func (s *Store) ForgetUser(ctx context.Context, userID, token string, through StreamPosition, riverJobs ...RiverJobs) (Removed, Tombstone, error) {
	return s.forgetUser(ctx, userID, token, through, time.Time{}, riverJobs)
}

// ErrForgetKnown is ReapplyForget finding that the database knows the
// forget already: the user's tombstone is from then or later (another
// process applied it again first). Nothing was deleted.
var ErrForgetKnown = errors.New("forget: the database knows this forget already")

// ErrWrittenSince is ReapplyForget finding memory of the user written
// after the recorded forget, which a forget now would delete with the
// rest. Nothing was deleted.
var ErrWrittenSince = errors.New("forget: the user has memory written after the recorded forget")

// ReapplyForget is ForgetUser for a forget recorded at recordedAt that
// this database does not know (restored from a backup taken before it),
// covering through, the stream position it covered. Under the user's lock
// it first checks, and deletes nothing when, the user's tombstone is from
// recordedAt or later (ErrForgetKnown) or anything of the user was written
// since recordedAt (ErrWrittenSince, see userWrittenSince).
func (s *Store) ReapplyForget(ctx context.Context, userID, token string, through StreamPosition, recordedAt time.Time, riverJobs ...RiverJobs) (Removed, Tombstone, error) {
	return s.forgetUser(ctx, userID, token, through, recordedAt, riverJobs)
}

func (s *Store) forgetUser(ctx context.Context, userID, token string, through StreamPosition, recordedAt time.Time, riverJobs []RiverJobs) (Removed, Tombstone, error) {
	var (
		r    Removed
		tomb = Tombstone{UserToken: token}
	)
	err := s.InTx(ctx, func(_ pgx.Tx, q *Store) error {
		if _, err := q.db.Exec(ctx, `SELECT pg_advisory_xact_lock(`+fmt.Sprintf(userLock, "$1::text")+`)`, token); err != nil {
			return fmt.Errorf("forget: lock user: %w", err)
		}
		// Next, before any row lock: a reset of every user copies the
		// user's direct clears into fact_clears, and the delete of them
		// below, had it waited for the reset's own delete, would not see
		// the copies (see resetLock).
		if err := q.lockResets(ctx); err != nil {
			return fmt.Errorf("forget: %w", err)
		}
		if err := q.CheckSchema(ctx); err != nil {
			return fmt.Errorf("forget: %w", err)
		}
		if !recordedAt.IsZero() {
			known, err := q.tombstones(ctx, []string{token})
			if err != nil {
				return err
			}
			if t, ok := known[token]; ok && !t.ForgottenAt.Before(recordedAt) {
				return ErrForgetKnown
			}
			since, err := q.userWrittenSince(ctx, userID, recordedAt)
			if err != nil {
				return err
			}
			if since {
				return ErrWrittenSince
			}
		}
		next, err := q.tombstoneThrough(ctx, userID, token, through)
		if err != nil {
			return err
		}
		// stream_seq is what earlier releases compare every turn with.
		if err := q.db.QueryRow(ctx, `
			INSERT INTO tombstones AS t (user_token, stream_seq, stream_stored_seq, stream_stored_at, stream_stored_for, forgotten_at)
			VALUES ($1, $2, $3, $4, now(), now())
			ON CONFLICT (user_token) DO UPDATE
			SET stream_seq = excluded.stream_seq, stream_stored_seq = excluded.stream_stored_seq, stream_stored_at = excluded.stream_stored_at,
				stream_stored_for = now(), forgotten_at = now()
			RETURNING forgotten_at`,
			token, int64(next.SeqAlone), int64(next.Through.Seq), next.Through.storedOrNil()).Scan(&next.ForgottenAt); err != nil {
			return fmt.Errorf("forget: tombstone: %w", err)
		}
		tomb = next
		// The user's language before the items (deleteMemory locks them
		// all): a language change holds its row while it re-indexes the
		// items, so deleted after them it waited for an item locked here
		// while this waited for the row, a deadlock failing one of them
		// (the user's lock keeps memoryd's language requests apart from a
		// forget; SetLanguage on its own is not).
		if _, err := q.db.Exec(ctx, `DELETE FROM user_languages WHERE user_id = $1`, userID); err != nil {
			return fmt.Errorf("forget language: %w", err)
		}
		// Jobs before turns, which name them (see deleteUserJobs), all
		// locked first in id order (see lockUserJobs).
		if err := q.lockUserJobs(ctx, riverJobs, userID); err != nil {
			return err
		}
		var jobs int64
		for _, rj := range riverJobs {
			n, err := q.deleteUserJobs(ctx, rj, userID)
			if err != nil {
				return err
			}
			jobs += n
		}
		// Turns next: deleting them waits for any extraction holding their
		// locks to commit, so the memory it wrote is visible to the deletes
		// below; a later extraction finds no turns and writes nothing.
		// First locked in (turn_at, event_id) order, as a claim, a save and a
		// replay lock them, are the turns a writer that does not take the
		// user's lock may hold while it waits for another of them: a
		// burst's claim (pending turns), a failure (MarkFailed, turns not
		// processed), a retry (ResetFailed, failed ones) and the end of a
		// job's claims (ReleaseClaims, a takeover's endClaims: turns it
		// claimed, of any status). Deleted as the delete met them, each of
		// the two held a turn the other waited for
		// (TestClaimBesideForgetOfDisorderedTurns,
		// TestReleaseBesideForgetOfDisorderedProcessedClaimedTurns). A
		// processed turn no claim names is none of theirs (its claim ended
		// with it: MarkProcessed); the writers that lock it (a save, a
		// re-extraction, a replay, which alone turns it back to pending)
		// take the user's lock, held here, and the text prune skips the
		// turns locked and waits for nothing after: the delete meets it
		// without a cycle. Locking those too, most of a user's turns,
		// wrote each row twice and joined the lock's rows with the
		// delete's: a forget of 30,000 turns spent about 3 times as long on
		// its turns (BenchmarkForgetUser).
		if _, err := q.db.Exec(ctx, `SELECT FROM turns WHERE user_id = $1 AND (status <> 'processed' OR claimed_by IS NOT NULL)
			ORDER BY turn_at, event_id FOR UPDATE`, userID); err != nil {
			return fmt.Errorf("forget turns: lock: %w", err)
		}
		tag, err := q.db.Exec(ctx, `DELETE FROM turns WHERE user_id = $1`, userID)
		if err != nil {
			return fmt.Errorf("forget turns: %w", err)
		}
		turns := tag.RowsAffected()
		if r, err = q.deleteMemory(ctx, []string{userID}, true); err != nil {
			return err
		}
		// Jobs again: a transaction that held the user's turns or items
		// while inserting a job for them (retry-failed, a takeover's
		// replacement, reconcile, the embed sweep) committed while the
		// deletes above waited for it, after the first pass had looked.
		// Locked in id order first, as the first pass and a takeover lock
		// them: deleted as the delete met them, two such jobs a dead
		// process ran, lying in the table out of id order, were each held
		// by one of the two while the other waited for it
		// (TestTakeOverBesideForgetOfJobsInsertedDuringIt).
		if err := q.lockUserJobs(ctx, riverJobs, userID); err != nil {
			return err
		}
		for _, rj := range riverJobs {
			n, err := q.deleteUserJobs(ctx, rj, userID)
			if err != nil {
				return err
			}
			jobs += n
		}
		r.Turns, r.Jobs = turns, jobs
		if _, err := q.db.Exec(ctx, `DELETE FROM llm_usage WHERE user_id = $1`, userID); err != nil {
			return fmt.Errorf("forget usage: %w", err)
		}
		// Copies of exports in progress. One saved from a snapshot before
		// this forget but after this delete is refused by its memory id
		// (ReadSpool).
		// In id order, as the delete of expired copies takes them (see
		// deleteSpoolsWhere).
		if _, err := q.deleteSpoolsWhere(ctx, `s.user_id = $1`, userID); err != nil {
			return fmt.Errorf("forget export copies: %w", err)
		}
		// The user's default collections here, not with the documents
		// (DeleteCollections): a forget cut short has its documents
		// finished as of its time (DeleteDocumentsBefore), and a default
		// has no time to tell it was chosen before the forget; a shared
		// scope granted again after would bring it back.
		if err := q.deleteDefaultsOf(ctx, userID); err != nil {
			return fmt.Errorf("forget default collections: %w", err)
		}
		// After the vectors (deleteMemory): the generation row is the last
		// trace of them. A new vector starts a row at a fresh generation.
		if _, err := q.db.Exec(ctx, `DELETE FROM embedding_generations WHERE user_id = $1`, userID); err != nil {
			return fmt.Errorf("forget embedding generation: %w", err)
		}
		if err := q.forgetDailyUsage(ctx, userID); err != nil {
			return err
		}
		if err := q.forgetResetMarks(ctx, userID); err != nil {
			return err
		}

		// The user's changes not yet published go (they would tell what was
		// forgotten); the counter stays, so the forget's own change, the one
		// left to publish, numbers after every change already published: seq
		// never goes back, and a subscriber that missed the forget sees a
		// gap rather than taking later changes for duplicates. Last, and the
		// counter's row locked from here to the commit, since that lock is
		// what every writer of the user numbers its changes under.
		// In id order, as the publisher and the drop of old changes
		// delete theirs (see deleteChangesWhere).
		if _, err := q.deleteChangesWhere(ctx, `c.user_id = $1`, userID); err != nil {
			return fmt.Errorf("forget changes: %w", err)
		}
		if _, err := q.db.Exec(ctx, `SELECT 1 FROM memory_change_seqs WHERE user_key = `+userKeySQL("$1::text")+` FOR UPDATE`, userID); err != nil {
			return fmt.Errorf("forget changes: %w", err)
		}
		return q.recordChange(ctx, changeMemoryForgotten, 0, userID)
	})
	if err != nil {
		return Removed{}, Tombstone{}, err
	}
	return r, tomb, nil
}

// ResetMemory deletes the derived memory (facts and list items, value deletes, fact history, context) of
// the given users, or of every user when userIDs is empty, in one
// transaction, before a replay rebuilds it. Turns are kept, and so is what
// a replay could not bring back: items written directly through the memory
// tools (extractor "direct"), which never passed through the stream, and
// items whose source turn memoryd never recorded (imported from an export,
// of this memoryd before a forget or of another one). Each
// user who lost something gets one memory.reset change (see changes.go).
// It refuses a schema a newer memoryd migrated (Config.SchemaVersion).
//
// In the same transaction it leaves a ResetMark, which stays until the
// replay that rebuilds the memory has read everything back (FinishResets):
// one left behind says the replay stopped half-way (UnfinishedResets). Its
// ID is 0 when no user named has recorded turns (nothing was taken).
//
// A reset of named users takes their clear locks (resetClears), which an
// import and the user's clears take too, after resetLock shared; a reset
// of every user takes resetLock exclusively instead, so those wait for
// it, or it for them.
func (s *Store) ResetMemory(ctx context.Context, userIDs []string) (Removed, ResetMark, error) {
	var (
		r    Removed
		mark ResetMark
	)
	err := s.InTx(ctx, func(_ pgx.Tx, q *Store) error {
		if len(userIDs) == 0 {
			if _, err := q.db.Exec(ctx, `SELECT pg_advisory_xact_lock(`+resetLock+`)`); err != nil {
				return fmt.Errorf("reset: lock: %w", err)
			}
		} else if err := q.lockResets(ctx); err != nil {
			// A reset of every user copies the users' direct clears
			// too: the copy that came second failed on the other's.
			return fmt.Errorf("reset: %w", err)
		}
		if err := q.CheckSchema(ctx); err != nil {
			return fmt.Errorf("reset: %w", err)
		}
		var err error
		if r, err = q.deleteMemory(ctx, userIDs, false); err != nil {
			return err
		}
		if err := q.markReset(ctx, userIDs, &mark); err != nil {
			return err
		}
		// The clock, last, under the reset's locks: a save that waited for
		// them, or took them later, marks its turns processed after this
		// (MarkProcessed's clock_timestamp), whenever its transaction
		// began, and the reset deleted none of its items; one that held
		// them first committed before, its items deleted. Read after the
		// commit instead, or as the transaction's start of the save, a
		// save that waited left its turn extracted again by the replay:
		// two items for the one turn (TestRequeueLeavesATurnSavedBehindTheReset).
		if err := q.db.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&mark.Committed); err != nil {
			return fmt.Errorf("reset: read the clock: %w", err)
		}
		return nil
	})
	if err != nil {
		return Removed{}, ResetMark{}, err
	}
	return r, mark, nil
}

// resetLock is the advisory lock key of a reset of every user, per
// schema: the reset takes it exclusively, before any other lock, and each
// writer that records what a reset keeps or carries over takes it shared
// (lockResets): a reset of named users and a forget (which copy and
// delete the direct clears the reset copies), an import (its
// import_sources), a context clear or update (the clear of the pair's
// turn, by which a reset keeps the turn's other items: DeleteContext,
// UpdateContext) and a clear of direct writes (fact_direct_clears, which
// a reset copies into fact_clears: DeleteFact, SetFactValues), and every
// other write of the tables it deletes from (UpsertFacts, InsertContext,
// SetFact, ReplaceOffline, SetLanguage: an extraction's save writes fact_value_clears
// before fact_clears and facts before fact_items, the reverse of the
// reset's order, and interleaved with it the two deadlocked,
// TestExtractionBesideAResetOfEveryUserDeadlocksNot; SaveEmbeddings,
// whose item locks go in id order, the reset's delete in the table's,
// TestEmbeddingSaveWaitsForAResetOfEveryUser). A reset of
// every user takes no per-user lock (there could be more users than
// Postgres's lock table holds), and without this one it interleaved with them: its delete, whose snapshot predated the
// writer's commit, waited for a row the writer held and re-checked the
// rows against that snapshot, where what the writer recorded was not yet
// (it deleted what an import had reported written, or a cleared turn's
// other items, which no replay brings back); and a direct clear
// committing between its delete of fact_clears and its copy of the direct
// clears failed the reset on the clear's own row (a duplicate key).
//
// The writers take it shared first in their transaction, before the clear
// locks and any row lock of the tables a reset writes; only the user locks
// (LockUsers, which a reset of every user does not take) and rows it never
// waits for (an extraction's turns and usage, locked before its
// UpsertFacts) may be held before it, and when they are, they come first (the enricher's direct writes in forgetSafe, a forget, an
// import): a user lock taken after it would close a cycle through a forget,
// behind which a reset of every user waits. The reset holds it and then
// waits only for row locks, so no cycle closes through it; such a writer
// waits for a long reset, as it would for a reset of its user.
const resetLock = `hashtextextended('memoryd.reset.' || current_schema(), 0)`

// lockResetsSQL takes resetLock shared.
const lockResetsSQL = `SELECT pg_advisory_xact_lock_shared(` + resetLock + `)`

// lockResets takes resetLock shared until the transaction ends: a reset
// of every user in flight commits first, or waits for this transaction.
// Call it first in the transaction, or right after the user locks (see
// resetLock).
func (s *Store) lockResets(ctx context.Context) error {
	if _, err := s.db.Exec(ctx, lockResetsSQL); err != nil {
		return fmt.Errorf("lock resets: %w", err)
	}
	return nil
}

// Unreplayable is memory a reset would delete that no replay can rebuild:
// items extracted from recorded turns whose events the turn stream no
// longer holds (its retention limits dropped them, or an operator deleted
// them).
type Unreplayable struct {
	// Items counts facts, list items and context items; Turns the turns
	// they came from, Users their users.
	Items, Turns, Users int64
	// FirstSeq and LastSeq bound those turns' stream sequences.
	FirstSeq, LastSeq uint64
}

// rebuilt is the condition, on a row x of facts, fact_items or context
// that an import records as imported (an importedFact, importedItem or
// importedContext condition on the import_sources row i), that a replay
// rebuilds it: extracted (not a direct write) from a turn memoryd
// recorded, and not what an import brought (event ids are unique per user
// only, and an export's may name one of this user's turns that said
// something else).
func rebuilt(imported string) string {
	return `(x.extractor <> 'direct' AND EXISTS (SELECT 1 FROM turns t WHERE t.user_id = x.user_id AND t.event_id = x.event_id)
		AND NOT ` + importRecorded(imported) + `)`
}

// importRecorded is the condition, on a row x, that an import_sources row
// records it by imported (importedFact, importedItem, importedContext).
func importRecorded(imported string) string {
	return `EXISTS (SELECT 1 FROM import_sources i WHERE i.user_id = x.user_id AND ` + imported + `)`
}

// listFactKept is the condition, on a facts row x, that its key has list
// items: a reset then leaves the row to materialise, which rebuilds it
// from the items the reset keeps. The row is derived from them, and its
// value, a union, matches no imported line's fingerprint.
const listFactKept = `EXISTS (SELECT 1 FROM fact_items li WHERE li.user_id = x.user_id AND li.key = x.key)`

// The conditions that an import_sources row i records a row x of each
// table as imported, by the content fingerprints recordImportSources
// writes. A fact or list item is the import's while it holds the imported
// line's event id: a later write of the key (a turn's, the latest source
// winning) takes the row over, and a replay rebuilds it. A context item is
// the import's whatever its event id: a pair the user held already (from
// a turn of theirs here) keeps its own turn's id when an import's line of
// it (another memoryd's turn) merges into it, and a reset that matched the
// import's record by the item's event id deleted what the import brought,
// which a replay by another model words otherwise
// (TestResetKeepsAPairImportedOverAHeldOne). Without the event id no
// index of import_sources serves the match, and it needs none: the reset
// (and UnseenMemory) anti-join it by a hash over the table, as they did
// with the event id (a reset of 1 user of 50 holding 4,000 imported items
// each: a hash anti join reading all 200,000 records, 0.3-0.7 s on a busy
// 2-core machine both ways; an index on (user_id, content) left the plan
// as it was).
const (
	importedFact    = `i.event_id = x.event_id AND i.content = 'f:' || x.key || ':' || md5(x.value)`
	importedItem    = `i.event_id = x.event_id AND i.content = 'i:' || x.key || ':' || x.item`
	importedContext = `i.content = 'c:' || encode(x.content_hash, 'hex')`
)

func (s *Store) deleteMemory(ctx context.Context, userIDs []string, withDirect bool) (Removed, error) {
	var r Removed
	all := len(userIDs) == 0
	if withDirect {
		// The history the user had, counted before the facts' delete
		// trigger records their deletion in it (deleted below too).
		if err := s.db.QueryRow(ctx, `SELECT count(*) FROM fact_history WHERE $1 OR user_id = ANY($2)`, all, userIDs).Scan(&r.FactHistory); err != nil {
			return r, fmt.Errorf("count fact_history: %w", err)
		}
		// First, under the users' clear locks (see lockClears for the order).
		if err := s.deleteClears(ctx, all, userIDs); err != nil {
			return r, err
		}
		// A forget deletes what imports recorded too; a reset keeps it,
		// with the imported rows it keeps.
		if _, err := s.db.Exec(ctx, `DELETE FROM import_sources WHERE $1 OR user_id = ANY($2)`, all, userIDs); err != nil {
			return r, fmt.Errorf("delete import_sources: %w", err)
		}
	} else if err := s.resetClears(ctx, all, userIDs); err != nil {
		return r, err
	}
	// Value deletes (fact_value_clears) come from turns alone (facts.clear
	// makes none): a forget deletes them with the rest, a reset too, and
	// the replay records them again.
	if _, err := s.db.Exec(ctx, `DELETE FROM fact_value_clears WHERE $1 OR user_id = ANY($2)`, all, userIDs); err != nil {
		return r, fmt.Errorf("delete fact_value_clears: %w", err)
	}
	// But for those imports brought (fact_import_clears, as resetClears's).
	if !withDirect {
		if _, err := s.db.Exec(ctx, `INSERT INTO fact_value_clears (user_id, key, item, cleared_at)
			SELECT user_id, key, item, cleared_at FROM fact_import_clears WHERE ($1 OR user_id = ANY($2)) AND item <> ''`, all, userIDs); err != nil {
			return r, fmt.Errorf("reset fact_value_clears: %w", err)
		}
	}
	// A list key's items go like its facts row; a reset keeps the direct
	// ones and materialises their keys again afterwards, since the row may
	// have carried an extracted item's provenance and so went.
	var listKeys []userKey
	if !withDirect {
		// With the keys of the list items imports brought, which the
		// reset writes back (reinstateImportedItems).
		rows, err := s.db.Query(ctx, `SELECT user_id, key FROM fact_items x
			WHERE ($1 OR user_id = ANY($2)) AND `+rebuilt(importedItem)+`
			UNION SELECT user_id, fact->>'key' FROM import_sources
			WHERE ($1 OR user_id = ANY($2)) AND fact IS NOT NULL AND starts_with(content, 'i:')`, all, userIDs)
		if err != nil {
			return r, fmt.Errorf("delete fact_items: %w", err)
		}
		if listKeys, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (k userKey, err error) {
			return k, row.Scan(&k.user, &k.key)
		}); err != nil {
			return r, fmt.Errorf("delete fact_items: %w", err)
		}
		// Like deleteClears, a reset of every user takes no per-user lock
		// (there could be more keys than Postgres's lock table holds): the
		// replay that follows it rewrites the keys.
		slices.SortFunc(listKeys, compareUserKeys) // the order applyFacts locks in
		if !all {
			if err := s.lockFactKeys(ctx, listKeys); err != nil {
				return r, err
			}
		}
	}
	// One change per user for the lot (the caller's summary), not one per
	// row: a reset of every user deletes every row.
	var (
		items   int64
		changed = map[string]bool{}
	)
	err := s.quietly(ctx, func() error {
		if withDirect {
			// A forget deletes every item of its users: their terms go
			// first, in one range of context_terms's key, and the
			// delete trigger (025) then finds them gone instead of
			// deleting each item's lexemes one probe at a time (a
			// 20,000-item user: the items' delete 1.27 s, 0.79 s with
			// this one, 2 cores, quiet). The items are locked first, as
			// every other writer of context_terms locks the item before
			// its terms: a prune holding one of them (its delete trigger
			// then deletes the item's terms) otherwise waited for the
			// terms deleted here while this waited for the item, a
			// deadlock. A prune passes over the items locked here. In id
			// order, as an embedding save locks them (see lockItems).
			if err := s.lockItems(ctx, "UPDATE", `$1 OR x.user_id = ANY($2)`, all, userIDs); err != nil {
				return err
			}
			if _, err := s.db.Exec(ctx, `DELETE FROM context_terms WHERE $1 OR user_id = ANY($2)`, all, userIDs); err != nil {
				return fmt.Errorf("delete context_terms: %w", err)
			}
		}
		for _, t := range []struct {
			table, imported string
			keep            string // what a reset keeps beyond rebuilt
			n               *int64
		}{{"fact_items", importedItem, "", &items}, {"facts", importedFact, " AND NOT " + listFactKept, &r.Facts}, {"context", importedContext, " AND NOT " + clearedTurn, &r.Context}} {
			// A reset of named users locks the items it deletes in id
			// order first, as an embedding save does (see lockItems); a
			// reset of every user needs not (the save waits for it, at
			// resetLock), and a forget locked them all above.
			if t.table == "context" && !withDirect && !all {
				if err := s.lockItems(ctx, "UPDATE", `x.user_id = ANY($1) AND `+rebuilt(t.imported)+t.keep, userIDs); err != nil {
					return err
				}
			}
			var users []string
			if err := s.db.QueryRow(ctx, `WITH gone AS (
				DELETE FROM `+t.table+` x WHERE ($1 OR user_id = ANY($2)) AND ($3 OR `+rebuilt(t.imported)+t.keep+`) RETURNING user_id
			) SELECT count(*), coalesce(array_agg(DISTINCT user_id), '{}') FROM gone`, all, userIDs, withDirect).Scan(t.n, &users); err != nil {
				return fmt.Errorf("delete %s: %w", t.table, err)
			}
			for _, u := range users {
				changed[u] = true
			}
		}
		if !withDirect {
			if err := s.reinstateImportedItems(ctx, all, userIDs, listKeys); err != nil {
				return err
			}
			users, err := s.reinstateImportedFacts(ctx, all, userIDs)
			if err != nil {
				return err
			}
			for _, u := range users {
				changed[u] = true
			}
		}
		_, err := s.materialise(ctx, listKeys, nil)
		return err
	})
	if err != nil {
		return r, err
	}
	if !withDirect && len(changed) > 0 {
		users := slices.Sorted(maps.Keys(changed))
		if err := s.recordChange(ctx, changeMemoryReset, 0, users...); err != nil {
			return r, err
		}
	}
	// History goes with forget only: after a reset the rebuilt facts add to
	// it, keeping what the replay changed visible.
	if withDirect {
		if _, err := s.db.Exec(ctx, `DELETE FROM fact_history WHERE $1 OR user_id = ANY($2)`, all, userIDs); err != nil {
			return r, fmt.Errorf("delete fact_history: %w", err)
		}
	}
	return r, nil
}

// reinstateImportedItems writes back, after a reset's delete, the list
// items imports brought (import_sources.fact of the 'i:' records) by the
// items' rule (writeItems: each item keeps its latest operation, and a
// clear the reset keeps covers those stated no later). An imported item
// the user's own later turn removed or replaced was written nowhere else:
// the reset deleted the turn's operation, and a replay by a model that no
// longer extracts it left the key without what the import still said
// (TestResetWritesBackAListAnImportBrought). keys are the users' list
// keys the reset locked, these items' among them; deleteMemory
// materialises them afterwards. Items imported before this release have
// no line recorded and are not written back.
func (s *Store) reinstateImportedItems(ctx context.Context, all bool, userIDs []string, keys []userKey) error {
	rows, err := s.db.Query(ctx, `SELECT i.user_id, i.event_id, i.fact FROM import_sources i
		WHERE ($1 OR i.user_id = ANY($2)) AND i.fact IS NOT NULL AND starts_with(i.content, 'i:')`, all, userIDs)
	if err != nil {
		return fmt.Errorf("reinstate imported items: %w", err)
	}
	var (
		writes      []FactWrite
		user, event string
		line        importedFactLine
	)
	if _, err := pgx.ForEachRow(rows, []any{&user, &event, &line}, func() error {
		op := FactAdd
		if line.Present != nil && !*line.Present {
			op = FactRemove
		}
		writes = append(writes, FactWrite{UserID: user, Key: line.Key, Value: line.Value, SourceAt: line.SourceAt, EventID: event,
			ConversationID: line.ConversationID, Op: op, List: true,
			Provenance: Provenance{Extractor: line.Extractor, Model: line.Model, PromptVersion: line.PromptVersion}})
		line = importedFactLine{}
		return nil
	}); err != nil {
		return fmt.Errorf("reinstate imported items: %w", err)
	}
	if len(writes) == 0 {
		return nil
	}
	if _, err := s.writeItems(ctx, keys, writes); err != nil {
		return fmt.Errorf("reinstate imported items: %w", err)
	}
	return nil
}

// reinstateImportedFacts writes back, after a reset's delete, the fact
// lines imports brought (import_sources.fact, migration 067) by the
// facts' rule (factLaterWins, as upsertSingles), returning the users it
// wrote for. A line that lost to the user's own later statement was written nowhere else:
// the reset deleted that statement's fact, and a replay by a model that
// no longer extracts it left the key empty, though the import still said
// it (TestResetKeepsAFactImportedBehindTheUsersNewerOne). The replay's
// later statements win over it again. A key cleared no earlier than the
// line (the direct clears the reset keeps) stays cleared, and a list
// key's row is left to materialise, from the items the reset keeps and
// writes back (reinstateImportedItems).
func (s *Store) reinstateImportedFacts(ctx context.Context, all bool, userIDs []string) ([]string, error) {
	var users []string
	if err := s.db.QueryRow(ctx, `WITH lines AS (
			SELECT DISTINCT ON (i.user_id, i.fact->>'key') i.user_id AS u, i.fact->>'key' AS k, i.fact->>'value' AS v,
				(i.fact->>'source_at')::timestamptz AS a, i.event_id AS e, i.fact->>'conversation_id' AS cv,
				i.fact->>'extractor' AS x, i.fact->>'model' AS m, i.fact->>'prompt_version' AS p,
				(i.fact->>'updated_at')::timestamptz AS up
			FROM import_sources i
			WHERE ($1 OR i.user_id = ANY($2)) AND i.fact IS NOT NULL AND starts_with(i.content, 'f:')
			ORDER BY i.user_id, i.fact->>'key', (i.fact->>'source_at')::timestamptz DESC, i.fact->>'extractor' = 'direct' DESC,
				i.event_id COLLATE "C" DESC, i.fact->>'value' COLLATE "C" DESC
		), written AS (
			INSERT INTO facts AS f (user_id, key, value, source_at, event_id, conversation_id, extractor, model, prompt_version, updated_at)
			SELECT u, k, v, a, e, cv, x, m, p, up FROM lines w
			WHERE NOT EXISTS (SELECT FROM fact_clears c WHERE c.user_id = w.u AND c.key = w.k AND c.cleared_at >= w.a)
			  AND NOT EXISTS (SELECT FROM fact_items li WHERE li.user_id = w.u AND li.key = w.k)
			  -- Nor a list key's line an import recorded before its
			  -- items were (the items joined, written back as items):
			  -- by the item's recorded key; a record of before this
			  -- release has none, and its content's prefix tells it
			  -- (ambiguous only there: a key may hold ':', and "pet:"
			  -- starts "pet:names"'s items too,
			  -- TestResetWritesBackAFactBesideAListNamedAfterIt).
			  AND NOT EXISTS (SELECT FROM import_sources li WHERE li.user_id = w.u AND starts_with(li.content, 'i:')
			    AND (li.fact->>'key' = w.k OR (li.fact IS NULL AND starts_with(li.content, 'i:' || w.k || ':'))))
			`+factLaterWins+`
			RETURNING user_id
		) SELECT coalesce(array_agg(DISTINCT user_id), '{}') FROM written`, all, userIDs).Scan(&users); err != nil {
		return nil, fmt.Errorf("reinstate imported facts: %w", err)
	}
	return users, nil
}

// resetClears drops the clears turns made (extracted deletes, list sets):
// the replay after a reset makes them again, and must not be held to what
// an earlier extraction, maybe by another model, said. The clears of
// direct writes (fact_direct_clears) stay. Taken under the users' clear
// locks, exclusively, like a clear; a reset of every user takes none (see
// deleteClears).
func (s *Store) resetClears(ctx context.Context, all bool, userIDs []string) error {
	if !all {
		if err := s.lockClears(ctx, userIDs, true); err != nil {
			return err
		}
	}
	if _, err := s.db.Exec(ctx, `DELETE FROM fact_clears WHERE $1 OR user_id = ANY($2)`, all, userIDs); err != nil {
		return fmt.Errorf("reset fact_clears: %w", err)
	}
	// With their stream positions: a replay does not bring back a turn
	// that a direct clear covers by its place in the stream either.
	if _, err := s.db.Exec(ctx, `INSERT INTO fact_clears (user_id, key, cleared_at, stream_seq, stream_created, stream_stored_at)
		SELECT user_id, key, cleared_at, stream_seq, stream_created, stream_stored_at FROM fact_direct_clears WHERE $1 OR user_id = ANY($2)`, all, userIDs); err != nil {
		return fmt.Errorf("reset fact_clears: %w", err)
	}
	// And the clears imports brought (fact_import_clears, migration 069),
	// which no replay makes again: without them the replay's extraction
	// of a turn an import cleared brought its fact back
	// (TestResetKeepsAClearAnImportBrought). The later of a direct and an
	// imported clear of a key is kept, as an import keeps it (the direct
	// clear's stream position too: it covers what it covered).
	if _, err := s.db.Exec(ctx, `INSERT INTO fact_clears AS c (user_id, key, cleared_at)
		SELECT user_id, key, cleared_at FROM fact_import_clears WHERE ($1 OR user_id = ANY($2)) AND item = ''
		ON CONFLICT (user_id, key) DO UPDATE SET cleared_at = excluded.cleared_at
		WHERE c.cleared_at < excluded.cleared_at`, all, userIDs); err != nil {
		return fmt.Errorf("reset fact_clears: %w", err)
	}
	return nil
}
