package enricher_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// heldRecallStore is a real store whose enrich reads (Recall) of one user
// are held until the test releases them (or, with holdConn, the request's
// deadline passes): that user's enrich requests occupy whatever the service
// lets them occupy for as long as the test needs. With holdConn each held
// read holds one of the store's pool connections, as a slow recall
// statement does.
type heldRecallStore struct {
	*store.Store
	user     string
	holdConn bool
	held     atomic.Int64
	release  chan struct{}
}

func (s *heldRecallStore) Recall(ctx context.Context, q store.RecallQuery) ([]store.Fact, store.Candidates, error) {
	if q.UserID == s.user && !s.holdConn {
		s.held.Add(1)
		defer s.held.Add(-1)
		<-s.release
	}
	if q.UserID == s.user && s.holdConn {
		err := s.Store.InTx(ctx, func(pgx.Tx, *store.Store) error {
			s.held.Add(1)
			defer s.held.Add(-1)
			select {
			case <-s.release:
			case <-ctx.Done():
			}
			return nil
		})
		if err != nil {
			return nil, store.Candidates{}, err
		}
	}
	return s.Store.Recall(ctx, q)
}

// enrichBurst sends n enrich requests of user at once; wait on the group
// for their replies.
func enrichBurst(t *testing.T, h *harness, user string, n int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = h.client.Enrich(ctxT(t), events.EnrichRequest{UserID: user, Message: "where do I live?"})
		}()
	}
	return &wg
}

// TestOneUsersEnrichFloodLeavesOtherUsersServed: one user's frontend
// (mallory's, confined by the documented permissions to mallory's subjects)
// sends a burst of enrich requests that the store is slow to answer. Another
// user's enrich is still served from memory: one user cannot take every
// enrich slot and the whole wait, as search and the tool endpoints already
// ensure with MaxUserInFlight (protocol.md, "Degraded replies": "users who
// flood cannot keep another user's first request out"). Found by an
// outside-in isolation audit: with the documented NATS accounts and
// permissions, mallory sending about 3,000 enrich requests a second on
// memory.enrich.mallory made 19 of 20 of alice's enrich replies degraded
// ("memoryd is overloaded" or the store's timeout), where a search flood of
// the same rate left all of alice's searches and enriches served.
func TestOneUsersEnrichFloodLeavesOtherUsersServed(t *testing.T) {
	t.Parallel()
	st := &heldRecallStore{Store: storetest.New(t), user: "mallory", release: make(chan struct{})}
	insertContext(t, st.Store, store.ContextWrite{UserID: "alice", Question: "Where do I live?", Answer: "Lisbon", CreatedAt: time.Now()})
	const slots = 8 // MaxInFlight; the wait holds four times as many
	h := start(t, st, func(c *enricher.Config) {
		c.Timeout = 3 * time.Second
		c.MaxInFlight = slots
	})
	released := false
	releaseOnce := func() {
		if !released {
			released = true
			close(st.release)
		}
	}
	t.Cleanup(releaseOnce)

	// More than the lane holds worked on and waiting: 5 × 8 = 40.
	const burst = 5 * slots
	wg := enrichBurst(t, h, "mallory", burst)
	eventstest.Eventually(t, "mallory's burst to reach the service and the store", 10*time.Second, func() (bool, string) {
		n := endpointRequests(t, h, "enrich")
		return n >= burst && st.held.Load() > 0, fmt.Sprintf("%d received, %d held in the store", n, st.held.Load())
	})

	r, err := h.client.Enrich(ctxT(t), events.EnrichRequest{UserID: "alice", Message: "where do I live?"})
	held := st.held.Load()
	releaseOnce()
	wg.Wait()
	if err != nil {
		t.Fatalf("alice's enrich during mallory's burst: %v", err)
	}
	if r.Degraded || len(r.Context) != 1 || r.Context[0].Answer != "Lisbon" {
		t.Errorf("alice's enrich during mallory's burst of %d (%d held in the store): degraded=%v reason=%q context=%+v; want her memory, as for search and the tools", burst, held, r.Degraded, r.Reason, r.Context)
	}
}

// TestOneUsersEnrichFloodLeavesStoreConnections: each enrich worked on
// holds a store connection while it reads, so one user's requests may hold
// at most half of the store's connections by default (Config.StoreConns).
// Found by measuring a heavy user (7,000 items) with 8 enrich requests at
// once beside a light user at 10/s (membench --flood, docs/performance.md):
// with 16 of one user worked on over enrich's 8 connections, 24 and 115 of
// the light user's replies (of 300 and 299) were degraded, waiting for a
// connection behind the heavy user's reads; with at most 4, 0 and 4 of 300.
func TestOneUsersEnrichFloodLeavesStoreConnections(t *testing.T) {
	t.Parallel()
	st := &heldRecallStore{Store: storetest.New(t), user: "mallory", holdConn: true, release: make(chan struct{})}
	insertContext(t, st.Store, store.ContextWrite{UserID: "alice", Question: "Where do I live?", Answer: "Lisbon", CreatedAt: time.Now()})
	h := start(t, st, func(c *enricher.Config) {
		c.StoreConns = storetest.MaxConns // the pool storetest.New opens
	})
	var once sync.Once
	releaseAll := func() { once.Do(func() { close(st.release) }) }
	t.Cleanup(releaseAll)

	const burst = 20
	wg := enrichBurst(t, h, "mallory", burst)
	half := int64(storetest.MaxConns / 2)
	eventstest.Eventually(t, "mallory's burst to reach the service and hold connections", 10*time.Second, func() (bool, string) {
		n := endpointRequests(t, h, "enrich")
		return n >= burst && st.held.Load() >= half, fmt.Sprintf("%d received, %d holding a connection", n, st.held.Load())
	})

	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	r, err := h.client.Enrich(ctx, events.EnrichRequest{UserID: "alice", Message: "where do I live?"})
	held := st.held.Load()
	releaseAll()
	wg.Wait()
	if held > half {
		t.Errorf("mallory's enrich requests held %d of the store's %d connections; want at most half", held, storetest.MaxConns)
	}
	if err != nil {
		t.Fatalf("alice's enrich during mallory's burst: %v", err)
	}
	if r.Degraded || len(r.Context) != 1 || r.Context[0].Answer != "Lisbon" {
		t.Errorf("alice's enrich while mallory's requests held %d of %d store connections: degraded=%v reason=%q context=%+v; want her memory", held, storetest.MaxConns, r.Degraded, r.Reason, r.Context)
	}
}
