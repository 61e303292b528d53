package main

import (
	"fmt"
	"runtime"
	"strings"
	"time"
)

// results is everything one run measured.
type results struct {
	contextRows, factRows, seedUsers int64
	bytesPer1k, heapPer1k            float64

	enrich1        enrichStats // 1 client
	echo, query    latencies   // floor
	queryRows      float64     // context rows the query returned, on average
	enrich8        enrichStats // 8 clients, in-process service
	cpu8           cpuShare
	serveEnrich    enrichStats // 8 clients against memoryd serve
	serveEnrichRSS float64

	riverNoop              float64
	ingestRules, ingestLLM ingestRun
	replayElapsed          time.Duration
	replayPerSecond        float64
	replayRSS              float64

	elapsed time.Duration
	machine string
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

func check(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

func (r *results) markdown(o *options) string {
	var b strings.Builder
	cmd := "go -C tools run ./membench"
	if o.quick {
		cmd += " --quick"
	}
	mode := "full"
	if o.quick {
		mode = "quick (smoke sizes; targets are for the full run)"
	}
	fmt.Fprintf(&b, "Measured %s by `%s`, mode %s, in %s.  \n", time.Now().UTC().Format("2006-01-02 15:04 MST"), cmd, mode, r.elapsed.Round(time.Second))
	fmt.Fprintf(&b, "Machine: %s.  \n", r.machine)
	b.WriteString("Postgres and NATS are the local servers `make test` uses; everything runs on this one machine.\n\n")
	b.WriteString("| measure | value | floor, same run | ratio | target | |\n|---|---|---|---|---|---|\n")
	row := func(measure, value, floor, ratio, target, met string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", measure, value, floor, ratio, target, met)
	}
	if !o.skipEnrich {
		e1 := r.enrich1.lat
		floor := r.echo.pct(.5) + r.query.pct(.5)
		ratio := float64(e1.pct(.5)) / float64(floor)
		scale := fmt.Sprintf("%d items, %d facts, %d users", r.contextRows, r.factRows, r.seedUsers)
		row("enrich p50, 1 client ("+scale+")", ms(e1.pct(.5)),
			fmt.Sprintf("echo p50 %s + query p50 %s = %s", ms(r.echo.pct(.5)), ms(r.query.pct(.5)), ms(floor)),
			fmt.Sprintf("%.2f×", ratio), "≤ 1.2 ms; ≤ 1.5× floor", check(e1.pct(.5) <= 1200*time.Microsecond && ratio <= 1.5))
		row("enrich p50 split, 1 client", fmt.Sprintf("in the service (took_ms) %s, the rest NATS and client", ms(r.enrich1.took.pct(.5))),
			fmt.Sprintf("reply %.0f bytes on average", float64(r.enrich1.replyBytes)/float64(max(r.enrich1.n, 1))), "", "", "")
		row("enrich p90, 1 client", ms(e1.pct(.9)), fmt.Sprintf("echo %s + query %s", ms(r.echo.pct(.9)), ms(r.query.pct(.9))), "", "", "")
		row("enrich p99, 1 client", ms(e1.pct(.99)), fmt.Sprintf("echo %s + query %s", ms(r.echo.pct(.99)), ms(r.query.pct(.99))), "", "≤ 4 ms", check(e1.pct(.99) <= 4*time.Millisecond))
		row(fmt.Sprintf("enrich throughput, %d clients", o.clients), fmt.Sprintf("%.0f/s", r.enrich8.perSecond),
			fmt.Sprintf("1 client: %.0f/s", r.enrich1.perSecond), "", "≥ 3,000/s", check(r.enrich8.perSecond >= 3000))
		row(fmt.Sprintf("enrich latency, %d clients", o.clients), fmt.Sprintf("p50 %s, p99 %s", ms(r.enrich8.lat.pct(.5)), ms(r.enrich8.lat.pct(.99))), "", "", "", "")
		c := r.cpu8
		perReq := func(pct float64) string { // CPU ms per request, of a machine with ncpu cores
			return fmt.Sprintf("%.3f ms", pct/100*float64(runtime.NumCPU())*1000/r.enrich8.perSecond)
		}
		row(fmt.Sprintf("CPU during the %d-client run", o.clients), fmt.Sprintf("machine %.0f%% busy: bench process (clients + enrich service) %.0f%%, Postgres %.0f%%, nats-server %.0f%%",
			c.busyPct, c.selfPct, c.postgresPct, c.natsPct),
			fmt.Sprintf("CPU per request: bench process %s, Postgres %s, nats-server %s", perReq(c.selfPct), perReq(c.postgresPct), perReq(c.natsPct)), "", "", "")
		row("enrich replies with context / degraded", fmt.Sprintf("%.0f%% / %d", pctOf(r.enrich1.hits+r.enrich8.hits, r.enrich1.n+r.enrich8.n), r.enrich1.degraded+r.enrich8.degraded),
			fmt.Sprintf("query returned %.2f rows on average", r.queryRows), "", "", "")
		row(fmt.Sprintf("enrich via `memoryd serve`, %d clients", o.clients), fmt.Sprintf("%.0f/s, p50 %s, p99 %s", r.serveEnrich.perSecond, ms(r.serveEnrich.lat.pct(.5)), ms(r.serveEnrich.lat.pct(.99))), "", "", "", "")
	}
	if !o.skipIngest {
		row(fmt.Sprintf("ingest, offline extractor (%d turns, %d users)", r.ingestRules.turns, o.ingestUsers),
			fmt.Sprintf("%.0f turns/s (%s)", r.ingestRules.perSecond, r.ingestRules.elapsed.Round(time.Millisecond)),
			fmt.Sprintf("River %.0f no-op jobs/s", r.riverNoop), fmt.Sprintf("%.2f×", r.ingestRules.perSecond/r.riverNoop), "≥ 1,500 turns/s", check(r.ingestRules.perSecond >= 1500))
		row("ingest, LLM extractor, instant fake server", fmt.Sprintf("%.0f turns/s (%s, %d model calls)", r.ingestLLM.perSecond, r.ingestLLM.elapsed.Round(time.Millisecond), r.ingestLLM.llmCalls),
			fmt.Sprintf("River %.0f no-op jobs/s", r.riverNoop), fmt.Sprintf("%.2f×", r.ingestLLM.perSecond/r.riverNoop), "", "")
		row("replay --reset, offline extractor", fmt.Sprintf("%.0f turns/s (%s)", r.replayPerSecond, r.replayElapsed.Round(time.Millisecond)),
			"", "", "≥ 5,000 turns/s", check(r.replayPerSecond >= 5000))
	}
	var rss []string
	peak := 0.0
	if !o.skipEnrich {
		rss = append(rss, fmt.Sprintf("%.0f MiB serving enrich at %d items", r.serveEnrichRSS, r.contextRows))
		peak = max(peak, r.serveEnrichRSS)
	}
	if !o.skipIngest {
		rss = append(rss, fmt.Sprintf("%.0f MiB ingesting (offline)", r.ingestRules.rss), fmt.Sprintf("%.0f MiB ingesting (LLM)", r.ingestLLM.rss),
			fmt.Sprintf("replay process %.0f MiB", r.replayRSS))
		peak = max(peak, r.ingestRules.rss, r.ingestLLM.rss)
	}
	row("`memoryd serve` peak RSS (VmHWM)", strings.Join(rss, "; "), "", "", "≤ 150 MB", check(peak*1.048576 <= 150))
	if !o.skipEnrich {
		row("Postgres size per 1,000 context items", fmt.Sprintf("%.2f MiB (heap %.2f MiB; rest indexes and TOAST)", r.bytesPer1k/(1<<20), r.heapPer1k/(1<<20)), "", "", "", "")
	}
	return b.String()
}

func pctOf(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b) * 100
}
