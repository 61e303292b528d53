package store

import "testing"

// TestIsWriteFailsSafe: a statement run outside a transaction is taken
// for a read only when it plainly is one; a write whose text hides it
// (a comment inside DELETE FROM, a CTE, SELECT INTO, a function call,
// a command other than the ones matched) is a write, so that a
// connection lost under it says it may have been done. Before, a regexp
// looked for the write words, and took these for reads.
func TestIsWriteFailsSafe(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		sql   string
		write bool
	}{
		{`SELECT id, question FROM context WHERE user_id = $1 ORDER BY id`, false},
		{`SELECT updated_at, deleted FROM facts WHERE user_id = $1`, false},
		{"-- the user's newest\nSELECT max(id) FROM context WHERE user_id = $1", false},
		{`WITH x AS MATERIALIZED (SELECT user_id FROM turns) SELECT count(*) FROM x`, false},
		{`SELECT c.id FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY AS u(id, d, n) JOIN context c ON c.id = u.id`, false},
		{`SELECT 'insert into t' AS s, $$delete from t$$ AS d`, false},
		{`SELECT pg_advisory_lock(hashtext('memoryd.migrate.' || current_schema()))`, false},
		{`SHOW search_path`, false},

		{`INSERT INTO turns (user_id, event_id) VALUES ($1, $2)`, true},
		{`UPDATE turns SET status = 'pending' WHERE user_id = $1`, true},
		{`UPDATE turns t SET status = 'pending'`, true},
		{`DELETE /* by id */ FROM context WHERE id = $1`, true},
		{"/* prune */ DELETE FROM context WHERE id = $1", true},
		{"DELETE -- by id\nFROM context WHERE id = $1", true},
		{`WITH d AS (DELETE FROM context WHERE user_id = $1 RETURNING id) SELECT count(*) FROM d`, true},
		{`WITH x AS (SELECT 1 AS a) INSERT INTO t (a) SELECT a FROM x`, true},
		{`SELECT * INTO context_backup FROM context`, true},
		{`SELECT memoryd_forget_user($1)`, true},
		{`SELECT id FROM turns WHERE user_id = $1 FOR UPDATE`, true},
		{`MERGE INTO facts f USING x ON f.key = x.key WHEN MATCHED THEN DELETE`, true},
		{`TRUNCATE context`, true},
		{`COPY context FROM STDIN`, true},
		{`CALL memoryd_cleanup()`, true},
		{`DO $$BEGIN DELETE FROM context; END$$`, true},
		{`VACUUM (ANALYZE) context`, true},
		{`LOCK TABLE context IN EXCLUSIVE MODE`, true},
		{`CREATE TABLE t (a int)`, true},
	} {
		if got := isWrite(tt.sql); got != tt.write {
			t.Errorf("isWrite(%q) = %v, want %v", tt.sql, got, tt.write)
		}
	}
}
