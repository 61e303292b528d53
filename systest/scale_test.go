package systest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
)

// TestScaleOutSurvivesSIGKILL runs three serve processes on one stream and
// database, publishes 900 turns, SIGKILLs one process once a third are
// processed, and checks that every turn was processed exactly once in
// effect, with each user's latest fact, and that the survivors stop cleanly.
func TestScaleOutSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	eventstest.ReleaseBin(t, eventstest.ReleaseNewest) // built (the first time) while another heavy test runs
	heavy(t)
	// On the newest nats-server (the other tests use the machine's):
	// redelivery after a kill is the server's part of this test.
	e := newRelEnv(t, startNATSRelease(t, eventstest.ReleaseNewest)) // migrated before the processes race to do it
	var procs []*proc
	for range 3 {
		procs = append(procs, e.startServe(e.dbURL))
	}

	// 30 users × 30 turns: enough that all three processes hold jobs when
	// one is killed, and that each user's turns are spread over processes.
	const users, perUser = 30, 30
	var wg sync.WaitGroup
	errs := make(chan error, users)
	for u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perUser {
				user := fmt.Sprintf("u%02d", u)
				ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
				_, err := e.pub.Publish(ctx, events.Turn{ID: fmt.Sprintf("%s-%d", user, i), UserID: user,
					UserMessage: fmt.Sprintf("message %d: my favorite color is c%d", i, i), AssistantResponse: "ok",
					Timestamp: time.Date(2026, 11, 21, 0, 0, i, 0, time.UTC)})
				cancel()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	const total = users * perUser

	processed := func(n int64) func() (bool, string) {
		return func() (bool, string) {
			st, err := e.store.Stats(e.ctx, "")
			return err == nil && st.TurnsProcessed >= n, fmt.Sprintf("%+v %v", st, err)
		}
	}
	waitFor(t, "a third processed", 3*time.Minute, processed(total/3), procs...)
	procs[0].kill()
	waitFor(t, "all processed", 3*time.Minute, processed(total), procs...)

	st, err := e.store.Stats(e.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if st.TurnsReceived != total || st.TurnsProcessed != total || st.TurnsFailed != 0 || st.ContextItems != total {
		t.Fatalf("stats = %+v; want %d turns processed once, %d context items", st, total, total)
	}
	for u := range users {
		var v string
		err := e.store.Pool().QueryRow(e.ctx, `SELECT value FROM facts WHERE user_id = $1 AND key = 'favorite_color'`, fmt.Sprintf("u%02d", u)).Scan(&v)
		if err != nil || v != fmt.Sprintf("c%d", perUser-1) {
			t.Fatalf("u%02d favorite_color = %q, %v", u, v, err)
		}
	}
	// The survivors shut down cleanly on SIGTERM (within a generous bound
	// over their --shutdown-timeout 5s).
	for i, p := range procs[1:] {
		if err := p.stop(time.Minute); err != nil {
			t.Errorf("serve %d after SIGTERM: %v\n%s", i+1, err, p.tail())
		}
	}
}
