package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// TestEmbedWiring: with Embed.BaseURL set, the service embeds what a turn
// stores and what memory.store writes through the enrich service, and a
// backfill (in another App, running its own workers) embeds items that
// existed before. Without it, a backfill is refused.
func TestEmbedWiring(t *testing.T) {
	t.Parallel()
	srv := embeddingtest.New(t)
	a := startTestApp(t, func(c *Config) {
		c.Embed.BaseURL, c.Embed.Model = srv.URL, "m1"
		c.Worker.EmbedSweepInterval = -1
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	publishAndWait(t, a, "alice", events.Turn{ID: "a1", UserID: "alice", UserMessage: "My dog is named Rex.", AssistantResponse: "Good dog.", Timestamp: time.Now()})
	client := events.NewClient(a.nc, a.cfg.Prefix)
	if _, err := client.Store(ctx, events.StoreRequest{UserID: "alice", Question: "favourite colour", Answer: "green"}); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitEmbedded(ctx, "alice", store.EmbeddingMark{}, nil); err != nil {
		t.Fatal(err)
	}
	s, err := a.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.CountEmbeddings(ctx, "alice", "m1"); err != nil || n.Items != 2 || n.Embedded != 2 {
		t.Fatalf("alice's vectors %+v (%v), want 2 of 2", n, err)
	}
	cfg := a.cfg

	// A model change: the service stops, and the backfill of an App
	// configured with another model embeds the items again, in its own
	// workers.
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	cfg.Embed.Model = "m2"
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	// An extraction job waiting for the serves: the backfill's workers,
	// with this App's extractor (the offline rules), must leave it.
	bs, err := b.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var extractJob int64
	if err := bs.Pool().QueryRow(ctx, `INSERT INTO river_job (kind, args, queue, max_attempts, state)
		VALUES ($1, '{"user_id":"alice","event_ids":["a1"]}', $2, 5, 'available') RETURNING id`,
		worker.ExtractJobKind, worker.QueueExtract).Scan(&extractJob); err != nil {
		t.Fatal(err)
	}
	n, err := b.EmbedBackfill(ctx, EmbedOptions{User: "alice", Work: true})
	if err != nil || n != 2 {
		t.Fatalf("backfill enqueued %d (%v), want 2", n, err)
	}
	var seen []store.EmbeddingCount
	if err := b.WaitEmbedded(ctx, "alice", store.EmbeddingMark{}, func(c, _ store.EmbeddingCount) { seen = append(seen, c) }); err != nil {
		t.Fatal(err)
	}
	if len(seen) == 0 || seen[len(seen)-1] != (store.EmbeddingCount{Items: 2, Embedded: 2}) {
		t.Errorf("progress %v, want it to end at 2 of 2", seen)
	}
	var state string
	var attempts int
	if err := bs.Pool().QueryRow(ctx, `SELECT state, attempt FROM river_job WHERE id = $1`, extractJob).Scan(&state, &attempts); err != nil || state != "available" || attempts != 0 {
		t.Errorf("the extraction job after the backfill: %s, attempt %d (%v); want it left available, never attempted", state, attempts, err)
	}

	// --dims of other dimensions than the server's is refused before it is
	// recorded (before, every vector of the model then counted as missing).
	wrong := embeddingtest.DefaultDims + 1
	if _, err := b.EmbedBackfill(ctx, EmbedOptions{Dims: wrong}); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("vectors have %d dimensions", embeddingtest.DefaultDims)) {
		t.Errorf("backfill with --dims %d: %v, want the server's %d named", wrong, err, embeddingtest.DefaultDims)
	}
	if n, err := bs.CountEmbeddings(ctx, "alice", "m2"); err != nil || n.Embedded != 2 {
		t.Errorf("alice's vectors after a refused --dims: %+v (%v), want 2 still counted", n, err)
	}

	off, err := New(testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := off.EmbedBackfill(ctx, EmbedOptions{}); !errors.Is(err, ErrEmbeddingOff) {
		t.Errorf("backfill with embedding off: %v, want ErrEmbeddingOff", err)
	}
}

// TestHybridEnrichWiring: with embeddings on, enrich embeds its message
// with the query client and finds an item by meaning that no keyword of the
// message matches (extracted from a turn, embedded by the worker's job), and
// the query embedding is counted in memoryd_query_embeddings_total.
func TestHybridEnrichWiring(t *testing.T) {
	t.Parallel()
	srv := embeddingtest.New(t)
	srv.SetDims(256)
	srv.Alias("canine", "dog")
	srv.Alias("companion", "dog")
	srv.Alias("named", "called")
	a := startTestApp(t, func(c *Config) {
		c.Embed.BaseURL, c.Embed.Model = srv.URL, "m1"
		c.Worker.EmbedSweepInterval = -1
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := time.Now()
	publishAndWait(t, a, "alice",
		events.Turn{ID: "h1", UserID: "alice", UserMessage: "My dog is called Rex.", AssistantResponse: "Good dog.", Timestamp: now},
		events.Turn{ID: "h2", UserID: "alice", UserMessage: "I work at the bakery.", AssistantResponse: "Nice.", Timestamp: now},
		events.Turn{ID: "h3", UserID: "alice", UserMessage: "I live in Lisbon.", AssistantResponse: "Lovely city.", Timestamp: now},
		events.Turn{ID: "h4", UserID: "alice", UserMessage: "I play the cello.", AssistantResponse: "Great.", Timestamp: now})
	if err := a.WaitEmbedded(ctx, "alice", store.EmbeddingMark{}, nil); err != nil {
		t.Fatal(err)
	}
	zero := 0.0
	r, err := events.NewClient(a.nc, a.cfg.Prefix).Enrich(ctx, events.EnrichRequest{UserID: "alice", Message: "what is my canine companion named?", Threshold: &zero})
	if err != nil || r.Degraded {
		t.Fatalf("enrich: %+v %v", r, err)
	}
	if len(r.Context) == 0 || r.Context[0].EventID != "h1" {
		t.Fatalf("enrich found %+v, want the dog's turn first (no keyword matches it)", r.Context)
	}
	families, err := a.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var ok float64
	for _, f := range families {
		if f.GetName() == "memoryd_query_embeddings_total" {
			for _, m := range f.GetMetric() {
				if m.GetLabel()[0].GetValue() == "ok" {
					ok = m.GetCounter().GetValue()
				}
			}
		}
	}
	if ok != 1 {
		t.Errorf("memoryd_query_embeddings_total{outcome=\"ok\"} = %v, want 1", ok)
	}
	// The queue gauge has every state of the model's own embed queue,
	// empty or not, and nothing of the pre-model "embed" queue, which holds
	// no job (before: that queue's zeros, and the model's queue only while
	// it held jobs).
	states := map[string]bool{}
	for _, f := range families {
		if f.GetName() != "memoryd_queue_jobs" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch labels["queue"] {
			case worker.QueueEmbedFor("m1"):
				states[labels["state"]] = true
			case worker.QueueEmbed:
				t.Errorf("memoryd_queue_jobs has the unused queue %q: %v", worker.QueueEmbed, labels)
			}
		}
	}
	for _, st := range store.UnfinishedJobStates {
		if !states[st] {
			t.Errorf("memoryd_queue_jobs lacks queue %q state %q (has %v)", worker.QueueEmbedFor("m1"), st, states)
		}
	}
	// The items the server refused, of the process's model: none here.
	refused := false
	for _, f := range families {
		if f.GetName() == "memoryd_embedding_refused_items" {
			for _, m := range f.GetMetric() {
				refused = refused || (m.GetLabel()[0].GetValue() == "m1" && m.GetGauge().GetValue() == 0)
			}
		}
	}
	if !refused {
		t.Errorf("no memoryd_embedding_refused_items{model=\"m1\"} 0")
	}
}

// The end of an embeddings outage is logged by each of serve's two
// clients (the embed jobs' and enrich's queries'), which say which they
// are: before, the two "embeddings server answering again" lines of one
// outage could not be told apart.
func TestEmbeddingsClientsLogWhichTheyAre(t *testing.T) {
	t.Parallel()
	srv := embeddingtest.New(t)
	var logs lockedBuffer
	cfg := Defaults()
	cfg.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Embed.BaseURL, cfg.Embed.Model = srv.URL, "m1"
	jobs, queries := embedClients(t, cfg)
	ctx := context.Background()
	for _, c := range []*embedding.Client{jobs, queries} {
		srv.FailNext(1, http.StatusServiceUnavailable) // down: no Retry-After
		if _, err := c.Embed(ctx, []string{"down"}); err == nil {
			t.Fatal("an embedding during a 503: no error")
		}
		if _, err := c.Embed(ctx, []string{"up"}); err != nil {
			t.Fatalf("an embedding after the 503: %v", err)
		}
	}
	var clients []string
	for line := range strings.Lines(logs.String()) {
		var rec struct{ Msg, Client string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec.Msg == "embeddings server answering again" {
			clients = append(clients, rec.Client)
		}
	}
	if want := []string{"jobs", "queries"}; !slices.Equal(clients, want) {
		t.Errorf("the answering lines' clients %q, want %q", clients, want)
	}
}

// TestQueryCutToWhatTheEmbedJobsLearned: against a server that refuses
// texts over N bytes (a 512-token model), the query client cuts a long
// message to the length the embed jobs' client saw it take (a long item
// refused, its 2 KiB start embedded) and embeds it in one request, within
// enrich's budget. Before, the query was sent whole, refused, and every
// long message was answered lexically.
func TestQueryCutToWhatTheEmbedJobsLearned(t *testing.T) {
	t.Parallel()
	srv := embeddingtest.New(t)
	srv.RefuseOver(3000)
	cfg := Defaults()
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.Embed.BaseURL, cfg.Embed.Model = srv.URL, "m1"
	jobs, queries := embedClients(t, cfg)
	ctx := context.Background()
	long := strings.Repeat("a long pasted paragraph ", 250) // 6,000 bytes
	// What the worker's embed job does with a long item (embedStart).
	if _, err := jobs.Embed(ctx, []string{long[:4096]}); !embedding.RefusedInput(err) {
		t.Fatalf("the item's 4 KiB: %v, want refused", err)
	}
	if _, err := jobs.Embed(ctx, []string{long[:2048]}); err != nil {
		t.Fatalf("the item's 2 KiB start: %v", err)
	}
	before := srv.Requests()
	if _, err := queries.Embed(ctx, []string{long}); err != nil {
		t.Errorf("a long query: %v, want its start embedded", err)
	}
	if n := srv.Requests() - before; n != 1 {
		t.Errorf("%d requests for the query, want 1", n)
	}
	if in := srv.Inputs(); len(in[len(in)-1]) != 2048 {
		t.Errorf("the query was sent as %d bytes, want the 2048 the server took", len(in[len(in)-1]))
	}
}

// embedClients makes an App of cfg (which connects to nothing until
// Start) and returns its two embeddings clients: the embed jobs' and
// enrich's queries'.
func embedClients(t *testing.T, cfg Config) (jobs, queries *embedding.Client) {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	jobs, err = a.embedder()
	a.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if queries, err = a.queryEmbedder(); err != nil {
		t.Fatal(err)
	}
	return jobs, queries
}
