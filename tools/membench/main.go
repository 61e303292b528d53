// Command membench measures memoryd on the machine it runs on: enrich
// latency and throughput over a seeded store, ingest and replay throughput
// through a real `memoryd serve` process, resident memory and Postgres size.
// Every figure is printed next to a floor measured in the same run on the
// same servers (a NATS echo, the bare full-text query, River no-op jobs), so
// that a slow or shared machine shows up in the floor as well as in the
// figure.
//
// It is a benchmark, not a test: it never fails because of a figure. It
// exits non-zero only when something does not work (a service is missing, a
// turn is not processed, a request fails).
//
// Usage:
//
//	go -C tools run ./membench [--quick] [--write ../docs/performance.md]
//
// It needs the Postgres and NATS servers that `make test` uses. Everything it
// creates (schemas bench_*, streams BENCH_*) is removed at the end.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/memoryd/memoryd/extractor"
)

// options are membench's flags.
type options struct {
	quick      bool
	dbURL      string
	natsURL    string
	write      string
	cpuProfile string
	memorydBin string
	serveFlags string // extra flags for every memoryd serve the bench starts
	schema     string // reuse a seeded schema (kept with --keep)
	keep       bool
	skipIngest bool
	skipEnrich bool
	corpus     string // synthetic, longmemeval or both
	data       string // the LongMemEval-S dev file

	skipUnderIngest bool
	ingestRate      float64 // the fixed rate of the under-ingest run, turns/s

	llmTuned       string        // serve flags for a second instant-fake LLM run
	llmLatency     time.Duration // the slow fake's answer time (0: no such run)
	llmConcurrency int           // serve's default --llm-concurrency, for the slow run's expectation
	llmProfile     string        // CPU profile of serve during the instant-fake LLM ingest

	embed         string        // "off" or "fake": hybrid on/off measured with a fake embeddings server
	embedDims     int           // the fake's dimensions
	embedLatency  time.Duration // the fake's answer time for query embeddings
	hybridProfile string        // CPU profile of the paired hybrid run

	flood        bool   // run the flood measurement alone (flood.go)
	floodClients string // numbers of the flooding user's clients
	floodLimits  string // --enrich-max-user-in-flight values (0: serve's default)

	heavy       bool   // run the heavy-user read measurement alone (heavy.go)
	heavyShares string // the pruning shares it compares

	// sizes, set from quick
	users, items, facts         int
	singleRequests              int
	loadDuration, serveDuration time.Duration
	ingestTurns, ingestUsers    int
	clients                     int
	realItems                   int           // items of the realistic corpus, at least
	underIngestTurns            int           // turns of the full-rate under-ingest run
	underIngestDuration         time.Duration // length of the fixed-rate run
	llmSlowTurns                int           // turns against the slow fake
}

// profileSeconds is how long the serve CPU profile of --llm-cpuprofile runs.
func (o *options) profileSeconds() int {
	if o.quick {
		return 5
	}
	return 15
}

// corpora are the corpora --corpus selects.
func (o *options) corpora() []string {
	if o.corpus == "both" {
		return []string{"synthetic", "longmemeval"}
	}
	return []string{o.corpus}
}

func (o *options) sizes() {
	o.clients = 8
	if o.quick {
		o.users, o.items, o.facts = 1_000, 50_000, 5_000
		o.singleRequests = 1_000
		o.loadDuration, o.serveDuration = 3*time.Second, 2*time.Second
		o.ingestTurns, o.ingestUsers = 2_000, 100
		o.realItems = 20_000
		o.underIngestTurns, o.underIngestDuration = 3_000, 5*time.Second
		o.llmSlowTurns = 100
		return
	}
	o.users, o.items, o.facts = 10_000, 1_000_000, 50_000
	o.singleRequests = 2_000
	o.loadDuration, o.serveDuration = 15*time.Second, 5*time.Second
	o.ingestTurns, o.ingestUsers = 20_000, 1_000
	o.realItems = 500_000
	o.underIngestTurns, o.underIngestDuration = 20_000, 20*time.Second
	o.llmSlowTurns = 400
}

func main() {
	var o options
	flag.BoolVar(&o.quick, "quick", false, "small sizes for a smoke run (under a minute)")
	flag.StringVar(&o.dbURL, "database-url", envOr("MEMORYD_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"Postgres database to create the bench schemas in (env MEMORYD_TEST_DATABASE_URL)")
	flag.StringVar(&o.natsURL, "nats-url", envOr("MEMORYD_TEST_NATS_URL", "nats://127.0.0.1:4222"), "NATS server with JetStream (env MEMORYD_TEST_NATS_URL)")
	flag.StringVar(&o.write, "write", "", "also write the table into this markdown file, between the membench markers (e.g. docs/performance.md)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the 8-client enrich run here (server side labelled side=server)")
	flag.StringVar(&o.memorydBin, "memoryd", "", "memoryd binary to run (default: go build ./cmd/memoryd into a temp dir)")
	flag.StringVar(&o.serveFlags, "serve-flags", "", `extra flags for every memoryd serve the bench starts (e.g. "--backpressure-latency -1s")`)
	flag.StringVar(&o.schema, "schema", "", "reuse this already seeded schema instead of seeding (see --keep)")
	flag.BoolVar(&o.keep, "keep", false, "keep the seeded schema at the end and print its name (for --schema)")
	flag.BoolVar(&o.skipIngest, "skip-ingest", false, "skip the ingest, replay and River floor measurements")
	flag.BoolVar(&o.skipEnrich, "skip-enrich", false, "skip seeding and the enrich measurements")
	flag.StringVar(&o.corpus, "corpus", "both", "enrich corpus: synthetic (generated short items), longmemeval (real conversations, see --data) or both")
	flag.StringVar(&o.data, "data", filepath.Join(envOr("MEMEVAL_DATA", "/work/shared/data"), "longmemeval-s-dev.json.gz"),
		"the LongMemEval-S dev file the realistic corpus is built from, read in place, never copied (env MEMEVAL_DATA: its directory, as for memeval)")
	flag.BoolVar(&o.skipUnderIngest, "skip-under-ingest", false, "skip measuring enrich while serve ingests")
	flag.Float64Var(&o.ingestRate, "ingest-rate", 500, "turns/s of the fixed-rate under-ingest run")
	flag.StringVar(&o.llmTuned, "llm-tuned", "", `serve flags for a second LLM ingest against the instant fake (e.g. "--llm-concurrency 32 --workers 64")`)
	flag.DurationVar(&o.llmLatency, "llm-latency", 300*time.Millisecond, "answer time of the slow fake LLM run (0: no such run)")
	flag.StringVar(&o.llmProfile, "llm-cpuprofile", "", "write a CPU profile of memoryd serve during the instant-fake LLM ingest here (through its --pprof endpoint)")
	flag.StringVar(&o.embed, "embed", "off", "off, or fake: also embed every item with an in-process fake OpenAI-compatible embeddings server and measure enrich with hybrid retrieval on next to keyword-only, paired")
	flag.IntVar(&o.embedDims, "embed-dims", 768, "dimensions of the fake embeddings server's vectors (--embed fake)")
	flag.DurationVar(&o.embedLatency, "embed-latency", 0, "answer time of the fake embeddings server for query embeddings (--embed fake; the backfill runs without it)")
	flag.StringVar(&o.hybridProfile, "hybrid-cpuprofile", "", "write a CPU profile of the paired hybrid run here (--embed fake; the hybrid service labelled side=hybrid)")
	flag.BoolVar(&o.flood, "flood", false, "measure only one user's enrich flood beside another user's enrich, against memoryd serve, for each --flood-clients and --flood-limits")
	flag.StringVar(&o.floodClients, "flood-clients", "8,24", "--flood: closed-loop enrich clients of the flooding user, a comma-separated list")
	flag.StringVar(&o.floodLimits, "flood-limits", "16,0", "--flood: serve's --enrich-max-user-in-flight for each run, a comma-separated list (0: serve's default)")
	flag.BoolVar(&o.heavy, "heavy", false, "measure only enrich's keyword read of one user of ~13,000 LongMemEval items, in process: full and pruned, for each --heavy-shares")
	flag.StringVar(&o.heavyShares, "heavy-shares", "0.1,0.15,0.2,0.25,0.3", "--heavy: the shares of the user's items above which a lexeme is skipped, a comma-separated list")
	flag.Parse()
	o.sizes()
	o.llmConcurrency = extractor.LLMConfig{}.WithDefaults().MaxConcurrency
	if o.corpus != "both" && o.corpus != "synthetic" && o.corpus != "longmemeval" {
		fmt.Fprintln(os.Stderr, "membench: --corpus must be synthetic, longmemeval or both")
		os.Exit(2)
	}
	if o.embed != "off" && o.embed != "fake" {
		fmt.Fprintln(os.Stderr, "membench: --embed must be off or fake")
		os.Exit(2)
	}
	if o.embedDims < 1 || o.embedLatency < 0 {
		fmt.Fprintln(os.Stderr, "membench: --embed-dims must be positive and --embed-latency not negative")
		os.Exit(2)
	}
	if o.schema != "" && o.corpus == "both" && !o.flood && !o.heavy {
		fmt.Fprintln(os.Stderr, "membench: --schema reuses one corpus's schema: name it with --corpus")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, &o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "membench:", err)
		os.Exit(1)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// logf reports progress on stderr; the table goes to stdout.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// quietLogger is what in-process memoryd components log to: errors only.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

func randomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// bench holds what one run creates, so that it can all be removed.
type bench struct {
	o       *options
	id      string
	env     *env
	results results
}

func run(ctx context.Context, o *options) error {
	b := &bench{o: o, id: randomID()}
	start := time.Now()
	var err error
	if b.env, err = newEnv(ctx, o); err != nil {
		return err
	}
	defer b.env.cleanup()
	if o.heavy {
		logf("membench --heavy: load average %s", loadAvg())
		return b.heavyPhase(ctx)
	}
	if o.flood {
		logf("membench --flood: load average %s", loadAvg())
		return b.floodPhase(ctx)
	}
	logf("membench %s: corpus %s; ingest %d turns over %d users; GOMAXPROCS=%d; load average %s",
		map[bool]string{true: "quick", false: "full"}[o.quick], o.corpus, o.ingestTurns, o.ingestUsers, runtime.GOMAXPROCS(0), loadAvg())

	if !o.skipEnrich {
		for _, name := range o.corpora() {
			var c corpus = synthetic{o}
			if name == "longmemeval" {
				lme, err := loadLongMemEval(o.data, o)
				if err != nil {
					return err
				}
				c = lme
			}
			if err := b.enrichPhase(ctx, c); err != nil {
				return fmt.Errorf("enrich (%s): %w", name, err)
			}
		}
	}
	if !o.skipIngest {
		if err := b.ingestPhase(ctx); err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	b.results.elapsed = time.Since(start)
	b.results.machine = machineNotes()
	b.results.load = loadAvg()
	table := b.results.markdown(o)
	fmt.Println(table)
	if o.write != "" {
		if err := writeDoc(o.write, table); err != nil {
			return err
		}
		logf("wrote %s", o.write)
	}
	return nil
}

const (
	beginMarker = "<!-- membench:begin (generated by go -C tools run ./membench --write ../docs/performance.md) -->"
	endMarker   = "<!-- membench:end -->"
)

// writeDoc replaces the text between the membench markers of path (the
// markers included), or appends it when the file has none.
func writeDoc(path, table string) error {
	block := beginMarker + "\n\n" + table + "\n" + endMarker
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	doc := string(data)
	i := strings.Index(doc, "<!-- membench:begin")
	j := strings.Index(doc, endMarker)
	if i >= 0 && j > i {
		doc = doc[:i] + block + doc[j+len(endMarker):]
	} else {
		if doc != "" && !strings.HasSuffix(doc, "\n") {
			doc += "\n"
		}
		doc += "\n" + block + "\n"
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}
