package enricher_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// heldSearchStore is a real store whose searches are held until the test
// releases them, whatever their context says: a tenant's searches that
// occupy every search slot for as long as the test needs.
type heldSearchStore struct {
	*store.Store
	held    atomic.Int64 // searches inside SearchCandidates now
	release chan struct{}
	// entered, if not nil, gets a value for each search that enters
	// SearchCandidates while it has room.
	entered chan struct{}
}

func (s *heldSearchStore) SearchCandidates(ctx context.Context, q store.SearchQuery) (store.Candidates, error) {
	s.held.Add(1)
	defer s.held.Add(-1)
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	return s.Store.SearchCandidates(ctx, q)
}

// searchFlood is n goroutines each sending searches, one after another,
// spread over users, until stop is called.
type searchFlood struct {
	stop       chan struct{}
	wg         sync.WaitGroup
	sent       atomic.Int64
	overloaded atomic.Int64 // answered 500
	unanswered atomic.Int64 // client timeout or transport error
	firstErr   atomic.Value
}

func flood(t *testing.T, h *harness, n, users int) *searchFlood {
	t.Helper()
	f := &searchFlood{stop: make(chan struct{})}
	for i := range n {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for {
				select {
				case <-f.stop:
					return
				default:
				}
				f.sent.Add(1)
				_, err := h.client.Search(ctxT(t), events.SearchRequest{UserID: fmt.Sprintf("tenant-%d", i%users), Query: "dog"})
				var se *events.ServiceError
				switch {
				case err == nil:
				case errors.As(err, &se) && se.Code == 500:
					f.overloaded.Add(1)
				default:
					f.unanswered.Add(1)
					f.firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	return f
}

// end stops the flood, calls then (if any) and waits for the last searches,
// checking that every search got a reply: results or a service error (e.g.
// 500 overloaded), not a client timeout.
func (f *searchFlood) end(t *testing.T, then func()) {
	t.Helper()
	close(f.stop)
	if then != nil {
		then()
	}
	f.wg.Wait()
	if n := f.unanswered.Load(); n > 0 {
		t.Errorf("%d of %d searches not answered, first: %v", n, f.sent.Load(), f.firstErr.Load())
	}
	t.Logf("figures: %d searches answered: %d with results, %d with 500 overloaded",
		f.sent.Load(), f.sent.Load()-f.overloaded.Load()-f.unanswered.Load(), f.overloaded.Load())
}

// maxTook is the longest took_ms the service reported.
func maxTook(replies []events.EnrichReply) float64 {
	m := 0.0
	for _, r := range replies {
		m = max(m, r.TookMS)
	}
	return m
}

// enrichAll sends n enrich requests at once and returns their replies and
// client-side latencies; every one must be answered (degraded allowed).
func enrichAll(t *testing.T, h *harness, n int) (replies []events.EnrichReply, took []time.Duration, answered int) {
	t.Helper()
	replies = make([]events.EnrichReply, n)
	took = make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			replies[i], errs[i] = h.client.Enrich(ctxT(t), events.EnrichRequest{UserID: fmt.Sprintf("user-%d", i%20), Message: "what is my dog called?"})
			took[i] = time.Since(start)
		}()
	}
	wg.Wait()
	unanswered := 0
	for _, err := range errs {
		if err != nil {
			unanswered++
			if unanswered == 1 {
				t.Errorf("enrich not answered: %v", err)
			}
		}
	}
	if unanswered > 0 {
		t.Errorf("%d of %d enrich requests not answered within the client's 10s", unanswered, n)
	}
	return replies, took, n - unanswered
}

func latencies(took []time.Duration) string {
	s := slices.Clone(took)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[int(p*float64(len(s)-1))].Round(time.Millisecond) }
	return fmt.Sprintf("p50 %s, p90 %s, p99 %s, max %s", q(0.5), q(0.9), q(0.99), q(1))
}

// TestEnrichDoesNotWaitBehindSearch: with every search slot held and more
// searches waiting and arriving, enrich requests are all answered from
// memory while those searches are still held, and every search is answered
// too (results or 500 overloaded), none left to the client's timeout.
func TestEnrichDoesNotWaitBehindSearch(t *testing.T) {
	t.Parallel()
	st := &heldSearchStore{Store: storetest.New(t), release: make(chan struct{})}
	for i := range 20 {
		insertContext(t, st.Store, store.ContextWrite{UserID: fmt.Sprintf("user-%d", i), Question: "What is my dog called?", Answer: "Rex", CreatedAt: time.Now()})
	}
	const searchSlots, searches = 8, 70
	h := start(t, st, func(c *enricher.Config) {
		c.Timeout = 2 * time.Second // generous: this test is about waiting behind search, not speed
		c.MaxSearchInFlight = searchSlots
	})
	released := false
	releaseOnce := func() {
		if !released {
			released = true
			close(st.release)
		}
	}
	t.Cleanup(releaseOnce)
	searching := flood(t, h, searches, 10)
	eventstest.Eventually(t, fmt.Sprintf("%d searches to reach the store", searchSlots), 10*time.Second, func() (bool, string) {
		n := st.held.Load()
		return n >= searchSlots, fmt.Sprintf("%d reached it", n)
	})

	const enriches = 100
	replies, took, got := enrichAll(t, h, enriches)
	if held := st.held.Load(); held != searchSlots {
		t.Fatalf("%d searches held after the enrich requests, want %d: the test lost its flood", held, searchSlots)
	}
	served := 0
	for _, r := range replies {
		if !r.Degraded && len(r.Context) == 1 && r.Context[0].Answer == "Rex" {
			served++
		} else if r.Reason == "memoryd is overloaded" {
			t.Errorf("enrich answered %q while only search was busy", r.Reason)
		}
	}
	t.Logf("figures: %d of %d enrich replies came while %d searches were held (%d served from memory, the rest degraded); client latency %s; server took_ms at most %.0f",
		got, enriches, searchSlots, served, latencies(took), maxTook(replies))

	searching.end(t, releaseOnce)
}

// TestEnrichAnsweredWhilePostgresHangsUnderSearchFlood: Postgres stops
// answering (connections accepted, nothing sent back) while 70 searchers
// keep every search slot busy and 280 enrich requests arrive at once; every
// enrich is answered degraded within the client's timeout (none waits for
// the search slots, none goes unanswered), and every search gets a reply.
func TestEnrichAnsweredWhilePostgresHangsUnderSearchFlood(t *testing.T) {
	t.Parallel()
	_, url := storetest.Schema(t)
	p := newProxy(t)
	h := start(t, storeVia(t, url, p), withTimeout)
	p.Close()
	p.Open(true) // pooled connections cut; new ones accepted and never answered

	const searchers, enriches = 70, 280
	searching := flood(t, h, searchers, 10)
	eventstest.Eventually(t, fmt.Sprintf("%d searches to be sent", searchers), 10*time.Second, func() (bool, string) {
		n := searching.sent.Load()
		return n >= searchers, fmt.Sprintf("%d sent", n)
	})
	replies, took, got := enrichAll(t, h, enriches)
	degraded := 0
	for _, r := range replies {
		if r.Degraded {
			degraded++
		}
	}
	if degraded != enriches {
		t.Errorf("%d of %d enrich replies degraded with Postgres hung, want all", degraded, enriches)
	}
	t.Logf("figures: %d of %d enrich requests answered (%d degraded) with Postgres hung and %d searchers; client latency %s; server took_ms at most %.0f",
		got, enriches, degraded, searchers, latencies(took), maxTook(replies))
	searching.end(t, nil)
}

// TestToolsDoNotWaitBehindSearch: with every search slot held and more
// searches waiting, the tool endpoints (a write, and reads of facts and
// stats) are answered from their own lane while those searches are still
// held.
func TestToolsDoNotWaitBehindSearch(t *testing.T) {
	t.Parallel()
	const slots = 2
	st := &heldSearchStore{Store: storetest.New(t), release: make(chan struct{}), entered: make(chan struct{}, slots)}
	h := start(t, st, func(c *enricher.Config) {
		c.MaxSearchInFlight = slots
		c.MaxToolInFlight = slots
	})
	released := false
	releaseOnce := func() {
		if !released {
			released = true
			close(st.release)
		}
	}
	t.Cleanup(releaseOnce)
	searching := flood(t, h, 3*slots, 3*slots)
	wait := ctxT(t)
	for range slots {
		select {
		case <-st.entered:
		case <-wait.Done():
			t.Fatalf("only %d searches reached the store", st.held.Load())
		}
	}

	ctx := ctxT(t)
	if _, err := h.client.SetFact(ctx, "user-0", "favorite_color", "teal"); err != nil {
		t.Fatalf("facts.set while every search slot is held: %v", err)
	}
	if f, err := h.client.GetFact(ctx, "user-0", "favorite_color"); err != nil || f.Value != "teal" {
		t.Fatalf("facts.get while every search slot is held: %+v, %v", f, err)
	}
	if facts, err := h.client.ListFacts(ctx, "user-0"); err != nil || len(facts) != 1 {
		t.Fatalf("facts.list while every search slot is held: %+v, %v", facts, err)
	}
	if stats, err := h.client.Stats(ctx, "user-0"); err != nil || stats.Facts != 1 {
		t.Fatalf("stats while every search slot is held: %+v, %v", stats, err)
	}
	if held := st.held.Load(); held != slots {
		t.Fatalf("%d searches held after the tool requests, want %d: the test lost its flood", held, slots)
	}
	searching.end(t, releaseOnce)
}

// endpointRequests is how many requests the service's endpoint name has
// received (micro's stats: counted before the handler dispatches them).
func endpointRequests(t *testing.T, h *harness, name string) int {
	t.Helper()
	var stats micro.Stats
	if err := json.Unmarshal(h.raw(t, "$SRV.STATS.memoryd."+h.svc.ID(), nil).Data, &stats); err != nil {
		t.Fatal(err)
	}
	for _, e := range stats.Endpoints {
		if e.Name == name {
			return e.NumRequests
		}
	}
	t.Fatalf("no endpoint %s in the stats", name)
	return 0
}

// TestOneUsersBurstIsServedInTurn: a frontend sends a burst of requests
// for one user (a memory page loading its lists at once). The service
// works on MaxUserInFlight (4) of them at once and the others wait for
// their turn, so every one is answered with its result (before, the fifth
// and later were answered 500 "overloaded" at once); past 4 worked on and
// 16 waiting, the rest are refused at once.
func TestOneUsersBurstIsServedInTurn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		burst      int
		overloaded int
	}{
		{"a burst within the bound", 12, 0},
		{"past the bound", 25, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := &heldSearchStore{Store: storetest.New(t), release: make(chan struct{})}
			insertContext(t, st.Store, store.ContextWrite{UserID: "alice", Question: "What is my dog called?", Answer: "Rex", CreatedAt: time.Now()})
			h := start(t, st, func(c *enricher.Config) { c.WriteTimeout = 20 * time.Second })
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()
			errs := make([]error, tc.burst)
			var refused atomic.Int64
			var wg sync.WaitGroup
			for i := range tc.burst {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := h.client.Search(ctx, events.SearchRequest{UserID: "alice", Query: "dog"})
					var se *events.ServiceError
					switch {
					case errors.As(err, &se) && se.Overloaded():
						refused.Add(1)
					case err == nil && (len(r.Results) != 1 || r.Results[0].Answer != "Rex"):
						err = fmt.Errorf("results %+v", r.Results)
					}
					errs[i] = err
				}()
			}
			released := false
			defer func() {
				if !released {
					close(st.release)
				}
			}()
			eventstest.Eventually(t, "the burst to arrive while 4 searches are held", 20*time.Second, func() (bool, string) {
				n, held, ref := endpointRequests(t, h, "search"), st.held.Load(), refused.Load()
				return n == tc.burst && held == 4 && ref == int64(tc.overloaded),
					fmt.Sprintf("%d received, %d held, %d refused", n, held, ref)
			})
			close(st.release)
			released = true
			wg.Wait()
			served := 0
			for _, err := range errs {
				if err == nil {
					served++
				}
			}
			if served != tc.burst-tc.overloaded || refused.Load() != int64(tc.overloaded) {
				t.Fatalf("%d of %d served, %d refused overloaded; want %d refused (errors %v)", served, tc.burst, refused.Load(), tc.overloaded, errs)
			}
		})
	}
}
