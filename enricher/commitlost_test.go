package enricher_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestWriteWhoseCommitLostItsConnectionMayBeDone: a write whose
// database connection was lost during its COMMIT (here its backend
// terminated while the COMMIT waits at a deferred trigger) was answered
// "memory store unavailable", as if nothing had been written, though the
// server may have committed it (store.InTx). It is answered as a commit
// not confirmed is: the write may have been done, read it back; the
// answer names the lost connection (it said "not confirmed within 5s",
// a timeout, before).
func TestWriteWhoseCommitLostItsConnectionMayBeDone(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, table string
		send        func(context.Context, *events.Client) error
	}{
		{"facts.set", "facts", func(ctx context.Context, c *events.Client) error {
			_, err := c.SetFact(ctx, "u", "city", "Paris")
			return err
		}},
		{"store", "context", func(ctx context.Context, c *events.Client) error {
			_, err := c.Store(ctx, events.StoreRequest{UserID: "u", Question: "Which city?", Answer: "Paris"})
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			st := storetest.New(t)
			h := start(t, st, nil)
			ctx := ctxT(t)
			key := rand.Int64()
			hold, err := st.Pool().Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(hold.Release)
			if _, err := hold.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Pool().Exec(ctx, fmt.Sprintf(`
				CREATE FUNCTION test_commit_hold() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN PERFORM pg_advisory_xact_lock_shared(%d); RETURN NULL; END $$;
				CREATE CONSTRAINT TRIGGER test_commit_hold AFTER INSERT ON %s DEFERRABLE INITIALLY DEFERRED
					FOR EACH ROW EXECUTE FUNCTION test_commit_hold()`, key, c.table)); err != nil {
				t.Fatal(err)
			}
			reply := make(chan error, 1)
			go func() { reply <- c.send(ctx, h.client) }()
			var pid int32
			eventstest.Eventually(t, "the write's COMMIT to wait at the held trigger", 30*time.Second, func() (bool, string) {
				rows, err := st.Pool().Query(ctx, `SELECT pid FROM pg_locks l WHERE l.locktype = 'advisory' AND NOT l.granted
					AND ((l.classid::bigint << 32) | l.objid::bigint) = $1`, key)
				if err != nil {
					return false, err.Error()
				}
				pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
				if err != nil || len(pids) != 1 {
					return false, fmt.Sprintf("%v waiting, %v", pids, err)
				}
				pid = pids[0]
				return true, ""
			})
			if _, err := st.Pool().Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
				t.Fatal(err)
			}
			got := <-reply
			if _, err := hold.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
				t.Fatal(err)
			}
			var se *events.ServiceError
			if !errors.As(got, &se) || se.Code != 500 || !strings.Contains(se.Description, "did not confirm the write") ||
				!strings.Contains(se.Description, "may have been done") {
				t.Fatalf("%s whose backend was terminated during its COMMIT: %v; want a 500 saying the write may have been done", c.name, got)
			}
			// The cause named: a lost connection, not a timeout.
			if !strings.Contains(se.Description, "lost its database connection") || strings.Contains(se.Description, "within") {
				t.Fatalf("%s whose backend was terminated during its COMMIT: %q; want it to say the commit lost its connection, not that it timed out", c.name, se.Description)
			}
		})
	}
}
