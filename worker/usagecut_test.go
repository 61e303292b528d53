package worker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// TestUsageOfASaveWhoseCommitWasCutCountsOnce: an extraction's save,
// which stores the run's token usage with its results, has its
// connection cut during its COMMIT (reset, the network then refusing
// connections), and the server commits it. The job's run sees an error
// and flushes the usage on its own as for calls whose results were not
// stored (kept in the serve's backlog while the database is out of reach,
// stored later). Before, the call was counted twice; now each call's
// usage is recorded with its id, and the second recording of it writes
// nothing.
func TestUsageOfASaveWhoseCommitWasCutCountsOnce(t *testing.T) {
	e := setup(t)
	direct := e.store
	url := storetest.URL(t, direct)
	key := rand.Int64()
	hold, err := direct.Pool().Acquire(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hold.Release)
	if _, err := hold.Exec(e.ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			if _, err := hold.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, key); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(release)
	// The save's COMMIT waits at a deferred trigger for the test's lock.
	e.exec(fmt.Sprintf(`
		CREATE FUNCTION test_commit_hold() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_xact_lock_shared(%d); RETURN NULL; END $$;
		CREATE CONSTRAINT TRIGGER test_commit_hold AFTER UPDATE ON turns DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW WHEN (NEW.status = 'processed') EXECUTE FUNCTION test_commit_hold()`, key))
	p := storetest.StartCutProxy(t, url)
	cfg, err := pgxpool.ParseConfig(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = storetest.MaxConns
	pool, err := pgxpool.NewWithConfig(e.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e.store = store.New(pool)

	llm := aliceModel(t, func(int) *extractortest.Reply { return nil }) // 10 prompt and 5 completion tokens a call
	stop := e.start(llm, func(c *worker.Config) { c.MaxAttempts = 1 })
	e.publish(events.Turn{ID: "t1", UserID: "alice", UserMessage: "My name is Alice."})
	e.waitFor("the save's COMMIT to wait at the held trigger", func() (bool, string) {
		var n int
		err := direct.Pool().QueryRow(e.ctx, `SELECT count(*) FROM pg_locks l WHERE l.locktype = 'advisory' AND NOT l.granted
			AND ((l.classid::bigint << 32) | l.objid::bigint) = $1`, key).Scan(&n)
		return err == nil && n == 1, fmt.Sprintf("%d waiting, %v", n, err)
	})
	p.Cut()
	release()
	e.waitFor("the cut save committed on the server", func() (bool, string) {
		turn, err := direct.GetTurn(e.ctx, "alice", "t1")
		return err == nil && turn.Status == "processed", fmt.Sprintf("%+v %v", turn, err)
	})
	p.Resume()
	e.waitFor("the turn's job ended", func() (bool, string) {
		var states []string
		err := direct.Pool().QueryRow(e.ctx, `SELECT coalesce(array_agg(state::text), '{}') FROM river_job WHERE kind = $1`, worker.ExtractJobKind).Scan(&states)
		return err == nil && len(states) == 1 && states[0] == "completed", fmt.Sprint(states, err)
	})
	stop() // stores what the backlog holds
	e.store = direct
	checkUsage(t, e, 1, 1)
}
