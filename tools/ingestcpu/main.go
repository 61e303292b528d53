// Command ingestcpu measures the Postgres CPU time of memoryd's context
// writes and recalls: the CPU time of the one Postgres backend that stores
// LongMemEval turn pairs through store.SaveMemory (the call an extraction
// job's save makes, one transaction a job) and then answers Recall for
// the dataset's questions, per 1,000 items stored and per 1,000 recalls.
// The backend's CPU is read from /proc/<pid>/schedstat (nanoseconds on
// CPU), so Postgres must run on this machine; the figure is CPU, not
// wall-clock time, and so less sensitive to other load than a latency.
//
// Each run stores its items for users of its own (a random run id), so
// runs never deduplicate against each other and repeated runs store the
// same texts. The database must be migrated already (memoryd migrate).
// With --versus-url, a second database (of another release) gets the same
// items and recalls in alternate blocks, on a connection of its own, so
// that both see the same machine: on a shared machine the CPU time of a
// statement varies with the load by more than a release changes it.
//
// Usage:
//
//	go -C tools run ./ingestcpu --database-url URL [--versus-url URL2] [--items 2000] [--per-tx 1] [--recalls 1000]
//
// It prints one line: for each database, the CPU ms per 1,000 items and
// per 1,000 recalls, and with --versus-url the second's ratios to the
// first.
package main

import (
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/store"
)

func main() {
	var (
		dbURL   = flag.String("database-url", os.Getenv("MEMORYD_TEST_DATABASE_URL"), "Postgres connection string of a migrated database (env MEMORYD_TEST_DATABASE_URL)")
		versus  = flag.String("versus-url", "", "a second migrated database (e.g. of another release), measured in alternate blocks of --block items and recalls beside the first")
		block   = flag.Int("block", 100, "with --versus-url, items (and recalls) per block")
		data    = flag.String("data", filepath.Join(dataDir(), "longmemeval-s-dev.json.gz"), "the LongMemEval-S dev file, read in place")
		items   = flag.Int("items", 2000, "context items to store in each database (measured after --warm more)")
		warm    = flag.Int("warm", 50, "items stored first and not measured (the session's first statements and plpgsql compilation)")
		perTx   = flag.Int("per-tx", 1, "items per SaveMemory transaction (a job's items; the worker's default job is one turn)")
		users   = flag.Int("users", 20, "users the items are spread over")
		recalls = flag.Int("recalls", 1000, "Recall calls measured after the ingest (0: none)")
		label   = flag.String("label", "", "label printed at the start of the result line")
	)
	flag.Parse()
	o := options{data: *data, label: *label, items: *items, warm: *warm, perTx: *perTx, users: *users, recalls: *recalls, block: *block}
	if err := run(context.Background(), *dbURL, *versus, o); err != nil {
		fmt.Fprintln(os.Stderr, "ingestcpu:", err)
		os.Exit(1)
	}
}

type options struct {
	data, label                               string
	items, warm, perTx, users, recalls, block int
}

func dataDir() string {
	if d := os.Getenv("MEMEVAL_DATA"); d != "" {
		return d
	}
	return "/work/shared/data"
}

// target is one database measured: its store on one connection, that
// connection's backend, and the CPU time counted so far.
type target struct {
	s          *store.Store
	pid        int
	run        string // the users' prefix
	items, rec int64  // nanoseconds of backend CPU storing, recalling
}

func open(ctx context.Context, url string) (*target, error) {
	s, err := store.Open(ctx, store.Config{URL: url, MaxConns: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	var pid int
	if err := s.Pool().QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		s.Close()
		return nil, fmt.Errorf("backend pid: %w", err)
	}
	id := make([]byte, 4)
	_, _ = rand.Read(id)
	return &target{s: s, pid: pid, run: hex.EncodeToString(id)}, nil
}

func run(ctx context.Context, dbURL, versus string, o options) error {
	if dbURL == "" {
		return fmt.Errorf("no --database-url")
	}
	if o.items < 1 || o.perTx < 1 || o.users < 1 || o.warm < 0 || o.recalls < 0 || o.block < 1 {
		return fmt.Errorf("--items, --per-tx, --users and --block must be positive, --warm and --recalls not negative")
	}
	pairs, questions, err := load(o.data, o.items+o.warm)
	if err != nil {
		return err
	}
	var targets []*target
	for _, url := range []string{dbURL, versus} {
		if url == "" {
			continue
		}
		tg, err := open(ctx, url)
		if err != nil {
			return err
		}
		defer tg.s.Close()
		targets = append(targets, tg)
	}
	step := o.items + o.warm
	if len(targets) > 1 {
		step = o.block
	}
	user := func(tg *target, i int) string { return fmt.Sprintf("cpu-%s-%d", tg.run, i%o.users) }
	at := time.Now().UTC()
	save := func(tg *target, from, to int) error {
		for i := from; i < to; i += o.perTx {
			var ws []store.ContextWrite
			for k := i; k < min(i+o.perTx, to); k++ {
				ws = append(ws, store.ContextWrite{UserID: user(tg, k), Question: pairs[k][0], Answer: pairs[k][1],
					CreatedAt: at.Add(time.Duration(k) * time.Second), EventID: fmt.Sprintf("e-%d", k), ConversationID: fmt.Sprintf("c-%d", k/10)})
			}
			if err := tg.s.SaveMemory(ctx, nil, ws); err != nil {
				return err
			}
		}
		return nil
	}
	recall := func(tg *target, from, to int) error {
		for i := from; i < to; i++ {
			q := store.RecallQuery{SearchQuery: store.SearchQuery{UserID: user(tg, i), Keywords: enricher.Keywords(questions[i%len(questions)])}, MaxFacts: 20}
			if _, _, err := tg.s.Recall(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}
	// measured runs f over [from, to) for each target in turn, adding
	// the backend's CPU time to *counter(tg).
	measured := func(from, to int, f func(*target, int, int) error, counter func(*target) *int64) error {
		for lo := from; lo < to; lo += step {
			for _, tg := range targets {
				c0, err := backendCPU(tg.pid)
				if err != nil {
					return err
				}
				if err := f(tg, lo, min(lo+step, to)); err != nil {
					return err
				}
				c1, err := backendCPU(tg.pid)
				if err != nil {
					return err
				}
				*counter(tg) += c1 - c0
			}
		}
		return nil
	}
	var discard int64
	for _, tg := range targets {
		if err := save(tg, 0, o.warm); err != nil {
			return err
		}
	}
	if err := measured(o.warm, o.warm+o.items, save, func(tg *target) *int64 { return &tg.items }); err != nil {
		return err
	}
	if o.recalls > 0 {
		// Unmeasured first: the statement's prepare and first plans.
		if err := measured(0, min(o.recalls, 20), recall, func(*target) *int64 { return &discard }); err != nil {
			return err
		}
		if err := measured(0, o.recalls, recall, func(tg *target) *int64 { return &tg.rec }); err != nil {
			return err
		}
	}
	line := o.label
	for i, tg := range targets {
		if i > 0 {
			line += " | versus:"
		}
		line += fmt.Sprintf(" items %d per-tx %d: %.1f ms CPU per 1,000 items", o.items, o.perTx, float64(tg.items)/1e6*1000/float64(o.items))
		if o.recalls > 0 {
			line += fmt.Sprintf("; %.1f ms CPU per 1,000 recalls", float64(tg.rec)/1e6*1000/float64(o.recalls))
		}
	}
	if len(targets) > 1 {
		line += fmt.Sprintf(" | ratio items %.3f", float64(targets[1].items)/float64(targets[0].items))
		if o.recalls > 0 {
			line += fmt.Sprintf(", recalls %.3f", float64(targets[1].rec)/float64(targets[0].rec))
		}
	}
	fmt.Println(line)
	return nil
}

// backendCPU is the CPU time in nanoseconds of process pid so far: the
// first field of /proc/<pid>/schedstat.
func backendCPU(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		return 0, fmt.Errorf("backend cpu (Postgres must run on this machine): %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("backend cpu: empty /proc/%d/schedstat", pid)
	}
	return strconv.ParseInt(f[0], 10, 64)
}

// load returns the first n distinct (user message, assistant reply) pairs
// of the dataset's haystack sessions, in file order, and its questions.
func load(path string, n int) ([][2]string, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("corpus: %w (the LongMemEval-S dev file; see --data)", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, nil, fmt.Errorf("corpus %s: %w", path, err)
	}
	var entries []struct {
		Question string `json:"question"`
		Sessions [][]struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"haystack_sessions"`
	}
	if err := json.NewDecoder(zr).Decode(&entries); err != nil {
		return nil, nil, fmt.Errorf("corpus %s: %w", path, err)
	}
	var (
		pairs     [][2]string
		questions []string
		seen      = map[[2]string]bool{}
	)
	for _, e := range entries {
		questions = append(questions, e.Question)
		for _, sess := range e.Sessions {
			for t := 0; t < len(sess) && len(pairs) < n; t++ {
				if sess[t].Role != "user" || strings.TrimSpace(sess[t].Content) == "" {
					continue
				}
				p := [2]string{sess[t].Content, ""}
				if t+1 < len(sess) && sess[t+1].Role == "assistant" {
					t++
					p[1] = sess[t].Content
				}
				if !seen[p] {
					seen[p] = true
					pairs = append(pairs, p)
				}
			}
		}
	}
	if len(pairs) < n || len(questions) == 0 {
		return nil, nil, fmt.Errorf("corpus %s: %d distinct pairs, %d wanted", path, len(pairs), n)
	}
	return pairs, questions, nil
}
