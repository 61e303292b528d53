package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultTSConfig is the text search configuration of a user whose language
// was never set.
const DefaultTSConfig = "english"

// Language is a user's text search language (migrations/020_languages.sql).
// Every one of the user's context items is indexed under Config, and every
// search of the user's items parses its query under Config, so an item is
// always searched with the configuration it was indexed with.
type Language struct {
	// Language is the language as it was set (an ISO 639-1 code or a name);
	// "" when it was never set.
	Language string
	// Config is the Postgres text search configuration: DefaultTSConfig
	// when the language was never set.
	Config string
	// UpdatedAt is when it was set; zero when it never was.
	UpdatedAt time.Time
}

// UserLanguage returns the user's language: Config DefaultTSConfig and
// Language "" when it was never set.
func (s *Store) UserLanguage(ctx context.Context, userID string) (Language, error) {
	l := Language{Config: DefaultTSConfig}
	err := s.db.QueryRow(ctx, `SELECT language, ts_config, updated_at FROM user_languages WHERE user_id = $1`, userID).
		Scan(&l.Language, &l.Config, &l.UpdatedAt)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Language{}, fmt.Errorf("user language: %w", err)
	}
	return l, nil
}

// languageLock is the advisory lock key of user $1's language, the one the
// context insert trigger (migration 020) takes shared.
const languageLock = `hashtextextended('memoryd.language.' || current_schema() || '.' || $1::text, 0)`

// lockLanguageShared takes user's language lock shared, as the context
// insert trigger takes it, for a write that deletes (and so locks) items
// before it inserts: taken first, so that a language change (exclusive,
// then every item re-indexed) cannot wait for a deleted item while the
// write's first insert waits for the lock, a deadlock failing one of them.
func (s *Store) lockLanguageShared(ctx context.Context, userID string) error {
	if _, err := s.db.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(`+languageLock+`)`, userID); err != nil {
		return fmt.Errorf("lock user language: %w", err)
	}
	return nil
}

// SetLanguage sets the user's language and its text search configuration
// (config must be one of Postgres' configurations; the caller maps language
// names to them) and re-indexes the user's context items under config, in
// one transaction (s's, when it runs in one). It returns how many items were re-indexed: none when the
// configuration is unchanged, so setting the same language again is cheap.
//
// It takes the user's language lock exclusively (the context insert trigger
// takes it shared): items being inserted for the user commit first and are
// re-indexed too, and items inserted after it are indexed under config.
func (s *Store) SetLanguage(ctx context.Context, userID, language, config string) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(q *Store) error {
		// First, as every writer of the items a reset deletes (see
		// resetLock): a reset of every user deletes them in the table's
		// order, the re-index locks them in id order, and interleaved the
		// two deadlocked, failing one of them
		// (TestLanguageChangeBesideAResetOfEveryUserDeadlocksNot).
		if err := q.lockResets(ctx); err != nil {
			return err
		}
		if _, err := q.db.Exec(ctx, `SELECT pg_advisory_xact_lock(`+languageLock+`)`, userID); err != nil {
			return fmt.Errorf("lock user language: %w", err)
		}
		// The cast refuses a configuration Postgres does not have.
		if _, err := q.db.Exec(ctx, `
			INSERT INTO user_languages (user_id, language, ts_config) VALUES ($1, $2, $3::regconfig::text)
			ON CONFLICT (user_id) DO UPDATE SET language = excluded.language, ts_config = excluded.ts_config, updated_at = now()`,
			userID, language, config); err != nil {
			return fmt.Errorf("save language: %w", err)
		}
		// Rewrites the search vector and lengths of the user's items that
		// are under another configuration (the generated columns follow),
		// locked in id order first, as every writer of several of a
		// user's items locks them (see lockItems).
		if err := q.lockItems(ctx, "NO KEY UPDATE", `x.user_id = $1 AND x.ts_config <> $2::regconfig::text`, userID, config); err != nil {
			return fmt.Errorf("re-index context: %w", err)
		}
		tag, err := q.db.Exec(ctx, `UPDATE context SET ts_config = $2::regconfig::text WHERE user_id = $1 AND ts_config <> $2::regconfig::text`, userID, config)
		if err != nil {
			return fmt.Errorf("re-index context: %w", err)
		}
		n = tag.RowsAffected()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("set language: %w", err)
	}
	return n, nil
}
