package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// A forget locks its user's jobs with the user's event ids at hand, for
// the legacy jobs of several users naming them (lockUserJobs): joined to
// the jobs, the array of every event id rode with each job locked into
// the sort by id (a lock's recheck reads the joined row again), 470 MB on
// disk and 2.5 s for a user of 30,000 turns and 1,000 jobs. Here 10,000
// turns and 100 jobs, an 11 MB sort: with no temporary file allowed, the
// forget failed.
func TestForgetOfAUserOfManyTurnsAndJobsSortsInMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Unmigrated(t, storetest.Migrated(t)+"&work_mem=4MB&temp_file_limit=0")
	if _, err := s.Pool().Exec(ctx, `INSERT INTO turns (event_id, user_id, user_message, turn_at, status)
		SELECT 'a-' || i, 'alice', 'Gate 9', now() - i * interval '1 second', 'processed' FROM generate_series(1, 10000) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `INSERT INTO river_job (kind, args, queue, state, max_attempts, finalized_at)
		SELECT 'test_extract', jsonb_build_object('owner', 'alice', 'turn_ids', jsonb_build_array('a-' || i)), 'extract', 'completed', 5, now()
		FROM generate_series(1, 100) i`); err != nil {
		t.Fatal(err)
	}
	ids := insertJobs(t, ctx, s, `(NULL, 'l', 'test_extract', 'extract', 'available', '{"owner": "", "turn_ids": ["a-1", "b-1"]}')`)
	if _, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}, testJobs, testEmbedJobs); err != nil {
		t.Fatalf("forget: %v", err)
	}
	jobsOfAliceGone(t, ctx, s)
	var turnIDs []string
	if err := s.Pool().QueryRow(ctx, `SELECT array(SELECT jsonb_array_elements_text(args->'turn_ids')) FROM river_job WHERE id = $1`, ids["l"]).Scan(&turnIDs); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(turnIDs) != "[b-1]" {
		t.Fatalf("the legacy job names the turns %v after alice's forget, want [b-1]", turnIDs)
	}
}
