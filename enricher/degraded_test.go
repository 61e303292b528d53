package enricher_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// testTimeout is the service's enrich bound in the tests that make the
// store fail, hang or block.
const testTimeout = 100 * time.Millisecond

func withTimeout(c *enricher.Config) { c.Timeout = testTimeout }

// reasons records what the service tells its Observer of each reply: ""
// or why it was degraded. The reply is published after the Observer is
// told, so a test that got its reply reads its reason here.
type reasons struct {
	mu  sync.Mutex
	got []string
}

func (r *reasons) Enriched(_, _ time.Duration, degraded string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, degraded)
}

// observed sets c's Observer to r, with withTimeout.
func (r *reasons) observed(c *enricher.Config) { withTimeout(c); c.Observer = r }

// want fails the test unless the replies so far were degraded for want.
func (r *reasons) want(t *testing.T, want ...string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Equal(r.got, want) {
		t.Fatalf("observer told %q, want %q", r.got, want)
	}
}

// enrichDegraded sends one enrich request and checks it is answered with an
// empty, degraded reply. The promise tested is that a reply comes although
// the store does not answer (the client's own 10s budget, ctxT, fails the
// test otherwise), not how fast: wall-clock bounds fail on a busy machine.
func enrichDegraded(t *testing.T, h *harness, user string) events.EnrichReply {
	t.Helper()
	r := enrich(t, h, events.EnrichRequest{UserID: user, Message: "what is my dog called?"})
	if !r.Degraded || r.Reason == "" || len(r.Facts) != 0 || len(r.Context) != 0 || r.Injection != "" {
		t.Fatalf("want an empty degraded reply, got %+v", r)
	}
	return r
}

func TestDegradedWhenPostgresIsUnreachable(t *testing.T) {
	t.Parallel()
	_, url := storetest.Schema(t)
	st := storeAt(t, url, "127.0.0.1:1") // nothing listens on port 1
	var obs reasons
	// A budget of seconds: a refused connect answers at once, and on a
	// loaded machine 100 ms could pass first, making the reason a timeout
	// (a flake hunt's list).
	h := start(t, st, func(c *enricher.Config) { obs.observed(c); c.Timeout = 5 * time.Second })
	r := enrichDegraded(t, h, "u")
	if r.Reason != "memory store unavailable" {
		t.Fatalf("reason %q", r.Reason)
	}
	obs.want(t, enricher.DegradedStoreUnavailable)
	// Other endpoints fail plainly, with a 500, not a hang.
	_, err := h.client.Search(ctxT(t), events.SearchRequest{UserID: "u", Query: "dog"})
	if se, ok := err.(*events.ServiceError); !ok || se.Code != 500 {
		t.Fatalf("search with Postgres down: %v, want a 500", err)
	}
	// Validation still wins over degradation.
	msg := h.raw(t, h.prefix+".enrich.u", []byte(`{"user_id":"u"}`))
	if code, _ := errorCode(t, msg); code != 400 {
		t.Fatalf("bad request with Postgres down: code %d", code)
	}
}

func TestDegradedWhenPostgresHangs(t *testing.T) {
	t.Parallel()
	_, url := storetest.Schema(t)
	p := newProxy(t)
	p.Close()
	p.Open(true) // accepts, never answers
	var obs reasons
	// Start waits up to WriteTimeout (5 s by default) to warm the pool
	// before it starts anyway; enrich's bound is Timeout (100ms).
	h := start(t, storeVia(t, url, p), func(c *enricher.Config) { obs.observed(c); c.WriteTimeout = time.Second })
	r := enrichDegraded(t, h, "u")
	if r.Reason != "memory store did not answer within 100ms" {
		t.Fatalf("reason %q", r.Reason)
	}
	enrichDegraded(t, h, "u") // and again, with the first connect still stuck
	obs.want(t, enricher.DegradedTimeout, enricher.DegradedTimeout)
}

func TestDegradedWhenStoreIgnoresItsContext(t *testing.T) {
	t.Parallel()
	bs := blockingStore{release: make(chan struct{})}
	h := start(t, bs, withTimeout)
	t.Cleanup(func() { close(bs.release) }) // runs before the service's Stop
	enrichDegraded(t, h, "u")
}

func TestDegradedWhenSaturated(t *testing.T) {
	t.Parallel()
	bs := blockingStore{release: make(chan struct{})}
	var obs reasons
	h := start(t, bs, func(c *enricher.Config) { obs.observed(c); c.MaxInFlight = 1 })
	t.Cleanup(func() { close(bs.release) })
	enrichDegraded(t, h, "u") // holds the only slot
	r := enrichDegraded(t, h, "u")
	if r.Reason != "memoryd is overloaded" {
		t.Fatalf("reason %q", r.Reason)
	}
	obs.want(t, enricher.DegradedTimeout, enricher.DegradedOverloaded)
}

func TestRecoversWhenPostgresReturns(t *testing.T) {
	t.Parallel()
	// A migrated schema of the pool: the test is about the outage, not
	// the migrations, which cost Postgres about 0.7 s of CPU on a fresh one.
	url := storetest.Migrated(t)
	direct := storetest.Unmigrated(t, url) // migrated
	insertContext(t, direct, store.ContextWrite{UserID: "u", Question: "What is my dog called?", Answer: "Rex", CreatedAt: time.Now()})
	p := newProxy(t)
	st := storeVia(t, url, p)
	// A generous budget: this test is about recovering, not speed; the
	// outage's degraded replies come at once (connections refused).
	h := start(t, st, func(c *enricher.Config) { c.Timeout = 2 * time.Second })
	// Start warmed the pool: the first enrich's budget is spent on its
	// query, not on connection setup.
	if idle := st.Pool().Stat().IdleConns(); idle < 1 {
		t.Fatalf("after Start the pool holds %d idle connections", idle)
	}
	req := events.EnrichRequest{UserID: "u", Message: "what is my dog called?"}
	untilAnswered := func(what string) {
		t.Helper()
		// The pool may spend requests finding its old connections dead or
		// opening new ones; each is still answered (enrich fails the test on
		// an error), and within a generous budget one is not degraded.
		eventstest.Eventually(t, what+": a reply not degraded", 30*time.Second, func() (bool, string) {
			r := enrich(t, h, req)
			if !r.Degraded && (len(r.Context) != 1 || r.Context[0].Answer != "Rex") {
				t.Fatalf("%s: %+v", what, r)
			}
			return !r.Degraded, "degraded: " + r.Reason
		})
	}
	untilAnswered("before the outage")

	p.Close() // Postgres gone: pooled connections cut, new ones refused
	if r := enrichDegraded(t, h, "u"); r.Reason != "memory store unavailable" {
		t.Fatalf("reason %q", r.Reason)
	}
	enrichDegraded(t, h, "u")

	p.Open(false)
	// The degraded replies set the service re-warming the pool, which
	// succeeds once Postgres is back, without waiting for a request.
	eventstest.Eventually(t, "the pool to be re-warmed after Postgres returned", 30*time.Second, func() (bool, string) {
		stat := st.Pool().Stat()
		return stat.IdleConns() >= 1, fmt.Sprintf("%+v", stat)
	})
	untilAnswered("after Postgres returned")
}

// TestDiskFullWriteSaysSo: a write Postgres refuses for a full disk
// (SQLSTATE 53100) is answered with what the caller can do, wait, and that
// nothing was changed, not "memory store unavailable" (a disk-full walk's
// `memory clear` said only that).
func TestDiskFullWriteSaysSo(t *testing.T) {
	t.Parallel()
	_, url := storetest.Schema(t)
	st := storetest.Open(t, url)
	if _, err := st.Pool().Exec(ctxT(t), `
CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'could not extend file "base/16384/16754": No space left on device' USING ERRCODE = 'disk_full';
END $$;
CREATE TRIGGER disk_full BEFORE INSERT ON context FOR EACH ROW EXECUTE FUNCTION disk_full();`); err != nil {
		t.Fatal(err)
	}
	h := start(t, st, nil)
	_, err := h.client.Store(ctxT(t), events.StoreRequest{UserID: "u", Question: "Where do I live?", Answer: "Oslo."})
	se, ok := err.(*events.ServiceError)
	if !ok || se.Code != 500 || !strings.Contains(se.Description, "the database's disk is full") || !strings.Contains(se.Description, "nothing was changed") {
		t.Fatalf("store on a full disk: %v; want a 500 saying the disk is full and nothing was changed", err)
	}
	if n, err := st.CountContext(ctxT(t), "u"); err != nil || n != 0 {
		t.Fatalf("items after the refused store: %d, %v; want none", n, err)
	}
}
