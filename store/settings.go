package store

import (
	"context"
	"fmt"
	"strings"
)

// AutovacuumOff reports whether the server runs no autovacuum: the setting
// is off, or track_counts is, without which autovacuum cannot tell which
// tables need it. memoryd's change outbox, River's jobs and the turns'
// status updates leave dead rows at the rate of ingest; without vacuum
// their tables grow, and so does every read that passes over them.
func (s *Store) AutovacuumOff(ctx context.Context) (bool, error) {
	var off bool
	err := s.pool.QueryRow(ctx, `SELECT current_setting('autovacuum') = 'off' OR current_setting('track_counts') = 'off'`).Scan(&off)
	if err != nil {
		return false, fmt.Errorf("store: autovacuum setting: %w", err)
	}
	return off, nil
}

// VacuumedTables are the tables the prune vacuums (VacuumTurns,
// VacuumContext, VacuumDocuments).
var VacuumedTables = []string{"turns", "context", "context_terms", "context_embeddings",
	"collections", "documents", "doc_chunks", "chunk_terms", "chunk_embeddings"}

// VacuumDenied returns the connection's role and those of VacuumedTables
// it may not VACUUM. Postgres does not refuse such a VACUUM: it skips the
// table with a WARNING that reaches no log of memoryd's and answers
// success, so the prune's deletions and cleared text never become
// reusable space (with autovacuum off the files grow past --max-db-size
// while the live size, which counts that space as reusable, says all is
// well). A role may VACUUM a table it owns (or is a member of the owner
// of), any table of a database it owns, every table as a superuser, and,
// from Postgres 17, a table it holds MAINTAIN on (pg_maintain included).
func (s *Store) VacuumDenied(ctx context.Context) (role string, tables []string, err error) {
	err = s.pool.QueryRow(ctx, `
		SELECT current_user::text, coalesce(array_agg(c.relname::text ORDER BY c.relname) FILTER (WHERE NOT (
			pg_has_role(c.relowner, 'USAGE')
			OR pg_has_role((SELECT datdba FROM pg_database WHERE datname = current_database()), 'USAGE')
			OR CASE WHEN current_setting('server_version_num')::int >= 170000 THEN has_table_privilege(c.oid, 'MAINTAIN') ELSE false END)), '{}')
		FROM unnest($1::text[]) AS t(name) JOIN pg_class c ON c.oid = to_regclass(t.name)`, VacuumedTables).Scan(&role, &tables)
	if err != nil {
		return "", nil, fmt.Errorf("store: vacuum privilege: %w", err)
	}
	return role, tables, nil
}

// VacuumDeniedMessage says what a role that may not VACUUM tables costs
// and what to do; "" when tables is empty.
func VacuumDeniedMessage(role string, tables []string) string {
	if len(tables) == 0 {
		return ""
	}
	return fmt.Sprintf("role %q may not VACUUM %d of the tables the prune vacuums (%s): Postgres skips them with only a warning, so space that pruning, turn text retention and deleted documents free is not reused and, with autovacuum off, the files grow past --max-db-size while memoryd_db_live_bytes stays under it; run memoryd as the tables' owner (the role that ran memoryd migrate, or a member of it) or the database owner (PostgreSQL 17: GRANT MAINTAIN ON those tables, or pg_maintain)",
		role, len(tables), strings.Join(tables, ", "))
}
