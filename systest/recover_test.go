package systest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/worker"
)

// defaultServeArgs are the arguments of a `memoryd serve` on e with the
// default settings: only the connections, the JSON log the tests read, and
// the small Postgres pool every system test asks for.
func (e *relEnv) defaultServeArgs() []string {
	return []string{"--database-url", withPoolCap(e.dbURL, servePoolConns), "--nats-url", e.natsURL,
		"--prefix", e.prefix, "--stream", e.stream, "--log-format", "json"}
}

// runningJobs returns the extraction jobs the table shows running: their ids,
// the process that runs each, and the event ids they name.
func (e *relEnv) runningJobs() (ids []int64, procs map[string]bool, eventIDs []string, err error) {
	rows, err := e.store.Pool().Query(e.ctx, `SELECT id, attempted_by[array_upper(attempted_by, 1)], args
		FROM river_job WHERE state = 'running' AND kind = $1`, worker.ExtractJobKind)
	if err != nil {
		return nil, nil, nil, err
	}
	procs = map[string]bool{}
	var (
		id   int64
		by   string
		args []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &by, &args}, func() error {
		var a struct {
			EventIDs []string `json:"event_ids"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return err
		}
		ids, procs[by], eventIDs = append(ids, id), true, append(eventIDs, a.EventIDs...)
		return nil
	})
	return ids, procs, eventIDs, err
}

// TestSIGKILLRecoveryWithDefaults: `memoryd serve` with the default settings
// (--job-timeout 10m) is SIGKILLed while extraction jobs run, mid-ingest,
// and started again. The dead process's running jobs are worked again
// within seconds, not after River's rescue delay (2 × --job-timeout, 20
// minutes), and every turn is processed once in effect.
func TestSIGKILLRecoveryWithDefaults(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a process")
	}
	t.Parallel()
	heavy(t)
	e := newRelEnv(t, "")
	turns, want := relTurns("d", 30, 30, nil) // 900: jobs running at the kill (checked below), less CPU for a shared CI
	first := startServe(t, nil, e.defaultServeArgs()...)
	pubDone := make(chan error, 1)
	go func() {
		_, err := e.publishAll(turns, 10)
		pubDone <- err
	}()
	// Kill when jobs are running and some turns are done: a moment into
	// the ingest, as a crash finds it.
	waitFor(t, "extraction jobs running", 3*time.Minute, func() (bool, string) {
		f, err := e.figures(len(turns))
		if err != nil || f.Processed < 100 {
			return false, fmt.Sprint(f, err)
		}
		ids, _, _, err := e.runningJobs()
		return err == nil && len(ids) > 0, fmt.Sprintf("%d running jobs, %v", len(ids), err)
	}, first)
	first.kill()
	killedAt := time.Now()
	jobs, procs, orphaned, err := e.runningJobs()
	if err != nil {
		t.Fatal(err)
	}
	atKill, err := e.figures(len(turns))
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) == 0 {
		t.Fatalf("no job was running at the kill (%s): the test did not kill mid-extraction", atKill)
	}
	if len(procs) != 1 {
		t.Fatalf("running jobs of %d processes, want the killed one only", len(procs))
	}
	if err := <-pubDone; err != nil {
		t.Fatal(err)
	}
	second := startServe(t, nil, e.defaultServeArgs()...)
	restartedAt := time.Now()
	// The bound is a budget for a busy 2-core machine; River's rescuer would
	// take 20 minutes.
	waitFor(t, fmt.Sprintf("the %d turns of the %d jobs running at the kill processed", len(orphaned), len(jobs)), 2*time.Minute, func() (bool, string) {
		var n int
		err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM turns WHERE event_id = ANY($1) AND status = 'processed'`, orphaned).Scan(&n)
		return err == nil && n == len(orphaned), fmt.Sprintf("%d of %d processed, %v", n, len(orphaned), err)
	}, second)
	jobsDone := time.Since(killedAt)
	f := e.waitAllProcessed(len(turns), 3*time.Minute, second)
	e.checkExactlyOnce(f, want, "favorite_number")
	t.Logf("figures: SIGKILL with %d of %d turns processed (%d recorded, %d pending) and %d jobs (%d turns) running; "+
		"their turns processed %s after the kill (restart %s after it); all processed %s after the kill; %s",
		atKill.Processed, atKill.Published, atKill.Recorded, atKill.Pending, len(jobs), len(orphaned),
		jobsDone.Round(100*time.Millisecond), restartedAt.Sub(killedAt).Round(100*time.Millisecond),
		time.Since(killedAt).Round(100*time.Millisecond), f)
}
