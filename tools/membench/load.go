package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// floorLoad is the 8-client run's floor: the same clients, each a closed
// loop of the NATS echo (same payload) then the query enrich needs, alone,
// through pgx (store.Recall and the ranking); it returns loops per second.
func floorLoad(ctx context.Context, conns []*nats.Conn, prefix, url string, c corpus, d time.Duration) (float64, error) {
	s, err := store.Open(ctx, store.Config{URL: url, MaxConns: int32(len(conns)), Logger: quietLogger()})
	if err != nil {
		return 0, err
	}
	defer s.Close()
	var (
		wg    sync.WaitGroup
		n     atomic.Int64
		stop  atomic.Bool
		mu    sync.Mutex
		first error
	)
	start := time.Now()
	time.AfterFunc(d, func() { stop.Store(true) })
	for i, nc := range conns {
		wg.Add(1)
		go pprof.Do(ctx, pprof.Labels("side", "client"), func(ctx context.Context) {
			defer wg.Done()
			reqs := c.workload(2000, 700+uint64(i))
			for j := 0; !stop.Load() && ctx.Err() == nil; j++ {
				rq := reqs[j%len(reqs)]
				data, err := json.Marshal(events.EnrichRequest{UserID: userID(rq.user), Message: rq.message})
				if err == nil {
					_, err = nc.RequestWithContext(ctx, prefix+".echo."+userID(rq.user), data)
				}
				if err == nil {
					q := store.RecallQuery{SearchQuery: store.SearchQuery{UserID: userID(rq.user), Keywords: enricher.Keywords(rq.message)}, MaxFacts: enricher.DefaultMaxFacts, FirstFacts: enricher.CoreFactKeys}
					var cands store.Candidates
					if _, cands, err = s.Recall(ctx, q); err == nil {
						items := enricher.Rank(cands, time.Time{}, events.DefaultThreshold, events.DefaultMaxResults)
						if !cands.Texts {
							_, err = s.ContextTexts(ctx, q.UserID, items)
						}
					}
				}
				if err != nil {
					mu.Lock()
					first = cmp(first, err)
					mu.Unlock()
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds(), first
}

// underIngest is enrich measured while serve ingests.
type underIngest struct {
	rate       float64 // turns/s asked for; 0: as fast as publishing goes
	turns      int
	elapsed    time.Duration // first publish until every turn is processed
	ingestRate float64       // turns processed per second
	enrich     enrichStats
}

// ingestTurns makes n turns from c's texts, for 200 users of their own
// (ids "<label>-iNNN", apart from the seeded users).
func ingestTurns(c corpus, label string, n int) []events.Turn {
	out := make([]events.Turn, 0, n)
	at := time.Now().UTC().Add(-time.Hour)
	for u := 0; len(out) < n; u++ {
		for _, it := range c.items(u % c.users()) {
			if len(out) == n {
				break
			}
			i := len(out)
			q, a := it.question, it.answer
			if len(q) > events.MaxUserMessageBytes {
				q = q[:events.MaxUserMessageBytes]
			}
			if len(a) > events.MaxAssistantResponseBytes {
				a = a[:events.MaxAssistantResponseBytes]
			}
			out = append(out, events.Turn{
				ID: fmt.Sprintf("%s-%d", label, i), UserID: fmt.Sprintf("%s-i%03d", label, i%200), ConversationID: fmt.Sprintf("%s-c%d", label, i/10),
				UserMessage: q, AssistantResponse: a, Timestamp: at.Add(time.Duration(i) * time.Millisecond),
			})
		}
	}
	return out
}

// enrichUnderIngest publishes turns to serve's stream, at rate turns/s or
// as fast as JetStream takes them (rate 0), while one client sends enrich
// requests one after another, until every turn is processed.
func enrichUnderIngest(ctx context.Context, e *env, s *store.Store, nc *nats.Conn, prefix string, c corpus, label string, rate float64, n int) (underIngest, error) {
	res := underIngest{rate: rate, turns: n}
	// Users and event ids of this run alone, so that a rerun on a kept
	// schema (--schema) ingests new turns rather than duplicates.
	label += "-" + randomID()
	turns := ingestTurns(c, label, n)
	var users []string
	seen := map[string]bool{}
	msgs := make([]*nats.Msg, len(turns))
	for i, t := range turns {
		if !seen[t.UserID] {
			seen[t.UserID] = true
			users = append(users, t.UserID)
		}
		if err := t.Validate(); err != nil {
			return res, err
		}
		data, err := json.Marshal(t)
		if err != nil {
			return res, err
		}
		msgs[i] = &nats.Msg{Subject: events.TurnSubject(prefix, t.UserID), Data: data, Header: nats.Header{"Nats-Msg-Id": []string{events.MsgID(t.UserID, t.ID)}}}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pubErr := make(chan error, 1)
	start := time.Now()
	go func() {
		for i, m := range msgs {
			if rate > 0 {
				if d := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); d > 0 {
					select {
					case <-time.After(d):
					case <-ctx.Done():
						pubErr <- ctx.Err()
						return
					}
				}
			} else if e.js.PublishAsyncPending() >= 2048 {
				select {
				case <-e.js.PublishAsyncComplete():
				case <-time.After(time.Minute):
					pubErr <- fmt.Errorf("publishing stalled")
					return
				}
			}
			if _, err := e.js.PublishMsgAsync(m); err != nil {
				pubErr <- err
				return
			}
		}
		select {
		case <-e.js.PublishAsyncComplete():
			pubErr <- nil
		case <-time.After(2 * time.Minute):
			pubErr <- fmt.Errorf("publishing timed out")
		}
	}()

	// Done when every turn of this run is processed; checked apart from the
	// enrich loop so that the loop measures enrich alone.
	var done atomic.Bool
	doneErr := make(chan error, 1)
	go func() {
		defer done.Store(true) // ends the enrich loop, whatever happened
		published := false
		deadline := time.Now().Add(10 * time.Minute)
		for {
			select {
			case err := <-pubErr:
				if err != nil {
					doneErr <- err
					return
				}
				published = true
			case <-time.After(100 * time.Millisecond):
			}
			var processed int
			// By this run's users (an index read), not by a pattern on the
			// event ids: that scanned the whole table ten times a second,
			// Postgres work of the bench's own measured beside enrich.
			if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM turns WHERE user_id = ANY($1) AND status = 'processed'`, users).Scan(&processed); err != nil {
				doneErr <- err
				return
			}
			if published && processed == n {
				res.elapsed = time.Since(start)
				doneErr <- nil
				return
			}
			if time.Now().After(deadline) {
				doneErr <- fmt.Errorf("under ingest: %d of %d turns processed", processed, n)
				return
			}
		}
	}()

	cl := events.NewClient(nc, prefix)
	reqs := c.workload(5000, 11)
	for j := 0; !done.Load(); j++ {
		d, err := enrichOne(ctx, cl, reqs[j%len(reqs)], &res.enrich)
		if err != nil {
			return res, err
		}
		res.enrich.lat = append(res.enrich.lat, d)
		// A frontend calls enrich once per model call, not back to back:
		// a short gap keeps this client from being a load of its own.
		time.Sleep(2 * time.Millisecond)
	}
	if err := <-doneErr; err != nil {
		return res, err
	}
	res.ingestRate = float64(n) / res.elapsed.Seconds()
	return res, nil
}
