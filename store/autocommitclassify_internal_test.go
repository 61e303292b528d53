package store

import (
	"io/fs"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/migrations"
)

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
		// Postgres's functions read (a list of the reads' own took these
		// for writes, the enrich search's among them).
		{recallSQL, false},
		{`SELECT key FROM facts WHERE user_id = $1 ORDER BY key LIMIT NULLIF($2, -1)`, false},
		{`SELECT md5(ch.text), get_byte(e.vector, 3) FROM doc_chunks ch, context_embeddings e`, false},
		{`SELECT x.a FROM unnest($1::text[]) x(a)`, false},
		{`SELECT memoryd_tsquery('english', $1)`, false},
		{`SELECT setval('memory_change_seq', 1)`, true},
		{`SELECT pg_catalog.setval('memory_change_seq', 1)`, true},

		{`INSERT INTO turns (user_id, event_id) VALUES ($1, $2)`, true},
		{`UPDATE turns SET status = 'pending' WHERE user_id = $1`, true},
		{`UPDATE turns t SET status = 'pending'`, true},
		{`DELETE /* by id */ FROM context WHERE id = $1`, true},
		{"/* prune */ DELETE FROM context WHERE id = $1", true},
		{"DELETE -- by id\nFROM context WHERE id = $1", true},
		{`WITH d AS (DELETE FROM context WHERE user_id = $1 RETURNING id) SELECT count(*) FROM d`, true},
		{`WITH x AS (SELECT 1 AS a) INSERT INTO t (a) SELECT a FROM x`, true},
		// A comment's mark in quoted text, and a quote in a comment,
		// are text: what follows is still read.
		{`WITH a AS (SELECT '--' AS c), d AS (DELETE FROM t RETURNING 1) SELECT count(*) FROM d`, true},
		{`WITH a AS (SELECT '/*' AS c), d AS (DELETE FROM t RETURNING 1) SELECT '*/' FROM d`, true},
		{"SELECT 1 -- it's\n, x FROM (SELECT 1) d WHERE 'a' = 'a'", false},
		{`SELECT "memoryd_forget_user"($1)`, true},
		{`SELECT "user", c."key" FROM facts c`, false},
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
	// Every shape of the enrich and search statement, which runs outside
	// a transaction under the request's budget.
	for sh, sql := range recallStatements {
		if isWrite(sql) {
			t.Errorf("the recall statement of shape %+v is taken for a write", sh)
		}
	}
}

// TestMemorydReadsMatchTheMigrations: memorydReads lists exactly the
// functions the migrations define (as last replaced) that are not
// triggers and whose bodies write nothing, so that a read calling one is
// a read, and one that writes is not listed.
func TestMemorydReadsMatchTheMigrations(t *testing.T) {
	t.Parallel()
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	def := regexp.MustCompile(`(?is)FUNCTION\s+(memoryd_[a-z0-9_]+)\s*\([^)]*\)\s*RETURNS\s+(\w+)(.*?)\$(\w*)\$(.*?)\$(\w*)\$`)
	// Any writing word counts (an UPDATE ONLY, a schema's table, a
	// PERFORM of another function): a read taken for a write is only
	// left out of the list.
	writes := regexp.MustCompile(`(?i)\b(insert|update|delete|merge|truncate|copy|call|perform|setval|nextval|lo_\w+|dblink_exec)\b`)
	reads := map[string]bool{}
	bodies := map[string]string{}
	for _, name := range names {
		b, err := fs.ReadFile(migrations.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range def.FindAllStringSubmatch(string(b), -1) {
			fn, returns, body := strings.ToLower(m[1]), strings.ToLower(m[2]), m[5]
			if returns == "trigger" {
				delete(reads, fn)
				continue
			}
			reads[fn], bodies[fn] = !writes.MatchString(body), body
		}
	}
	// A function calling one of memoryd's that writes writes too.
	for changed := true; changed; {
		changed = false
		for fn, body := range bodies {
			for _, m := range calledName.FindAllStringSubmatch(body, -1) {
				if c := strings.ToLower(m[1]); reads[fn] && strings.HasPrefix(c, "memoryd_") && !reads[c] {
					reads[fn], changed = false, true
				}
			}
		}
	}
	for fn, read := range reads {
		if read != memorydReads[fn] {
			t.Errorf("%s: writes nothing %v in the migrations, listed in memorydReads %v", fn, read, memorydReads[fn])
		}
	}
	for fn := range memorydReads {
		if _, ok := reads[fn]; !ok {
			t.Errorf("%s is in memorydReads but no migration defines it as a function that is not a trigger", fn)
		}
	}
}
