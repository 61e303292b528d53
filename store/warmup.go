package store

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// warmStatements runs the statements enrich uses (Recall: the plain, the
// scoped and the ranged shape, lexical and hybrid; ContextTexts) once on a new connection, for a user id no
// user can have, before the pool hands the connection out. pgx prepares
// and caches each statement on the connection, and the server backend
// loads its catalog caches for the tables and indexes they read; without
// this the first enrich on every new connection pays for both (several
// milliseconds, more on a busy machine) inside its reply budget.
//
// A failure is logged and ignored: the connection is usable (a statement
// that failed to prepare is prepared again on its first real use), and a
// schema not migrated yet must not stop the pool from connecting.
func warmStatements(ctx context.Context, conn *pgx.Conn, logger *slog.Logger) {
	ws := &Store{db: conn, hooks: &hookBox{}}
	since := time.Unix(0, 0).UTC()
	for _, q := range []SearchQuery{
		{UserID: warmUserID, Keywords: []string{"memoryd"}},
		{UserID: warmUserID, Keywords: []string{"memoryd"}, Scope: "warm"},
		{UserID: warmUserID, Keywords: []string{"memoryd"}, Since: since},
		// The hybrid shapes (with embeddings on, every ranked enrich is
		// one); two more statements a connection, a few milliseconds at
		// its start, also when embeddings are off.
		{UserID: warmUserID, Keywords: []string{"memoryd"}, Hybrid: true},
		{UserID: warmUserID, Keywords: []string{"memoryd"}, Scope: "warm", Hybrid: true},
		{UserID: warmUserID, Keywords: []string{"memoryd"}, Since: since, Hybrid: true},
	} {
		if _, _, err := ws.recall(ctx, q, 1, nil); err != nil {
			logger.Debug("store: warming a statement failed; it is prepared on first use instead", "error", err)
			return
		}
	}
	// The second read of a ranked enrich: the texts of the items kept.
	if _, err := ws.ContextTexts(ctx, warmUserID, []ContextItem{{ID: 0}}); err != nil {
		logger.Debug("store: warming a statement failed; it is prepared on first use instead", "error", err)
	}
}

// warmUserID is the user the warm-up reads, one no frontend would name (it
// starts with a control character); the warm-up only reads, so even a user
// of that name would see nothing change.
const warmUserID = "\x01memoryd-warm-up"
