package store_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestOrphanedTurnsMatchesJobsByUserAndID: the reconciler's search for
// pending turns without a live job compares each turn with the live jobs
// of its own user only. Event ids are unique per user, and a frontend that
// numbers its users' turns (evt-0, evt-1, ...) gives every user the same
// few ids: matched by event id alone, each pending turn was compared with
// the live job entries of every user sharing its id. An audit with 20,000
// users and 30,000 turns waiting for extraction saw one reconcile run
// discard 120 million such pairs and take 3 minutes, run after run, on one
// of two cores. The plan's own count of pairs read and discarded (through
// auto_explain) must stay linear in the turns' number here, not grow with
// its square.
func TestOrphanedTurnsMatchesJobsByUserAndID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := storetest.Schema(t)
	s := storetest.Open(t, url)
	const users, perUser = 200, 5
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	var turns []store.Turn
	for u := range users {
		for i := range perUser {
			turns = append(turns, store.Turn{EventID: fmt.Sprintf("evt-%d", i), UserID: fmt.Sprintf("u%03d", u), UserMessage: "m", TurnAt: at})
		}
	}
	// A job of the old shape (no user) names its turns by event id alone.
	turns = append(turns, store.Turn{EventID: "legacy-1", UserID: "old", UserMessage: "m", TurnAt: at})
	if _, err := s.InsertTurns(ctx, turns); err != nil {
		t.Fatal(err)
	}
	// Every turn has a live job, one a user, except u000's evt-4.
	if _, err := s.Pool().Exec(ctx, `INSERT INTO river_job (kind, args, queue, state, max_attempts)
		SELECT $1, jsonb_build_object($2::text, 'u' || lpad(u::text, 3, '0'), $3::text,
			CASE WHEN u = 0 THEN jsonb_build_array('evt-0', 'evt-1', 'evt-2', 'evt-3')
			     ELSE jsonb_build_array('evt-0', 'evt-1', 'evt-2', 'evt-3', 'evt-4') END),
			'default', 'available', 5
		FROM generate_series(0, $4::int - 1) u`, testJobs.Kind, testJobs.UserField, testJobs.EventIDsField, users); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `INSERT INTO river_job (kind, args, queue, state, max_attempts)
		VALUES ($1, jsonb_build_object($2::text, jsonb_build_array('legacy-1')), 'default', 'available', 5)`,
		testJobs.Kind, testJobs.EventIDsField); err != nil {
		t.Fatal(err)
	}

	// The statistics a database past its first autovacuum has.
	if _, err := s.Pool().Exec(ctx, `ANALYZE turns, river_job`); err != nil {
		t.Fatal(err)
	}

	conn, plans := explainConn(t, url, "SET auto_explain.log_analyze = on", "SET auto_explain.log_timing = off")
	var orphans []store.OrphanedTurn
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var err error
		orphans, err = s.WithTx(tx).OrphanedTurns(ctx, testJobs, 500)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(orphans) != 1 || orphans[0].UserID != "u000" || orphans[0].EventID != "evt-4" {
		t.Errorf("orphans %+v; want u000's evt-4 alone", orphans)
	}

	removed := regexp.MustCompile(`Rows Removed by (?:Join )?Filter: (\d+)`)
	found := false
	noticed := plans()
	for _, p := range noticed {
		if !strings.Contains(p, "orphan") {
			continue
		}
		found = true
		total := 0
		defer func() { t.Logf("rows read and discarded: %d", total) }()
		for _, m := range removed.FindAllStringSubmatch(p, -1) {
			n, _ := strconv.Atoi(m[1])
			total += n
		}
		// A few scans of each set are linear; matched by event id alone
		// (five ids over 200 users) it was 100 times the turns.
		if total > 5*len(turns) {
			t.Errorf("the search for orphaned turns read and discarded %d rows for %d turns and as many live job entries:\n%s", total, len(turns), p)
		}
	}
	if !found {
		t.Fatalf("no plan of OrphanedTurns among %d notices", len(noticed))
	}
}
