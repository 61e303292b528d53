package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/internal/app"
	"github.com/memoryd/memoryd/store"
)

// hybridResults are enrich with hybrid retrieval on next to keyword-only,
// on the same seeded schema and requests, paired.
type hybridResults struct {
	dims     int
	latency  time.Duration // the fake's answer time
	items    int64         // items embedded
	embedded time.Duration // how long the backfill took
	keyword  enrichStats   // the keyword-only service (embedding off)
	hybrid   enrichStats   // the service with embeddings on
	embed    latencies     // the query's embedding call alone, against the fake
	// extra is, per request, hybrid − keyword − its embedding call: what
	// the hybrid path costs apart from the query's own embedding.
	extra      latencies
	embedCalls int // requests the fake answered during the paired run
	profile    string
}

// hybridPhase embeds every item of the schema at url with an in-process
// fake embeddings server (backfill jobs run in this process, until every
// item has its vector), starts a second enrich service with embeddings on,
// and measures enrich against both services one request at a time, paired:
// for each request the keyword-only enrich, the hybrid enrich and the
// query's embedding alone, in rotating order.
func (b *bench) hybridPhase(ctx context.Context, url, prefix string, clients []*nats.Conn, c corpus, r *corpusResults) error {
	o, e := b.o, b.env
	h := &hybridResults{dims: o.embedDims, latency: o.embedLatency}
	r.hybrid = h
	srv := embeddingtest.Start()
	defer srv.Close()
	srv.SetDims(o.embedDims)
	emb := embedding.Config{BaseURL: srv.URL, Model: fmt.Sprintf("membench-fake-%d", o.embedDims)}

	// Backfill: the items get their vectors as the service's own embed
	// jobs, run here; the fake answers at once while they run.
	logf("hybrid: embedding every item (%d dimensions) with the fake server", o.embedDims)
	stream := "BENCH_" + strings.ToUpper(b.id) + "_EMBED_" + strings.ToUpper(c.name())
	e.addStream(stream)
	bfCfg := app.Config{NATS: app.NATSConfig{URL: o.natsURL}, Store: store.Config{URL: url}, Prefix: prefix + "_embed", Stream: stream,
		Embed: emb, Logger: quietLogger()}
	bfCfg.Worker.EmbedSweepInterval = -1
	bfCfg.Worker.EmbedWorkers = 4
	bf, err := app.New(bfCfg)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if _, err := bf.EmbedBackfill(ctx, app.EmbedOptions{Work: true}); err != nil {
		_ = bf.Stop(context.Background())
		return fmt.Errorf("backfill: %w", err)
	}
	last := time.Now()
	err = bf.WaitEmbedded(ctx, "", store.EmbeddingMark{}, func(n, _ store.EmbeddingCount) {
		h.items = n.Items
		if time.Since(last) > 10*time.Second {
			logf("  %d of %d items embedded", n.Embedded, n.Items)
			last = time.Now()
		}
	})
	h.embedded = time.Since(t0)
	if serr := bf.Stop(context.Background()); err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("waiting for the vectors: %w", err)
	}
	logf("  %d items embedded in %s", h.items, h.embedded.Round(time.Millisecond))
	srv.SetDelay(o.embedLatency)

	// The hybrid service, on a connection of its own, labelled for the
	// profile.
	hprefix := prefix + "_hybrid"
	var (
		hnc  *nats.Conn
		hsvc *app.App
		serr error
	)
	pprof.Do(ctx, pprof.Labels("side", "hybrid"), func(ctx context.Context) {
		if hnc, serr = nats.Connect(o.natsURL, nats.Name("membench-hybrid")); serr != nil {
			return
		}
		if hsvc, serr = app.New(app.Config{Conn: hnc, Store: store.Config{URL: url}, Prefix: hprefix, Embed: emb, Logger: quietLogger()}); serr != nil {
			return
		}
		serr = hsvc.StartEnrich(ctx)
	})
	if hnc != nil {
		defer hnc.Close()
	}
	if serr != nil {
		return serr
	}
	defer hsvc.Stop(context.Background())
	if err := hnc.Flush(); err != nil {
		return err
	}
	// The query embedding alone, as the service's query client sends it
	// (one text a request).
	qe, err := embedding.New(embedding.Config{BaseURL: srv.URL, Model: emb.Model, BatchSize: 1, Timeout: 5 * time.Second})
	if err != nil {
		return err
	}

	cl := events.NewClient(clients[0], prefix)
	hcl := events.NewClient(clients[0], hprefix)
	// Warm-up: one of the measured requests of each of their users, so
	// that the service has read each user's vectors into its cache once (a
	// user's first request pays one read of them), as the keyword-only
	// service met them already in the floor run.
	reqs := c.workload(o.singleRequests, 2)
	logf("hybrid: warm-up (the service reads each user's vectors once)")
	var ws enrichStats
	warmed := map[int]bool{}
	for _, rq := range reqs {
		if warmed[rq.user] {
			continue
		}
		warmed[rq.user] = true
		if _, err := enrichOne(ctx, hcl, rq, &ws); err != nil {
			return err
		}
	}
	if ws.degraded > 0 {
		logf("  %d of %d warm-up replies degraded", ws.degraded, ws.n)
	}

	var prof *os.File
	if o.hybridProfile != "" {
		h.profile = o.hybridProfile
		if len(o.corpora()) > 1 {
			h.profile += "." + c.name()
		}
		if prof, err = os.Create(h.profile); err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(prof); err != nil {
			return err
		}
		defer logf("wrote CPU profile %s (go tool pprof -top -tagfocus=side=hybrid %s)", h.profile, h.profile)
	}
	logf("hybrid: %d requests, 1 client, paired (keyword-only, hybrid, query embedding alone)", len(reqs))
	calls0 := srv.Requests()
	for i, rq := range reqs {
		var kw, hy, em time.Duration
		for k := range 3 {
			switch (i + k) % 3 {
			case 0:
				if kw, err = enrichOne(ctx, cl, rq, &h.keyword); err != nil {
					return err
				}
			case 1:
				if hy, err = enrichOne(ctx, hcl, rq, &h.hybrid); err != nil {
					return err
				}
			case 2:
				t := time.Now()
				if _, err := qe.Embed(ctx, []string{rq.message}); err != nil {
					return fmt.Errorf("query embedding: %w", err)
				}
				em = time.Since(t)
			}
		}
		h.keyword.lat = append(h.keyword.lat, kw)
		h.hybrid.lat = append(h.hybrid.lat, hy)
		h.embed = append(h.embed, em)
		h.extra = append(h.extra, hy-kw-em)
	}
	h.embedCalls = srv.Requests() - calls0
	if prof != nil {
		pprof.StopCPUProfile()
		prof.Close()
	}
	// Every hybrid request answered in time embeds its message: the fake
	// saw one call for it and one for the embedding alone (a degraded
	// reply may have given up before embedding). Fewer means the service
	// did not embed (hybrid off), and the figures would be keyword-only
	// twice.
	if want := len(reqs) + h.hybrid.n - h.hybrid.degraded; h.embedCalls < want {
		return fmt.Errorf("hybrid: the fake embeddings server answered %d calls for %d paired requests (%d hybrid replies degraded), want at least %d: the service did not embed its queries",
			h.embedCalls, len(reqs), h.hybrid.degraded, want)
	}
	logf("  keyword p50 %s p99 %s; hybrid p50 %s p99 %s; embedding alone p50 %s; hybrid extra p50 %s",
		ms(h.keyword.lat.pct(.5)), ms(h.keyword.lat.pct(.99)), ms(h.hybrid.lat.pct(.5)), ms(h.hybrid.lat.pct(.99)), ms(h.embed.pct(.5)), ms(h.extra.pct(.5)))
	return nil
}

// rows writes the hybrid on/off rows of a corpus's table.
func (h *hybridResults) rows(row func(measure, value, floor, ratio, target, met string)) {
	row(fmt.Sprintf("enrich, hybrid off (keyword only) / on, 1 client, paired; fake embeddings server, %d dimensions, answering in %s", h.dims, h.latency),
		fmt.Sprintf("off p50 %s, p99 %s; on p50 %s, p99 %s", ms(h.keyword.lat.pct(.5)), ms(h.keyword.lat.pct(.99)), ms(h.hybrid.lat.pct(.5)), ms(h.hybrid.lat.pct(.99))),
		fmt.Sprintf("query embedding alone p50 %s, p99 %s", ms(h.embed.pct(.5)), ms(h.embed.pct(.99))), "", "", "")
	extra := h.extra.pct(.5)
	row("hybrid's cost apart from the query embedding (on − off − embedding, per request)",
		fmt.Sprintf("per request p50 %s, p90 %s; of the medians (on p50 − off p50 − embedding p50) %s", ms(extra), ms(h.extra.pct(.9)),
			ms(h.hybrid.lat.pct(.5)-h.keyword.lat.pct(.5)-h.embed.pct(.5))),
		fmt.Sprintf("%d items embedded in %s (backfill jobs, this process)", h.items, h.embedded.Round(time.Second)), "", "≤ 1 ms at p50", check(extra <= time.Millisecond))
	row("hybrid off / on: replies with context, degraded", fmt.Sprintf("off %.0f%%, %d; on %.0f%%, %d", pctOf(h.keyword.hits, h.keyword.n), h.keyword.degraded,
		pctOf(h.hybrid.hits, h.hybrid.n), h.hybrid.degraded), "", "", "", "")
}
