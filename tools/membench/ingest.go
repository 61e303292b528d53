package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
)

// ingestRun is one end-to-end ingest measurement.
type ingestRun struct {
	turns     int
	published time.Duration // until the last publish was acknowledged
	elapsed   time.Duration // until every turn was processed
	perSecond float64
	rss       float64 // serve VmHWM, MiB
	llmCalls  int64
	// xacts is the Postgres transactions committed or rolled back in the
	// database during the run (pg_stat_database; backends report them at
	// most once a second), less the bench's own: a measure of the work per turn that
	// does not depend on the machine's load, when the database is the
	// bench's alone (--database-url; the default test database is shared).
	xacts        int64
	xactsPerTurn float64
}

// xactCount reads the database's transaction counter.
func xactCount(ctx context.Context, s *store.Store) (int64, error) {
	var n int64
	err := s.Pool().QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	return n, err
}

func (b *bench) ingestPhase(ctx context.Context) error {
	o := b.o
	r := &b.results

	logf("floor: River working %d no-op jobs (200 workers)", o.ingestTurns)
	var err error
	if r.riverNoop, err = b.riverFloor(ctx, o.ingestTurns); err != nil {
		return fmt.Errorf("river floor: %w", err)
	}

	// Offline extractor, then replay of the same stream.
	url, prefix, stream, err := b.ingestTarget(ctx, "rules")
	if err != nil {
		return err
	}
	logf("ingest: %d turns over %d users, offline extractor", o.ingestTurns, o.ingestUsers)
	if r.ingestRules, err = b.ingest(ctx, url, prefix, stream, nil); err != nil {
		return err
	}
	logf("replay: --reset from the stream")
	if err := b.replay(ctx, url, prefix, stream); err != nil {
		return err
	}

	// A fake OpenAI-compatible server answering at once: the defaults
	// (with a CPU profile of serve when asked), then the tuned flags.
	llm, err := startFakeLLM(0)
	if err != nil {
		return err
	}
	defer llm.Close()
	llmArgs := []string{"--llm-base-url", llm.url, "--llm-model", "fake", "--llm-api-key", "fake"}
	url, prefix, stream, err = b.ingestTarget(ctx, "llm")
	if err != nil {
		return err
	}
	logf("ingest: %d turns over %d users, LLM extractor against an instant fake server", o.ingestTurns, o.ingestUsers)
	if r.ingestLLM, err = b.ingestN(ctx, url, prefix, stream, llmArgs, o.ingestTurns, o.llmProfile); err != nil {
		return err
	}
	r.ingestLLM.llmCalls = llm.calls()
	if o.llmTuned != "" {
		url, prefix, stream, err = b.ingestTarget(ctx, "llmtuned")
		if err != nil {
			return err
		}
		logf("ingest: %d turns, LLM extractor against an instant fake server, serve %s", o.ingestTurns, o.llmTuned)
		n0 := llm.calls()
		if r.ingestLLMTuned, err = b.ingestN(ctx, url, prefix, stream, append(llmArgs, strings.Fields(o.llmTuned)...), o.ingestTurns, ""); err != nil {
			return err
		}
		r.ingestLLMTuned.llmCalls = llm.calls() - n0
	}
	if o.llmLatency > 0 {
		slow, err := startFakeLLM(o.llmLatency)
		if err != nil {
			return err
		}
		defer slow.Close()
		url, prefix, stream, err = b.ingestTarget(ctx, "llmslow")
		if err != nil {
			return err
		}
		logf("ingest: %d turns, LLM extractor against a fake answering in %s, default settings", o.llmSlowTurns, o.llmLatency)
		if r.ingestLLMSlow, err = b.ingestN(ctx, url, prefix, stream, []string{"--llm-base-url", slow.url, "--llm-model", "fake", "--llm-api-key", "fake"}, o.llmSlowTurns, ""); err != nil {
			return err
		}
		r.ingestLLMSlow.llmCalls = slow.calls()
	}
	return nil
}

// ingestTarget creates a fresh schema, prefix and stream for one ingest run.
func (b *bench) ingestTarget(ctx context.Context, name string) (url, prefix, stream string, err error) {
	schema := "bench_" + b.id + "_" + name
	if url, err = b.env.newSchema(ctx, schema); err != nil {
		return "", "", "", err
	}
	prefix = schema
	stream = "BENCH_" + strings.ToUpper(b.id+"_"+name)
	b.env.addStream(stream)
	if _, err = events.EnsureStream(ctx, b.env.js, events.StreamConfig{Prefix: prefix, Stream: stream}); err != nil {
		return "", "", "", err
	}
	return url, prefix, stream, nil
}

// turn returns ingest turn i: unique text, one in ten a self-statement the
// offline rules turn into a fact.
func turn(i, users int, at time.Time) events.Turn {
	u := i % users
	w := newWords(uint64(i) + 1<<40)
	msg := w.fill(questionTemplates[i%len(questionTemplates)]) + fmt.Sprintf(" (ticket %d)", i)
	if i%10 == 0 {
		msg = fmt.Sprintf("I live in %s and work on the %s %s.", []string{"Lisbon", "Porto", "Berlin", "Paris", "Oslo"}[i%5], w.next(), w.next())
	}
	return events.Turn{
		ID:                fmt.Sprintf("bench-%d", i),
		UserID:            fmt.Sprintf("iuser%04d", u),
		ConversationID:    fmt.Sprintf("conv-%d-%d", u, i/(users*5)),
		UserMessage:       msg,
		AssistantResponse: w.fill(answerTemplates[i%len(answerTemplates)]),
		Timestamp:         at.Add(time.Duration(i) * time.Millisecond),
	}
}

// ingest starts serve on an empty schema, publishes o.ingestTurns turns and
// waits until every one is processed and its context item stored.
func (b *bench) ingest(ctx context.Context, url, prefix, stream string, extra []string) (ingestRun, error) {
	return b.ingestN(ctx, url, prefix, stream, extra, b.o.ingestTurns, "")
}

// ingestN is ingest of n turns; with profile set, serve runs with its
// pprof endpoint and a CPU profile of it during the ingest is written there.
func (b *bench) ingestN(ctx context.Context, url, prefix, stream string, extra []string, n int, profile string) (ingestRun, error) {
	o, e := b.o, b.env
	run := ingestRun{turns: n}
	var opsAddr string
	if profile != "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return run, err
		}
		opsAddr = ln.Addr().String()
		ln.Close()
		extra = append(slices.Clone(extra), "--http", opsAddr, "--pprof")
	}
	p, err := startServe(ctx, e, url, prefix, stream, extra...)
	if err != nil {
		return run, err
	}
	defer p.stop()
	if err := waitService(ctx, e.nc, prefix); err != nil {
		return run, fmt.Errorf("%w\n%s", err, p.logTail())
	}
	if _, err := e.js.Consumer(ctx, stream, "memoryd-ingest"); err != nil {
		return run, fmt.Errorf("ingest consumer missing: %w\n%s", err, p.logTail())
	}
	s, err := store.Open(ctx, store.Config{URL: url, MaxConns: 2, Logger: quietLogger()})
	if err != nil {
		return run, err
	}
	defer s.Close()

	at := time.Now().UTC().Add(-time.Hour)
	msgs := make([]*nats.Msg, n)
	for i := range msgs {
		t := turn(i, o.ingestUsers, at)
		if err := t.Validate(); err != nil {
			return run, err
		}
		data, err := json.Marshal(t)
		if err != nil {
			return run, err
		}
		msgs[i] = &nats.Msg{Subject: events.TurnSubject(prefix, t.UserID), Data: data, Header: nats.Header{"Nats-Msg-Id": []string{events.MsgID(t.UserID, t.ID)}}}
	}

	x0, err := xactCount(ctx, s)
	if err != nil {
		return run, err
	}
	start := time.Now()
	profDone := make(chan error, 1)
	if profile != "" {
		go func() { profDone <- fetchProfile(ctx, opsAddr, profile, o.profileSeconds()) }()
	} else {
		profDone <- nil
	}
	for _, m := range msgs {
		// A bounded window of unacknowledged publishes.
		if e.js.PublishAsyncPending() >= 2048 {
			select {
			case <-e.js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				return run, fmt.Errorf("publishing stalled")
			}
		}
		if _, err := e.js.PublishMsgAsync(m); err != nil {
			return run, err
		}
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-time.After(2 * time.Minute):
		return run, fmt.Errorf("publishing timed out")
	}
	run.published = time.Since(start)
	if n := e.js.PublishAsyncPending(); n != 0 {
		return run, fmt.Errorf("%d publishes pending", n)
	}

	// Processed and searchable: every turn processed and its context stored.
	deadline := time.Now().Add(10 * time.Minute)
	polls := int64(0)
	for {
		polls++
		var processed, failed, items int64
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'processed'), count(*) FILTER (WHERE status = 'failed'),
			(SELECT count(*) FROM context) FROM turns`).Scan(&processed, &failed, &items)
		if err != nil {
			return run, err
		}
		if failed > 0 {
			return run, fmt.Errorf("%d turns failed\n%s", failed, p.logTail())
		}
		if processed == int64(n) && items >= int64(n) {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return run, fmt.Errorf("not done: %d of %d processed, %d context items\n%s", processed, n, items, p.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	run.elapsed = time.Since(start)
	run.perSecond = float64(n) / run.elapsed.Seconds()
	run.rss = p.rss()
	// Backends report their transaction counts at most once a second.
	time.Sleep(1500 * time.Millisecond)
	x1, err := xactCount(ctx, s)
	if err != nil {
		return run, err
	}
	run.xacts = x1 - x0 - polls - 1 // less the bench's own reads
	run.xactsPerTurn = float64(run.xacts) / float64(n)
	if err := <-profDone; err != nil {
		return run, err
	}
	logf("  %d turns in %s (%.0f/s; published in %s; %.1f Postgres transactions a turn), serve VmHWM %.0f MiB", n, run.elapsed.Round(time.Millisecond), run.perSecond, run.published.Round(time.Millisecond), run.xactsPerTurn, run.rss)
	if err := checkSearchable(ctx, s, n, o.ingestUsers, at); err != nil {
		return run, err
	}
	return run, nil
}

// checkSearchable searches for a sample of the turns as enrich would.
func checkSearchable(ctx context.Context, s *store.Store, n, users int, at time.Time) error {
	r := rand.New(rand.NewPCG(5, 5))
	for range 50 {
		i := r.IntN(n)
		t := turn(i, users, at)
		cands, err := s.SearchContext(ctx, store.SearchQuery{UserID: t.UserID, Keywords: enricher.Keywords(t.UserMessage)})
		if err != nil {
			return err
		}
		found := false
		for _, it := range enricher.Rank(cands, time.Time{}, 0, 50) {
			found = found || it.EventID == t.ID
		}
		if !found {
			return fmt.Errorf("turn %s is processed but not found by search", t.ID)
		}
	}
	return nil
}

// replay runs `memoryd replay --reset` on the ingested stream (the serve
// process is stopped) and waits for it to finish extracting.
func (b *bench) replay(ctx context.Context, url, prefix, stream string) error {
	o, e := b.o, b.env
	bin, err := e.memoryd(ctx)
	if err != nil {
		return err
	}
	logPath := filepath.Join(e.tmp, prefix+"-replay.log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, bin, "replay", "--reset", "--database-url", url, "--nats-url", o.natsURL, "--prefix", prefix, "--stream", stream,
		"--log-format", "json", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = f, f
	start := time.Now()
	err = cmd.Run()
	elapsed := time.Since(start)
	if err != nil {
		data, _ := os.ReadFile(logPath)
		return fmt.Errorf("memoryd replay: %w\n%s", err, data)
	}
	s, err := store.Open(ctx, store.Config{URL: url, MaxConns: 2, Logger: quietLogger()})
	if err != nil {
		return err
	}
	defer s.Close()
	st, err := s.Stats(ctx, "")
	if err != nil {
		return err
	}
	if st.TurnsProcessed != int64(o.ingestTurns) || st.ContextItems != int64(o.ingestTurns) {
		return fmt.Errorf("after replay: %d turns processed, %d context items, want %d", st.TurnsProcessed, st.ContextItems, o.ingestTurns)
	}
	r := &b.results
	r.replayElapsed = elapsed
	r.replayPerSecond = float64(o.ingestTurns) / elapsed.Seconds()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.replayRSS = float64(ru.Maxrss) / 1024
	}
	logf("  replayed %d turns in %s (%.0f/s), peak RSS %.0f MiB", o.ingestTurns, elapsed.Round(time.Millisecond), r.replayPerSecond, r.replayRSS)
	return nil
}

// noopArgs is the River floor's job: it does nothing.
type noopArgs struct{}

func (noopArgs) Kind() string { return "membench_noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// riverFloor measures River working n no-op jobs with 200 workers on a fresh
// schema, from the client's start until all are completed. The jobs are
// inserted before the clock starts.
func (b *bench) riverFloor(ctx context.Context, n int) (float64, error) {
	url, err := b.env.newSchema(ctx, "bench_"+b.id+"_river")
	if err != nil {
		return 0, err
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return 0, err
	}
	cfg.MaxConns = 20 // as memoryd's store
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	workers := river.NewWorkers()
	river.AddWorker(workers, noopWorker{})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 200}},
		Workers: workers,
		Logger:  quietLogger(),
	})
	if err != nil {
		return 0, err
	}
	for i := 0; i < n; i += 1000 {
		params := make([]river.InsertManyParams, min(1000, n-i))
		for j := range params {
			params[j] = river.InsertManyParams{Args: noopArgs{}}
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return 0, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(sctx)
	}()
	for {
		var done int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`).Scan(&done); err != nil {
			return 0, err
		}
		if done == n {
			break
		}
		if time.Since(start) > 5*time.Minute || ctx.Err() != nil {
			return 0, fmt.Errorf("river: %d of %d no-op jobs completed", done, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	rate := float64(n) / time.Since(start).Seconds()
	logf("  %d no-op jobs in %s (%.0f/s)", n, time.Since(start).Round(time.Millisecond), rate)
	return rate, nil
}

// fakeLLM is an OpenAI-compatible chat-completions server that answers at
// once (or after a fixed latency), returning the turn it was given as one context pair (as the
// offline rules do), so that the stored memory is the same as with them.
type fakeLLM struct {
	srv *http.Server
	url string
	n   atomic.Int64
}

func startFakeLLM(latency time.Duration) (*fakeLLM, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &fakeLLM{url: "http://" + ln.Addr().String() + "/v1"}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		f.n.Add(1)
		if latency > 0 {
			select { // a model taking its time
			case <-time.After(latency):
			case <-r.Context().Done():
				return
			}
		}
		// The prompt's own reader of the turn, so this stand-in model never
		// repeats the prompt's delimiters.
		userMessage, assistantResponse, _ := extractor.PromptTurn(req.Messages[len(req.Messages)-1].Content)
		extraction, _ := json.Marshal(map[string]any{
			"facts":   map[string]string{},
			"context": []map[string]string{{"q": userMessage, "a": assistantResponse}},
		})
		reply, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-membench", "object": "chat.completion", "created": time.Now().Unix(), "model": "fake",
			"choices": []map[string]any{{"index": 0, "finish_reason": "stop", "message": map[string]string{"role": "assistant", "content": string(extraction)}}},
			"usage":   map[string]int{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
		})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(reply)
	})
	f.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

func (f *fakeLLM) calls() int64 { return f.n.Load() }

func (f *fakeLLM) Close() { _ = f.srv.Close() }

// fetchProfile writes a CPU profile of seconds from serve's pprof endpoint
// at addr to path.
func fetchProfile(ctx context.Context, addr, path string, seconds int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, seconds), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("serve CPU profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("serve CPU profile: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	logf("wrote serve CPU profile %s (go tool pprof -top %s)", path, path)
	return f.Close()
}
