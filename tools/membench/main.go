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
	"runtime"
	"strings"
	"syscall"
	"time"
)

// options are membench's flags.
type options struct {
	quick      bool
	dbURL      string
	natsURL    string
	write      string
	cpuProfile string
	memorydBin string
	schema     string // reuse a seeded schema (kept with --keep)
	keep       bool
	skipIngest bool
	skipEnrich bool

	// sizes, set from quick
	users, items, facts         int
	singleRequests              int
	loadDuration, serveDuration time.Duration
	ingestTurns, ingestUsers    int
	clients                     int
}

func (o *options) sizes() {
	o.clients = 8
	if o.quick {
		o.users, o.items, o.facts = 1_000, 50_000, 5_000
		o.singleRequests = 1_000
		o.loadDuration, o.serveDuration = 3*time.Second, 2*time.Second
		o.ingestTurns, o.ingestUsers = 2_000, 100
		return
	}
	o.users, o.items, o.facts = 10_000, 1_000_000, 50_000
	o.singleRequests = 2_000
	o.loadDuration, o.serveDuration = 15*time.Second, 5*time.Second
	o.ingestTurns, o.ingestUsers = 20_000, 1_000
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
	flag.StringVar(&o.schema, "schema", "", "reuse this already seeded schema instead of seeding (see --keep)")
	flag.BoolVar(&o.keep, "keep", false, "keep the seeded schema at the end and print its name (for --schema)")
	flag.BoolVar(&o.skipIngest, "skip-ingest", false, "skip the ingest, replay and River floor measurements")
	flag.BoolVar(&o.skipEnrich, "skip-enrich", false, "skip seeding and the enrich measurements")
	flag.Parse()
	o.sizes()

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
	logf("membench %s: %d users, %d context items, %d facts; ingest %d turns over %d users; GOMAXPROCS=%d",
		map[bool]string{true: "quick", false: "full"}[o.quick], o.users, o.items, o.facts, o.ingestTurns, o.ingestUsers, runtime.GOMAXPROCS(0))

	if !o.skipEnrich {
		if err := b.enrichPhase(ctx); err != nil {
			return fmt.Errorf("enrich: %w", err)
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
