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

// TestOrphanedTurnsFindsTurnsByKey: the search for orphaned turns reads
// each turn it found back by its key (user, event id), never through
// turns_user_status_idx (user, status), whose entries for a user's
// pending turns are all alike: on a database never analyzed (autovacuum
// off) the planner took that index as well as the key, and each of a
// heavy user's pending turns then scanned all the user's pending turns (a
// plans walk: 10,000 of one user's turns waiting, 33 s a reconcile run,
// 76 ms once analyzed). The plan's count of rows read and discarded
// (through auto_explain) must stay linear in the turns' number.
func TestOrphanedTurnsFindsTurnsByKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := storetest.Schema(t)
	s := storetest.Open(t, url)
	const n = 1500
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	var turns []store.Turn
	for i := range n {
		turns = append(turns, store.Turn{EventID: fmt.Sprintf("evt-%d", i), UserID: "heavy", UserMessage: "m", TurnAt: at.Add(time.Duration(i) * time.Second)})
	}
	for u := range 100 {
		turns = append(turns, store.Turn{EventID: "evt-0", UserID: fmt.Sprintf("u%03d", u), UserMessage: "m", TurnAt: at})
	}
	if _, err := s.InsertTurns(ctx, turns); err != nil {
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
	if len(orphans) != 500 {
		t.Errorf("%d orphans; want 500 (the limit)", len(orphans))
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
		for _, m := range removed.FindAllStringSubmatch(p, -1) {
			k, _ := strconv.Atoi(m[1])
			total += k
		}
		if total > 5*len(turns) {
			t.Errorf("the search for orphaned turns read and discarded %d rows for %d pending turns:\n%s", total, len(turns), p)
		}
	}
	if !found {
		t.Fatalf("no plan of OrphanedTurns among %d notices", len(noticed))
	}
}
