package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"golang.org/x/sync/errgroup"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// startChanges runs a change publisher on nc until the test ends or the
// returned stop is called. Its poll interval is an hour: the changes it
// publishes in a test were noticed through the commits' notifications.
func (e *env) startChanges(nc *nats.Conn) (*worker.Changes, func()) {
	e.t.Helper()
	c, err := worker.NewChanges(worker.ChangesConfig{Conn: nc, Store: e.store, Prefix: e.prefix,
		Logger: slog.New(slog.DiscardHandler), PollInterval: time.Hour, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond})
	if err != nil {
		e.t.Fatal(err)
	}
	return c, e.run("changes", c)
}

// changeLog collects the changes a subscriber received.
type changeLog struct {
	mu  sync.Mutex
	got []events.Change
	err error
}

// subscribe collects userID's changes from the time it returns.
func (e *env) subscribe(userID string) *changeLog {
	e.t.Helper()
	l := &changeLog{}
	sub, err := events.NewClient(e.nc, e.prefix).Changes(userID, func(c events.Change, err error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if err != nil {
			l.err = err
			return
		}
		l.got = append(l.got, c)
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := e.nc.Flush(); err != nil { // the server has the subscription
		e.t.Fatal(err)
	}
	return l
}

// wait waits until n changes arrived and returns them.
func (l *changeLog) wait(e *env, n int) []events.Change {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("%d changes", n), func() (bool, string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.got) >= n || l.err != nil, fmt.Sprintf("%d changes, error %v", len(l.got), l.err)
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		e.t.Fatal(l.err)
	}
	return slices.Clone(l.got)
}

// TestChangesPublishedInCommitOrder: concurrent writers of one user; the
// subscriber sees exactly the committed changes, numbered 1..n in the order
// it receives them, nothing of a rolled-back transaction, and nothing of
// another user.
func TestChangesPublishedInCommitOrder(t *testing.T) {
	e := setup(t)
	alice, bob := e.subscribe("alice"), e.subscribe("bob@example.com")
	e.startChanges(e.nc)
	const writers, each = 4, 8
	var (
		g       errgroup.Group
		written = map[string]bool{}
	)
	for w := range writers {
		for i := range each {
			written[fmt.Sprintf("answer %d.%d", w, i)] = true
		}
		g.Go(func() error {
			for i := range each {
				if _, _, err := e.store.StoreContext(e.ctx, store.ContextWrite{UserID: "alice", Question: "q", Answer: fmt.Sprintf("answer %d.%d", w, i)}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	g.Go(func() error {
		boom := errors.New("rolled back")
		err := e.store.InTx(e.ctx, func(_ pgx.Tx, q *store.Store) error {
			if _, _, err := q.StoreContext(e.ctx, store.ContextWrite{UserID: "alice", Question: "q", Answer: "never committed"}); err != nil {
				return err
			}
			return boom
		})
		if errors.Is(err, boom) {
			return nil
		}
		return fmt.Errorf("the rolled-back write: %w", err)
	})
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	// A last change after all of them: once it is in, nothing else is on
	// the way (one publisher sends a user's changes in order).
	if _, _, err := e.store.SetFact(e.ctx, "bob@example.com", "name", "Bob"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.store.SetFact(e.ctx, "alice", "name", "Alice"); err != nil {
		t.Fatal(err)
	}
	got := alice.wait(e, writers*each+1)
	if len(got) != writers*each+1 {
		t.Fatalf("%d changes, want %d", len(got), writers*each+1)
	}
	for i, c := range got {
		if c.Seq != int64(i+1) || c.UserID != "alice" || c.At.IsZero() {
			t.Fatalf("change %d = %+v: want seq %d of alice, with its time", i, c, i+1)
		}
		if i == len(got)-1 {
			if c.Type != events.ChangeFactSet || c.Key != "name" || c.Value != "Alice" {
				t.Fatalf("last change = %+v, want the name set", c)
			}
			continue
		}
		if c.Type != events.ChangeContextStored || !written[c.Answer] {
			t.Fatalf("change %d = %+v: not one of the committed items", i, c)
		}
		delete(written, c.Answer)
	}
	if b := bob.wait(e, 1); len(b) != 1 || b[0].UserID != "bob@example.com" || b[0].Seq != 1 {
		t.Fatalf("bob's changes = %+v", b)
	}
}

// TestChangesCommittedBeforeAPublisherAreDelivered: a change committed
// while no publisher runs, or while the one running cannot reach NATS (a
// crash between commit and publish), is delivered by the next publisher,
// with the fact's old and new values.
func TestChangesCommittedBeforeAPublisherAreDelivered(t *testing.T) {
	e := setup(t)
	alice := e.subscribe("alice")
	write := func(value, event string, at time.Time) {
		t.Helper()
		if _, err := e.store.UpsertFacts(e.ctx, []store.FactWrite{{UserID: "alice", Key: "location", Value: value, SourceAt: at, EventID: event}}); err != nil {
			t.Fatal(err)
		}
	}
	write("Paris", "e1", t0)
	// A publisher whose connection is gone waits for it and keeps the
	// changes.
	dead := eventstest.Conn(t)
	dead.Close()
	broken, stopBroken := e.startChanges(dead)
	write("Rome", "e2", t0.Add(time.Hour))
	e.waitFor("the broken publisher to wait", func() (bool, string) {
		return broken.Stats().Waits >= 1, fmt.Sprintf("%+v", broken.Stats())
	})
	stopBroken()
	if n, err := e.store.PendingChanges(e.ctx); err != nil || n != 2 {
		t.Fatalf("pending = %d, %v; want both changes", n, err)
	}
	c, _ := e.startChanges(e.nc)
	got := alice.wait(e, 2)
	want := []events.Change{
		{UserID: "alice", Seq: 1, Type: events.ChangeFactSet, Key: "location", Value: "Paris", EventID: "e1"},
		{UserID: "alice", Seq: 2, Type: events.ChangeFactSet, Key: "location", OldValue: "Paris", Value: "Rome", EventID: "e2"},
	}
	for i := range got {
		got[i].At = time.Time{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("changes = %+v, want %+v", got, want)
	}
	e.waitFor("the outbox to empty", func() (bool, string) {
		n, err := e.store.PendingChanges(e.ctx)
		return err == nil && n == 0, fmt.Sprintf("%d pending, %v", n, err)
	})
	if st := c.Stats(); st.Published != 2 {
		t.Fatalf("stats = %+v, want 2 published", st)
	}
}

// TestChangesOfExtractionCarryTheTurn: what extraction stores is published
// with the event id of the turn it came from.
func TestChangesOfExtractionCarryTheTurn(t *testing.T) {
	e := setup(t)
	alice := e.subscribe("alice")
	e.startChanges(e.nc)
	e.start(extractor.NewRules(), nil)
	e.publish(events.Turn{ID: "a1", UserID: "alice", UserMessage: "I live in Paris.", AssistantResponse: "Nice."})
	got := alice.wait(e, 2)
	var fact, item bool
	for _, c := range got {
		switch c.Type {
		case events.ChangeFactSet:
			fact = c.Key == "location" && c.Value == "Paris" && c.EventID == "a1"
		case events.ChangeContextStored:
			item = c.ID != 0 && c.EventID == "a1"
		}
	}
	if !fact || !item {
		t.Fatalf("changes = %+v, want the location and the item, from a1", got)
	}
}

// TestForgetPublishesOnlyTheForget: the changes a forget finds unsent are
// not published; the forget is, numbered after them (seq 2), and seq goes
// on after it.
func TestForgetPublishesOnlyTheForget(t *testing.T) {
	e := setup(t)
	alice := e.subscribe("alice")
	if _, _, err := e.store.SetFact(e.ctx, "alice", "name", "Alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := worker.Forget(e.ctx, e.js, e.store, e.prefix, e.stream, "alice"); err != nil {
		t.Fatal(err)
	}
	e.startChanges(e.nc)
	// A change after the forget: once it arrived, the forget's would have.
	if _, _, err := e.store.SetFact(e.ctx, "alice", "name", "Ada"); err != nil {
		t.Fatal(err)
	}
	got := alice.wait(e, 2)
	if len(got) != 2 || got[0].Type != events.ChangeMemoryForgotten || got[0].Seq != 2 ||
		got[1].Value != "Ada" || got[1].OldValue != "" || got[1].Seq != 3 {
		t.Fatalf("changes = %+v, want the forget then Ada", got)
	}
}

// TestChangeTooLargeForTheServerGoesWithoutItsText: an item whose change
// would exceed the server's max_payload is published without its text,
// and so is a fact whose value (or value replaced) would, both marked
// truncated; text that only HTML escaping would make too large goes whole;
// the user's later changes follow, and another user's are not held up.
func TestChangeTooLargeForTheServerGoesWithoutItsText(t *testing.T) {
	e := setup(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte("max_payload: 4096\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := eventstest.PrivateServer(t, func(port int) []string {
		return []string{"-c", conf, "-a", "127.0.0.1", "-p", strconv.Itoa(port)}
	})
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	logs := map[string]*changeLog{}
	for _, u := range []string{"alice", "bob"} {
		l := &changeLog{}
		logs[u] = l
		sub, err := events.NewClient(nc, e.prefix).Changes(u, func(c events.Change, err error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			if err != nil {
				l.err = err
				return
			}
			l.got = append(l.got, c)
		})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// All of alice's changes commit before bob's: she is first in the
	// outbox.
	id, _, err := e.store.StoreContext(e.ctx, store.ContextWrite{UserID: "alice", Question: "long", Answer: strings.Repeat("x", 5000)})
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("y", 1<<20)
	escaped := strings.Repeat("<&>", 1000) // 3000 bytes, 18000 escaped
	for _, f := range [][2]string{{"bio", huge}, {"bio", huge + "z"}, {"motto", escaped}, {"name", "Alice"}} {
		if _, _, err := e.store.SetFact(e.ctx, "alice", f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := e.store.SetFact(e.ctx, "bob", "name", "Bob"); err != nil {
		t.Fatal(err)
	}
	e.startChanges(nc)
	got := logs["alice"].wait(e, 5)
	if got[0].Type != events.ChangeContextStored || got[0].ID != id || got[0].Question != "" || got[0].Answer != "" || !got[0].Truncated ||
		got[1].Key != "bio" || got[1].Value != "" || !got[1].Truncated || got[1].Seq != 2 ||
		got[2].Key != "bio" || got[2].Value != "" || got[2].OldValue != "" || !got[2].Truncated || got[2].Seq != 3 ||
		got[3].Value != escaped || got[3].Truncated ||
		got[4].Value != "Alice" || got[4].Truncated || got[4].Seq != 5 {
		t.Fatalf("changes = %+v, want the item and the two bio changes without their text, then the motto and name whole", got)
	}
	if got := logs["bob"].wait(e, 1); got[0].Value != "Bob" {
		t.Fatalf("bob's changes = %+v", got)
	}
}

// TestChangesWokenByTheirOwnCommits: a process whose connections do not
// notify (store.Config.QuietChanges) wakes its publisher after its commits
// (Committed): the changes arrive although the publisher polls once an
// hour and no notification is sent.
func TestChangesWokenByTheirOwnCommits(t *testing.T) {
	e := setup(t)
	url := storetest.Migrated(t)
	var pub atomic.Pointer[worker.Changes]
	quiet, err := store.Open(e.ctx, store.Config{URL: url, MaxConns: 4, MinConns: 1, Logger: slog.New(slog.DiscardHandler), QuietChanges: true,
		Committed: func(ctx context.Context) {
			if c := pub.Load(); c != nil {
				c.Committed(ctx)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(quiet.Close)
	e.store = quiet
	alice := e.subscribe("alice")
	c, _ := e.startChanges(e.nc)
	pub.Store(c)
	for i := range 3 {
		if _, _, err := quiet.StoreContext(e.ctx, store.ContextWrite{UserID: "alice", Question: "q", Answer: fmt.Sprintf("answer %d", i)}); err != nil {
			t.Fatal(err)
		}
		if got := alice.wait(e, i+1); got[i].Seq != int64(i+1) {
			t.Fatalf("change %d arrived with seq %d", i+1, got[i].Seq)
		}
	}
}

// A shutdown whose deadline the jobs' hand-back used up stops the change
// publisher all the same, without an error: serve exits 0 on SIGTERM.
func TestChangesStopAfterTheDeadlineIsNotAFailure(t *testing.T) {
	e := setup(t)
	c, _ := e.startChanges(e.nc)
	spent, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Stop(spent); err != nil {
		t.Fatalf("Stop with its deadline spent = %v, want nil: the publisher ended", err)
	}
}
