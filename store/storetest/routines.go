package storetest

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// A test's own functions and triggers (a statement held on a lock by a
// trigger, a write made to fail) are DDL, and its schema was dropped for
// them, another migrated for a later test: some 0.4 s of Postgres CPU each,
// 28 of store's tests a run. When the DDL log holds nothing else for the
// schema (routineTags, routineObjects), the give-back drops the functions
// and triggers the migrations did not make, and keeps the schema only when
// its functions, triggers and tables' trigger flags are then those of a
// schema as migrated (routinesRef); otherwise it is dropped as before.

// routineTags and routineObjects are the DDL log entries the give-back
// undoes: made or dropped, a function or trigger.
const (
	routineTags    = `('CREATE FUNCTION', 'CREATE TRIGGER', 'DROP FUNCTION', 'DROP TRIGGER')`
	routineObjects = `('function', 'trigger')`
)

// errRoutinesChanged rolls back a give-back whose schema's functions or
// triggers are not the migrations' once the test's own are dropped.
var errRoutinesChanged = errors.New("its functions or triggers differ from the migrations'")

// routine is a function, a trigger, or a table's flag saying it has
// triggers, as routines reads it.
type routine struct {
	def  string // its definition, the schema's name left out
	drop string // the statement dropping it ("" for a table's flag)
}

// routinesRef is what the migrations make, read from the process's first
// claimed schema (any schema idle or just migrated is as migrated). The
// same for every schema of a fingerprint.
var routinesRef struct {
	sync.Mutex
	m map[string]routine // nil until read
}

// noteRoutines reads the migrations' functions and triggers from schema,
// as migrated, the first time. A failure leaves them unread: a schema
// with DDL is then dropped, as before.
func noteRoutines(ctx context.Context, q querier, schema string) {
	routinesRef.Lock()
	defer routinesRef.Unlock()
	if routinesRef.m != nil {
		return
	}
	if m, err := routines(ctx, q, schema); err == nil && len(m) > 0 {
		routinesRef.m = m
	}
}

func migratedRoutines() map[string]routine {
	routinesRef.Lock()
	defer routinesRef.Unlock()
	return routinesRef.m
}

// routines reads schema's functions, its tables' triggers and their
// relhastriggers flags, keyed by kind and name; the statements dropping
// them name the schema (the admin's search_path does not hold it). The
// triggers of foreign keys, named by OID, are left out: only an ALTER
// TABLE, never undone, changes them.
func routines(ctx context.Context, q querier, schema string) (map[string]routine, error) {
	rows, err := q.Query(ctx, `
		SELECT 'f ' || replace(p.oid::regprocedure::text, $1 || '.', ''),
			replace(CASE WHEN p.prokind IN ('f', 'p') THEN pg_get_functiondef(p.oid) ELSE p.prokind::text || ' ' || p.prosrc END, $1 || '.', '')
				|| ' ' || coalesce(p.proacl::text, '') || ' ' || p.proowner::regrole::text,
			'DROP ROUTINE ' || p.oid::regprocedure::text
		FROM pg_proc p WHERE p.pronamespace = to_regnamespace($1)
		UNION ALL
		SELECT 't ' || c.relname || ' ' || t.tgname,
			replace(pg_get_triggerdef(t.oid), $1 || '.', '') || ' ' || t.tgenabled::text,
			'DROP TRIGGER ' || quote_ident(t.tgname) || ' ON ' || t.tgrelid::regclass::text
		FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE c.relnamespace = to_regnamespace($1) AND NOT t.tgisinternal
		UNION ALL
		SELECT 'r ' || c.relname, c.relhastriggers::text, ''
		FROM pg_class c WHERE c.relnamespace = to_regnamespace($1) AND c.relkind IN ('r', 'p')`, schema)
	if err != nil {
		return nil, err
	}
	m := map[string]routine{}
	var (
		key string
		r   routine
	)
	if _, err := pgx.ForEachRow(rows, []any{&key, &r.def, &r.drop}, func() error {
		m[key] = r
		return nil
	}); err != nil {
		return nil, err
	}
	return m, nil
}

// undoRoutines drops schema's functions and triggers the migrations did
// not make (ref), triggers first, clears the trigger flag of the tables
// left without a trigger that had none as migrated, and fails with
// errRoutinesChanged unless its functions, triggers and flags are then
// ref's. tx's rollback then undoes what it did.
func undoRoutines(ctx context.Context, tx pgx.Tx, schema string, ref map[string]routine) error {
	cur, err := routines(ctx, tx, schema)
	if err != nil {
		return err
	}
	var drops []string
	for key, r := range cur {
		if _, ok := ref[key]; !ok && r.drop != "" {
			drops = append(drops, key)
		}
	}
	// "t ..." before "f ...": a trigger depends on its function.
	sort.Slice(drops, func(i, j int) bool { return drops[i] > drops[j] })
	for _, key := range drops {
		if _, err := tx.Exec(ctx, cur[key].drop); err != nil {
			return err
		}
	}
	var untriggered []string
	for key, r := range ref {
		if table, ok := strings.CutPrefix(key, "r "); ok && r.def == "false" {
			untriggered = append(untriggered, table)
		}
	}
	// As VACUUM does (a DROP TRIGGER leaves the flag set).
	if _, err := tx.Exec(ctx, `UPDATE pg_class c SET relhastriggers = false
		WHERE c.relnamespace = to_regnamespace($1) AND c.relname = ANY($2) AND c.relhastriggers
		AND NOT EXISTS (SELECT FROM pg_trigger t WHERE t.tgrelid = c.oid)`, schema, untriggered); err != nil {
		return err
	}
	after, err := routines(ctx, tx, schema)
	if err != nil {
		return err
	}
	if len(after) != len(ref) {
		return errRoutinesChanged
	}
	for key, r := range ref {
		if after[key].def != r.def {
			return errRoutinesChanged
		}
	}
	return nil
}
