package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/events"
)

// The flood measurement (--flood): one user with a large memory sends
// enrich requests from several closed-loop clients at once (a frontend
// loading a page, retrying, or a tenant flooding in one user's name), while
// another user sends 10 enrich requests a second, open loop, as a frontend
// does on each new message. What it shows is what the flood costs the other
// user: the share of their replies degraded and their latency, for each
// --enrich-max-user-in-flight given (--flood-limits; 0 is serve's default).
// Each setting runs against a fresh `memoryd serve` on the same seeded
// schema, one after another for each number of clients (--flood-clients).

// floodCorpus is two users of LongMemEval-S haystack sessions: user 0 has
// every session's pairs up to heavyItems, user 1 lightItems from the
// sessions after those. Messages are the dataset's questions.
type floodCorpus struct {
	lme                    *longMemEval
	heavyItems, lightItems int
}

func (c *floodCorpus) name() string { return "flood" }
func (c *floodCorpus) describe() string {
	return fmt.Sprintf("LongMemEval-S haystack sessions: one user of %d real turn pairs, one of %d", c.heavyItems, c.lightItems)
}
func (c *floodCorpus) users() int { return 2 }
func (c *floodCorpus) facts() int { return 5 }

// items takes user u's pairs from the sessions in order: user 0's from the
// first, user 1's from the session after the last that user 0 took from.
func (c *floodCorpus) items(u int) []seedItem {
	take := func(from, want int) (out []seedItem, next int) {
		si := from
		for ; si < len(c.lme.sessions) && len(out) < want; si++ {
			s := c.lme.sessions[si]
			for k, p := range s.pairs[:min(len(s.pairs), want-len(out))] {
				out = append(out, seedItem{question: p[0], answer: p[1], at: s.date.Add(time.Duration(k) * time.Minute), conversation: fmt.Sprintf("s-%d", si)})
			}
		}
		return out, si
	}
	heavy, next := take(0, c.heavyItems)
	if u == 0 {
		return heavy
	}
	light, _ := take(next, c.lightItems)
	return light
}

func (c *floodCorpus) workload(n int, seed uint64) []request {
	r := rand.New(rand.NewPCG(seed, 0x66))
	out := make([]request, n)
	for i := range out {
		out[i] = request{user: r.IntN(2), message: c.lme.questions[r.IntN(len(c.lme.questions))]}
	}
	return out
}

// floodRun is one setting's figures.
type floodRun struct {
	clients, limit    int
	light             latencies
	lightDegraded     int
	lightErrors       int
	heavyN, heavyFull int64
	elapsed           time.Duration
	load              string
}

// parseInts reads a comma-separated list of non-negative integers.
func parseInts(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--%s: %q is not a list of non-negative integers", flagName, s)
		}
		out = append(out, n)
	}
	return out, nil
}

func (b *bench) floodPhase(ctx context.Context) error {
	o, e := b.o, b.env
	clients, err := parseInts("flood-clients", o.floodClients)
	if err != nil {
		return err
	}
	limits, err := parseInts("flood-limits", o.floodLimits)
	if err != nil {
		return err
	}
	lme, err := loadLongMemEval(o.data, o)
	if err != nil {
		return err
	}
	c := &floodCorpus{lme: lme, heavyItems: 7000, lightItems: 300}
	d := 30 * time.Second
	if o.quick {
		c.heavyItems, d = 2000, 5*time.Second
	}
	schema, url := o.schema, ""
	if schema == "" {
		schema = "bench_" + b.id + "_flood"
		if url, err = e.newSchema(ctx, schema); err != nil {
			return err
		}
		logf("seeding %s into schema %s", c.describe(), schema)
		if err := seed(ctx, url, c); err != nil {
			return err
		}
	} else {
		url = e.schemaURL(schema) // one --flood --keep seeded
		logf("reusing seeded schema %s", schema)
	}
	if o.keep {
		e.keep = schema
	}
	nc, err := nats.Connect(o.natsURL, nats.Name("membench-flood"))
	if err != nil {
		return err
	}
	defer nc.Close()
	// One prefix for every run, the schema's: a database serves one, and a
	// reused schema keeps the prefix it was first served under.
	prefix := schema
	stream := strings.ToUpper(prefix)
	e.addStream(stream)
	var runs []floodRun
	for _, n := range clients {
		for _, limit := range limits {
			var extra []string
			if limit > 0 {
				extra = []string{"--enrich-max-user-in-flight", strconv.Itoa(limit)}
			}
			p, err := startServe(ctx, e, url, prefix, stream, extra...)
			if err != nil {
				return err
			}
			if err := waitService(ctx, nc, prefix); err != nil {
				p.stop()
				return fmt.Errorf("%w\n%s", err, p.logTail())
			}
			logf("flood: %d clients of one user, --enrich-max-user-in-flight %d, %s", n, limit, d)
			r := floodOnce(ctx, nc, prefix, c, n, d)
			r.clients, r.limit = n, limit
			p.stop()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			runs = append(runs, r)
		}
	}
	fmt.Println(floodTable(c, d, runs))
	return nil
}

// floodOnce runs n closed-loop clients of user 0 and 10 requests a second
// of user 1 for d.
func floodOnce(ctx context.Context, nc *nats.Conn, prefix string, c *floodCorpus, n int, d time.Duration) floodRun {
	cl := events.NewClient(nc, prefix)
	var (
		stop              atomic.Bool
		heavyN, heavyFull atomic.Int64
		wg                sync.WaitGroup
	)
	qs := c.lme.questions
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 0x68))
			for !stop.Load() && ctx.Err() == nil {
				reply, err := cl.Enrich(ctx, events.EnrichRequest{UserID: userID(0), Message: qs[r.IntN(len(qs))]})
				heavyN.Add(1)
				if err == nil && !reply.Degraded {
					heavyFull.Add(1)
				}
			}
		}()
	}
	var (
		mu  sync.Mutex
		run = floodRun{load: loadAvg()}
		lw  sync.WaitGroup
	)
	r := rand.New(rand.NewPCG(7, 0x6c))
	tick := time.NewTicker(100 * time.Millisecond)
	start := time.Now()
	for time.Since(start) < d && ctx.Err() == nil {
		<-tick.C
		msg := qs[r.IntN(len(qs))]
		lw.Add(1)
		go func() {
			defer lw.Done()
			t0 := time.Now()
			reply, err := cl.Enrich(ctx, events.EnrichRequest{UserID: userID(1), Message: msg})
			took := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			run.light = append(run.light, took)
			switch {
			case err != nil:
				run.lightErrors++
			case reply.Degraded:
				run.lightDegraded++
			}
		}()
	}
	tick.Stop()
	lw.Wait()
	stop.Store(true)
	wg.Wait()
	run.elapsed = time.Since(start)
	run.heavyN, run.heavyFull = heavyN.Load(), heavyFull.Load()
	return run
}

func floodTable(c *floodCorpus, d time.Duration, runs []floodRun) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "### One user's enrich flood beside another user (membench --flood)\n\n%s; the flooding user's clients closed loop, the other user 10 requests/s for %s; serve's defaults otherwise.\n\n", c.describe(), d)
	sb.WriteString("| flooding clients | --enrich-max-user-in-flight | other user p50 | p90 | p99 | other user degraded | flooding user served (not degraded) | load average |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		limit := strconv.Itoa(r.limit)
		if r.limit == 0 {
			limit = "default"
		}
		deg := fmt.Sprintf("%d of %d", r.lightDegraded, len(r.light))
		if r.lightErrors > 0 {
			deg += fmt.Sprintf(" (+%d errors)", r.lightErrors)
		}
		fmt.Fprintf(&sb, "| %d | %s | %s | %s | %s | %s | %.0f/s of %.0f/s | %s |\n", r.clients, limit,
			ms(r.light.pct(0.50)), ms(r.light.pct(0.90)), ms(r.light.pct(0.99)), deg,
			float64(r.heavyFull)/r.elapsed.Seconds(), float64(r.heavyN)/r.elapsed.Seconds(), r.load)
	}
	return sb.String()
}
