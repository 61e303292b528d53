package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// results is everything one run measured.
type results struct {
	corpora []*corpusResults

	riverNoop              float64
	ingestRules, ingestLLM ingestRun
	ingestLLMTuned         ingestRun // with o.llmTuned, when set
	ingestLLMSlow          ingestRun // against a fake answering in o.llmLatency
	replayElapsed          time.Duration
	replayPerSecond        float64
	replayRSS              float64

	elapsed time.Duration
	machine string
	load    string // /proc/loadavg at the end
}

// corpusResults is what the enrich phase measured on one corpus.
type corpusResults struct {
	name, describe                   string
	lengths                          lengthDist
	contextRows, factRows, seedUsers int64
	bytesPer1k, heapPer1k            float64
	termsPer1k                       float64 // context_terms (migrations/025), heap and index

	enrich1     enrichStats // 1 client
	echo, query latencies   // floor
	queryRows   float64     // context items ranked into a reply, on average
	queryCands  float64     // candidates the query read (items matching a keyword), on average
	enrich8     enrichStats // 8 clients, in-process service
	cpu8        cpuShare
	floor8      float64 // echo + query loops per second, same 8 clients

	cold           enrichStats // the first requests after serve starts
	serveEnrich    enrichStats // 8 clients against memoryd serve
	serveEnrichRSS float64
	underIngest    []underIngest

	hybrid *hybridResults // with --embed fake
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

func check(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// corpusTargets are the enrich targets for a corpus.
type corpusTargets struct {
	p50, p99 time.Duration
	ratio    float64
	label    string
}

func targetsFor(name string) corpusTargets {
	if name == "synthetic" {
		return corpusTargets{1200 * time.Microsecond, 4 * time.Millisecond, 1.5, "≤ 1.2 ms; ≤ 1.5× floor"}
	}
	return corpusTargets{2 * time.Millisecond, 8 * time.Millisecond, 1.5, "≤ 2 ms; ≤ 1.5× floor"}
}

func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func (r *results) markdown(o *options) string {
	var b strings.Builder
	cmd := strings.Join(append([]string{"go -C tools run ./membench"}, os.Args[1:]...), " ")
	mode := "full"
	if o.quick {
		mode = "quick (smoke sizes; targets are for the full run)"
	}
	fmt.Fprintf(&b, "Measured %s by `%s`, mode %s, in %s.  \n", time.Now().UTC().Format("2006-01-02 15:04 MST"), cmd, mode, r.elapsed.Round(time.Second))
	fmt.Fprintf(&b, "Machine: %s; load average at the end %s.  \n", r.machine, r.load)
	b.WriteString("Postgres and NATS are the local servers `make test` uses; everything runs on this one machine.\n")
	for _, c := range r.corpora {
		r.corpusTable(&b, o, c)
	}
	b.WriteString("\n### Ingest, replay, memory\n\n")
	b.WriteString("| measure | value | floor, same run | ratio | target | |\n|---|---|---|---|---|---|\n")
	row := func(measure, value, floor, ratio, target, met string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", measure, value, floor, ratio, target, met)
	}
	if !o.skipIngest {
		row(fmt.Sprintf("ingest, offline extractor (%d turns, %d users)", r.ingestRules.turns, o.ingestUsers),
			fmt.Sprintf("%.0f turns/s (%s, %.1f Postgres transactions a turn)", r.ingestRules.perSecond, r.ingestRules.elapsed.Round(time.Millisecond), r.ingestRules.xactsPerTurn),
			fmt.Sprintf("River %.0f no-op jobs/s", r.riverNoop), fmt.Sprintf("%.2f×", r.ingestRules.perSecond/r.riverNoop), "≥ 1,500 turns/s", check(r.ingestRules.perSecond >= 1500))
		llm := func(label string, run ingestRun, target string, met string) {
			row(label, fmt.Sprintf("%.0f turns/s (%d turns in %s, %d model calls, %.1f Postgres transactions a turn)", run.perSecond, run.turns, run.elapsed.Round(time.Millisecond), run.llmCalls, run.xactsPerTurn),
				fmt.Sprintf("River %.0f no-op jobs/s", r.riverNoop), fmt.Sprintf("%.2f×", run.perSecond/r.riverNoop), target, met)
		}
		llm("ingest, LLM extractor, instant fake server, default settings", r.ingestLLM, "≥ 1,000 turns/s", check(r.ingestLLM.perSecond >= 1000))
		if o.llmTuned != "" {
			llm(fmt.Sprintf("ingest, LLM extractor, instant fake server, `%s`", o.llmTuned), r.ingestLLMTuned, "≥ 1,000 turns/s", check(r.ingestLLMTuned.perSecond >= 1000))
		}
		if o.llmLatency > 0 {
			want := float64(o.llmConcurrency) / o.llmLatency.Seconds()
			ratio := r.ingestLLMSlow.perSecond / want
			row(fmt.Sprintf("ingest, LLM extractor, fake answering in %s, default settings", o.llmLatency),
				fmt.Sprintf("%.1f turns/s (%d turns in %s)", r.ingestLLMSlow.perSecond, r.ingestLLMSlow.turns, r.ingestLLMSlow.elapsed.Round(time.Millisecond)),
				fmt.Sprintf("concurrency %d / %s = %.1f/s", o.llmConcurrency, o.llmLatency, want), fmt.Sprintf("%.2f×", ratio), "within 20%", check(ratio >= 0.8 && ratio <= 1.2))
		}
		row("replay --reset, offline extractor", fmt.Sprintf("%.0f turns/s (%s)", r.replayPerSecond, r.replayElapsed.Round(time.Millisecond)),
			"", "", "≥ 5,000 turns/s", check(r.replayPerSecond >= 5000))
	}
	var rss []string
	peak := 0.0
	for _, c := range r.corpora {
		rss = append(rss, fmt.Sprintf("%.0f MiB serving and ingesting on %s (%d items)", c.serveEnrichRSS, c.name, c.contextRows))
		peak = max(peak, c.serveEnrichRSS)
	}
	if !o.skipIngest {
		rss = append(rss, fmt.Sprintf("%.0f MiB ingesting (offline)", r.ingestRules.rss), fmt.Sprintf("%.0f MiB ingesting (LLM)", r.ingestLLM.rss),
			fmt.Sprintf("replay process %.0f MiB", r.replayRSS))
		peak = max(peak, r.ingestRules.rss, r.ingestLLM.rss)
	}
	row("`memoryd serve` peak RSS (VmHWM)", strings.Join(rss, "; "), "", "", "≤ 150 MB", check(peak*1.048576 <= 150))
	return b.String()
}

func (r *results) corpusTable(b *strings.Builder, o *options, c *corpusResults) {
	t := targetsFor(c.name)
	fmt.Fprintf(b, "\n### Corpus: %s\n\n%s.  \n%d items, %d facts, %d users; %s.\n\n", c.name, c.describe, c.contextRows, c.factRows, c.seedUsers, c.lengths)
	b.WriteString("| measure | value | floor, same run | ratio | target | |\n|---|---|---|---|---|---|\n")
	row := func(measure, value, floor, ratio, target, met string) {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", measure, value, floor, ratio, target, met)
	}
	e1 := c.enrich1.lat
	floor := c.echo.pct(.5) + c.query.pct(.5)
	ratio := float64(e1.pct(.5)) / float64(floor)
	row("enrich p50, 1 client", ms(e1.pct(.5)),
		fmt.Sprintf("echo p50 %s + query p50 %s = %s", ms(c.echo.pct(.5)), ms(c.query.pct(.5)), ms(floor)),
		fmt.Sprintf("%.2f×", ratio), t.label, check(e1.pct(.5) <= t.p50 && ratio <= t.ratio))
	row("enrich p50 split, 1 client", fmt.Sprintf("in the service (took_ms) %s, the rest NATS and client", ms(c.enrich1.took.pct(.5))),
		fmt.Sprintf("reply %.0f bytes on average", float64(c.enrich1.replyBytes)/float64(max(c.enrich1.n, 1))), "", "", "")
	row("enrich p90, 1 client", ms(e1.pct(.9)), fmt.Sprintf("echo %s + query %s", ms(c.echo.pct(.9)), ms(c.query.pct(.9))), "", "", "")
	row("enrich p99, 1 client", ms(e1.pct(.99)), fmt.Sprintf("echo %s + query %s", ms(c.echo.pct(.99)), ms(c.query.pct(.99))), "", "≤ "+ms(t.p99), check(e1.pct(.99) <= t.p99))
	fr := c.enrich8.perSecond / c.floor8
	row(fmt.Sprintf("enrich throughput, %d clients", o.clients), fmt.Sprintf("%.0f/s", c.enrich8.perSecond),
		fmt.Sprintf("echo + query, same %d clients: %.0f/s", o.clients, c.floor8), fmt.Sprintf("%.2f×", fr), "≥ 0.8× floor", check(fr >= 0.8))
	row(fmt.Sprintf("enrich latency, %d clients", o.clients), fmt.Sprintf("p50 %s, p99 %s", ms(c.enrich8.lat.pct(.5)), ms(c.enrich8.lat.pct(.99))), "", "", "", "")
	cs := c.cpu8
	perReq := func(pct float64) string { // CPU ms per request, of a machine with ncpu cores
		return fmt.Sprintf("%.3f ms", pct/100*float64(runtime.NumCPU())*1000/c.enrich8.perSecond)
	}
	row(fmt.Sprintf("CPU during the %d-client run", o.clients), fmt.Sprintf("machine %.0f%% busy: bench process (clients + enrich service) %.0f%%, Postgres %.0f%%, nats-server %.0f%%",
		cs.busyPct, cs.selfPct, cs.postgresPct, cs.natsPct),
		fmt.Sprintf("CPU per request: bench process %s, Postgres %s, nats-server %s", perReq(cs.selfPct), perReq(cs.postgresPct), perReq(cs.natsPct)), "", "", "")
	row("enrich replies with context / degraded", fmt.Sprintf("%.0f%% / %d", pctOf(c.enrich1.hits+c.enrich8.hits, c.enrich1.n+c.enrich8.n), c.enrich1.degraded+c.enrich8.degraded),
		fmt.Sprintf("query read %.1f candidates (items holding a keyword) and ranked %.2f into the reply, on average", c.queryCands, c.queryRows), "", "", "")
	if c.hybrid != nil {
		c.hybrid.rows(row)
	}
	row(fmt.Sprintf("cold start: the first %d requests after `memoryd serve` starts, 1 client", c.cold.n),
		fmt.Sprintf("p50 %s, p99 %s, max %s; %d degraded", ms(c.cold.lat.pct(.5)), ms(c.cold.lat.pct(.99)), ms(c.cold.lat.pct(1)), c.cold.degraded),
		"", "", "no degraded reply", check(c.cold.degraded == 0 && c.cold.n > 0))
	row(fmt.Sprintf("enrich via `memoryd serve`, %d clients", o.clients), fmt.Sprintf("%.0f/s, p50 %s, p99 %s", c.serveEnrich.perSecond, ms(c.serveEnrich.lat.pct(.5)), ms(c.serveEnrich.lat.pct(.99))), "", "", "", "")
	for _, u := range c.underIngest {
		what, target, met := "full rate", "enrich keeps priority", ""
		if u.rate > 0 {
			what = fmt.Sprintf("%.0f turns/s", u.rate)
			target = "p99 ≤ 20 ms, 0 degraded"
			met = check(u.enrich.lat.pct(.99) <= 20*time.Millisecond && u.enrich.degraded == 0)
		}
		row(fmt.Sprintf("enrich while `memoryd serve` ingests %d turns at %s (offline extractor), 1 client", u.turns, what),
			fmt.Sprintf("p50 %s, p99 %s, max %s (in the service: p50 %s, p99 %s); %d of %d degraded (%.1f%%)", ms(u.enrich.lat.pct(.5)), ms(u.enrich.lat.pct(.99)), ms(u.enrich.lat.pct(1)),
				ms(u.enrich.took.pct(.5)), ms(u.enrich.took.pct(.99)), u.enrich.degraded, u.enrich.n, pctOf(u.enrich.degraded, u.enrich.n)),
			fmt.Sprintf("ingest %.0f turns/s (all processed in %s)", u.ingestRate, u.elapsed.Round(time.Millisecond)), "", target, met)
	}
	row("Postgres size per 1,000 context items", fmt.Sprintf("%.2f MiB (heap %.2f MiB; rest indexes and TOAST), and %.2f MiB of term statistics (context_terms)",
		c.bytesPer1k/(1<<20), c.heapPer1k/(1<<20), c.termsPer1k/(1<<20)), "", "", "", "")
}

func pctOf(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b) * 100
}
