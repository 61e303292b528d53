package worker_test

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	neturl "net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// TestIngestSaysWhenItRecordsAgain: while turns cannot be recorded the
// ingest logs an error a batch (backing off); when they can again it says
// so once, with how long and how many batches failed, so that an operator
// reading the log after an outage sees where it ended. The outage here is
// the turns table gone (renamed) and back. IngestFailing, which /readyz
// reads, tells the outage while it lasts (a disk-full walk: Postgres
// answered pings, refused every batch, and /readyz said 200).
func TestIngestSaysWhenItRecordsAgain(t *testing.T) {
	e, logs, w := ingestFailing(t)
	if strings.Contains(logs.String(), "recording turns again") {
		t.Fatalf("said it records again before it did:\n%s", logs.String())
	}
	if f := w.IngestFailing(); f == nil || f.Since.IsZero() || !strings.Contains(f.Err, "turns") {
		t.Fatalf("IngestFailing during the outage = %+v, want when it began and the error", f)
	}
	if _, err := e.store.Pool().Exec(e.ctx, `ALTER TABLE turns_gone RENAME TO turns`); err != nil {
		t.Fatal(err)
	}
	e.waitDone(2)
	e.waitFor("the ingest to say it records again", func() (bool, string) {
		return strings.Contains(logs.String(), "ingest: recording turns again"), ""
	})
	var again []string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "recording turns again") {
			again = append(again, l)
		}
	}
	if len(again) != 1 || !strings.Contains(again[0], "failed_batches=") || !strings.Contains(again[0], "failed_for=") {
		t.Fatalf("lines saying it records again: %q, want one with failed_batches and failed_for", again)
	}
	if f := w.IngestFailing(); f != nil {
		t.Fatalf("IngestFailing once turns are recorded again = %+v, want nil", f)
	}
}

// TestIngestSaysRecordingAgainOnlyWhenItDoes: a batch holding no turn to
// record (events dead-lettered at decode, or opted out) never reaches the
// turns table, so it says nothing about whether turns can be recorded: it
// must not end the outage in the log. Here the turns table is gone the
// whole time while invalid events arrive beside the failing turn.
func TestIngestSaysRecordingAgainOnlyWhenItDoes(t *testing.T) {
	e, logs, _ := ingestFailing(t)
	// Each invalid event its own batch among the failing turn's retries:
	// the next is published once the last is dead-lettered.
	bob := events.TurnSubject(e.prefix, "bob")
	for i := range 5 {
		if _, err := e.js.Publish(e.ctx, bob, fmt.Appendf(nil, `{"id":"bad-%d","user_id":"bob"}`, i)); err != nil {
			t.Fatal(err)
		}
		e.waitFor(fmt.Sprintf("invalid event %d dead-lettered", i), func() (bool, string) {
			dl, err := e.js.Stream(e.ctx, events.DeadLetterStream(e.stream))
			if err != nil {
				return false, err.Error()
			}
			info, err := dl.Info(e.ctx)
			if err != nil {
				return false, err.Error()
			}
			return info.State.Msgs >= uint64(i+1), fmt.Sprint(info.State.Msgs, " dead letters")
		})
	}
	if n := strings.Count(logs.String(), "recording turns again"); n > 0 {
		t.Errorf("said %d times that it records turns again while the turns table was gone:\n%s", n, logs.String())
	}
	if _, err := e.store.Pool().Exec(e.ctx, `ALTER TABLE turns_gone RENAME TO turns`); err != nil {
		t.Fatal(err)
	}
	e.waitDone(2)
}

// ingestFailing starts a worker logging to the returned buffer, records
// one turn, then takes the turns table away (renamed turns_gone) and
// publishes a second turn, returning once its ingest has failed.
func ingestFailing(t *testing.T) (*env, *lockedBuffer, *worker.Worker) {
	t.Helper()
	e := setup(t)
	logs := &lockedBuffer{}
	w, _ := e.startWorker(extractor.NewRules(), func(c *worker.Config) { c.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	e.publish(events.Turn{ID: "t1", UserID: "alice", UserMessage: "I live in Oslo"})
	e.waitDone(1)
	if _, err := e.store.Pool().Exec(e.ctx, `ALTER TABLE turns RENAME TO turns_gone`); err != nil {
		t.Fatal(err)
	}
	e.publish(events.Turn{ID: "t2", UserID: "alice", UserMessage: "I work at a bakery"})
	e.waitFor("the ingest to fail", func() (bool, string) {
		return strings.Contains(logs.String(), "ingest: cannot record turns"), ""
	})
	return e, logs, w
}

// pgRelay forwards TCP connections to Postgres until cut: then it closes
// every connection it carries and refuses new ones (accepts and closes
// them), as a database that went down does, until restored. The shared
// server stays up for the other tests.
type pgRelay struct {
	target string // host:port, or a Unix socket path
	ln     net.Listener
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]bool
}

func newPGRelay(t *testing.T, url string) (*pgRelay, string) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	r := &pgRelay{target: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), conns: map[net.Conn]bool{}}
	network := "tcp"
	if strings.HasPrefix(cfg.Host, "/") {
		network, r.target = "unix", fmt.Sprintf("%s/.s.PGSQL.%d", cfg.Host, cfg.Port)
	}
	if r.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.ln.Close()
		r.cut()
	})
	go func() {
		for {
			c, err := r.ln.Accept()
			if err != nil {
				return
			}
			go r.serve(network, c)
		}
	}()
	u, err := neturl.Parse(url)
	if err != nil || u.Host == "" {
		t.Skipf("the test database URL %q is not a URL with a host to relay", url)
	}
	q := u.Query()
	q.Del("host")
	q.Del("port")
	u.Host, u.RawQuery = r.ln.Addr().String(), q.Encode()
	return r, u.String()
}

func (r *pgRelay) serve(network string, c net.Conn) {
	r.mu.Lock()
	if r.down {
		r.mu.Unlock()
		c.Close()
		return
	}
	r.conns[c] = true
	r.mu.Unlock()
	up, err := net.Dial(network, r.target)
	if err != nil {
		c.Close()
		return
	}
	r.mu.Lock()
	if r.down {
		r.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	r.conns[up] = true
	r.mu.Unlock()
	go func() {
		_, _ = io.Copy(up, c)
		up.Close()
	}()
	_, _ = io.Copy(c, up)
	c.Close()
}

func (r *pgRelay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = true
	for c := range r.conns {
		c.Close()
	}
	clear(r.conns)
}

func (r *pgRelay) restore() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = false
}

// TestIngestResumesWhenPostgresAnswersAgain: after a batch failed because
// Postgres could not be reached, the ingest records turns again as soon as
// Postgres answers, not when its backoff ends (here 10 minutes: before,
// turns published after the outage waited out the backoff, up to 30 s
// with the defaults, while /readyz said ready). The failed batch comes
// back when its redelivery delay ends, which the test does not wait for.
func TestIngestResumesWhenPostgresAnswersAgain(t *testing.T) {
	e := setup(t)
	relay, url := newPGRelay(t, storetest.Migrated(t))
	e.store = storetest.Unmigrated(t, url)
	logs := &lockedBuffer{}
	e.start(extractor.NewRules(), func(c *worker.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		c.RetryBackoff = 10 * time.Minute
	})
	e.publish(events.Turn{ID: "before", UserID: "alice", UserMessage: "I live in Oslo"})
	e.waitDone(1)
	relay.cut()
	e.publish(events.Turn{ID: "during", UserID: "alice", UserMessage: "I work at a bakery"})
	e.waitFor("the ingest to fail", func() (bool, string) {
		return strings.Contains(logs.String(), "ingest: cannot record turns"), ""
	})
	relay.restore()
	e.publish(events.Turn{ID: "after", UserID: "alice", UserMessage: "I have a dog"})
	e.waitFor("the turn published after the outage recorded", func() (bool, string) {
		_, err := e.store.GetTurn(e.ctx, "alice", "after")
		return err == nil, fmt.Sprint(err)
	})
	// Said after the commit the read above may see first.
	e.waitFor("the ingest to say it records again", func() (bool, string) {
		return strings.Contains(logs.String(), "ingest: recording turns again"), logs.String()
	})
}

// A batch Postgres rolls back to break a deadlock is redone at once, not
// taken for an outage (an ERROR a batch, the batch handed back and waited
// out, IngestFailing for /readyz). The deadlock is forced: a transaction
// holds alice's turn b, inserted and not committed; ingest takes alice's
// forget lock shared and waits for a third transaction holding the
// tombstones (read next); the first transaction asks for alice's lock
// exclusively, as a forget does, and waits for ingest; then the third
// ends and ingest's insert of b, waiting for the first, closes the cycle.
// Postgres checks a wait for a deadlock once, deadlock_timeout after it
// began: ingest's last wait began with the cycle, and the first
// transaction's deadlock_timeout is long, so ingest's backend is the one
// rolled back, however late each step runs. (Ingest waiting for b first
// and the cycle closed after it, its one check could come first, find no
// cycle, and leave both waiting until the batch's timeout.)
func TestIngestRedoesABatchRolledBackForADeadlock(t *testing.T) {
	e := setup(t)
	ctx := e.ctx
	hold := e.block(`SET LOCAL deadlock_timeout = '10min'`)
	if _, err := e.store.WithTx(hold.tx).InsertTurns(ctx, []store.Turn{{EventID: "b", UserID: "alice", ConversationID: "c",
		UserMessage: "held", TurnAt: t0}}); err != nil {
		t.Fatal(err)
	}
	tombs := e.block(`LOCK TABLE tombstones IN ACCESS EXCLUSIVE MODE`)
	logs := &lockedBuffer{}
	w, _ := e.startWorker(extractor.NewRules(), func(c *worker.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	e.publish(events.Turn{ID: "b", UserID: "alice", UserMessage: "I live in Oslo"})
	// The lock a forget of alice takes first (store's userLock).
	const aliceLock = `hashtextextended('memoryd.user.' || current_schema() || '.' || $1, 0)`
	// A backend holding alice's lock shared (pg_locks shows a bigint key
	// as its two halves) and waiting for the tombstones: ingest, past its
	// users' locks.
	e.waitFor("ingest to wait for the tombstones, holding alice's lock", func() (bool, string) {
		var waiting bool
		err := e.watcher().QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks l, (SELECT `+aliceLock+` AS key) k
			WHERE l.locktype = 'advisory' AND l.mode = 'ShareLock' AND l.granted AND l.objsubid = 1
			AND l.classid = (k.key >> 32 & 4294967295)::oid AND l.objid = (k.key & 4294967295)::oid
			AND $2::int = ANY(pg_blocking_pids(l.pid)))`, events.UserToken("alice"), tombs.pid).Scan(&waiting)
		return err == nil && waiting, fmt.Sprint(err)
	})
	// Taken exclusively in the holding transaction: returns once Postgres
	// has rolled ingest's back.
	closed := make(chan error, 1)
	go func() {
		_, err := hold.tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+aliceLock+`)`, events.UserToken("alice"))
		closed <- err
	}()
	e.waitFor("the forget's lock to wait for ingest", func() (bool, string) {
		if len(closed) > 0 {
			return true, ""
		}
		var waiting bool
		err := e.watcher().QueryRow(ctx, `SELECT cardinality(pg_blocking_pids($1)) > 0`, hold.pid).Scan(&waiting)
		return err == nil && waiting, fmt.Sprint(err)
	})
	if len(closed) > 0 {
		t.Fatalf("the forget's lock did not wait for ingest: %v", <-closed)
	}
	if err := tombs.tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("the forget's lock closing the cycle: %v; want ingest's transaction rolled back instead", err)
	}
	if err := hold.tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitDone(1)
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("a batch rolled back for a deadlock was logged as a failure:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "batch rolled back for a lock conflict; redone") {
		t.Fatalf("no batch redone for a deadlock: the cycle was not forced as meant:\n%s", logs.String())
	}
	if f := w.IngestFailing(); f != nil {
		t.Errorf("IngestFailing after a deadlock redone = %+v, want nil", f)
	}
}
