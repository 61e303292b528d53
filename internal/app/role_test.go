package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// TestRolesSplitEnrichFromIngest: a process of role enrich answers the
// memory.* requests and works nothing (no durable consumer, no readiness
// check of it); a process of role ingest beside it, on the same database and
// stream, records and extracts the turns and chunks the large document the
// enrich process stored pending, and answers no request.
func TestRolesSplitEnrichFromIngest(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Enricher.InlineChunkBytes = 64 // the document below is chunked by a job
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := func(role Role) *App {
		t.Helper()
		c := cfg
		c.Role = role
		a, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.Stop(context.Background()) })
		return a
	}

	enrich := start(RoleEnrich)
	js, err := jetstream.New(enrich.nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Consumer(ctx, cfg.Stream, enrich.cfg.Worker.Durable); !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("role enrich: the ingest consumer lookup gave %v, want it absent", err)
	}
	h := enrich.Health(ctx)
	if _, ok := h["consumer"]; ok || h["postgres"] != "ok" || h["nats"] != "ok" {
		t.Errorf("role enrich: health = %v, want postgres and nats ok and no consumer check", h)
	}
	client := events.NewClient(enrich.nc, cfg.Prefix)
	doc := strings.Repeat("The staging cluster restarts every Tuesday at noon. ", 20)
	put, err := client.PutDocument(ctx, events.DocsPutRequest{UserID: "alice", Collection: "ops", DocID: "runbook", Content: doc})
	if err != nil {
		t.Fatal(err)
	}
	if put.Status != events.DocPending || put.JobID == 0 {
		t.Fatalf("role enrich: put of a document over InlineChunkBytes = %+v, want pending with a job", put)
	}
	// The job inserted by the process that works none still runs the
	// workers' MaxAttempts, not River's default.
	var attempts int
	if err := enrich.store.Pool().QueryRow(ctx, "SELECT max_attempts FROM river_job WHERE id = $1", put.JobID).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	if attempts != cfg.Worker.MaxAttempts {
		t.Errorf("role enrich: the document job has max_attempts %d, want Worker.MaxAttempts %d", attempts, cfg.Worker.MaxAttempts)
	}

	ingest := start(RoleIngest)
	publishAndWait(t, ingest, "alice", events.Turn{ID: "a1", UserID: "alice", UserMessage: "My cat is called Miso.", Timestamp: time.Now().Add(-time.Minute)})
	r, err := client.Enrich(ctx, events.EnrichRequest{UserID: "alice", Message: "What is my cat called?", Threshold: new(float64)})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Context) == 0 || !strings.Contains(r.Context[0].Question, "Miso") {
		t.Errorf("enrich through role enrich after role ingest extracted: context = %+v", r.Context)
	}
	err = poll(ctx, 50*time.Millisecond, func() (bool, error) {
		l, err := client.ListDocuments(ctx, events.DocsListRequest{UserID: "alice", Collection: "ops"})
		return err == nil && len(l.Documents) == 1 && l.Documents[0].Status == events.DocReady, err
	})
	if err != nil {
		t.Fatalf("the document put through role enrich was not chunked by role ingest's workers: %v", err)
	}
	if h := ingest.Health(ctx); h["consumer"] != "ok" {
		t.Errorf("role ingest: health = %v, want the consumer ok", h)
	}

	// Role ingest answers no request: with the enrich process gone, nobody does.
	if err := enrich.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	other := events.NewClient(ingest.nc, cfg.Prefix)
	if _, err := other.Stats(ctx, "alice"); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("role ingest answered memory.stats (err %v), want no responders", err)
	}
}

// TestRoleValidated: an unknown role is a configuration error naming it.
func TestRoleValidated(t *testing.T) {
	cfg := Defaults()
	cfg.Role = "reader"
	var cerr *ConfigError
	if _, err := New(cfg); !errors.As(err, &cerr) || cerr.Field != "Role" {
		t.Fatalf("New with Role %q: %v, want a ConfigError on Role", cfg.Role, err)
	}
}

// TestEnrichRoleKeepsItsModelsVectors: a serve of role enrich with
// embeddings on records itself with its model, so that a worker's prune
// over the size limit, of another model, keeps the vectors it searches
// (before, it recorded nothing, and a worker of a new model deleted them
// all during a rolling change); once it stops, they go.
func TestEnrichRoleKeepsItsModelsVectors(t *testing.T) {
	t.Parallel()
	srv := embeddingtest.New(t)
	cfg := testConfig(t)
	cfg.Role = RoleEnrich
	cfg.Embed.BaseURL, cfg.Embed.Model = srv.URL, "old-model"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s := a.store
	ids, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "alice", Question: "q", Answer: "a", CreatedAt: time.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	item, err := s.ContextByID(ctx, "alice", ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveEmbeddings(ctx, "old-model", []store.EmbeddingWrite{{ContextID: ids[0], ContentHash: store.ContentHash("alice", item.Question, item.Answer), Dims: 2, Vector: embedding.Encode([]float32{1, 0})}}); err != nil {
		t.Fatal(err)
	}
	deleted := func() int64 {
		t.Helper()
		n, _, err := s.DeleteOtherModelVectors(ctx, "new-model", 10*time.Second, 100)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := deleted(); n != 0 {
		t.Fatalf("a worker of the new model deleted %d vectors of the model a running enrich serve searches", n)
	}
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	s2, err := store.Open(ctx, store.Config{URL: cfg.Store.URL, MaxConns: 2, MinConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	s = s2
	if n := deleted(); n != 1 {
		t.Fatalf("after the enrich serve stopped, %d vectors of its model deleted, want 1", n)
	}
}

// TestEnrichRoleWithoutEmbeddingsFollowsTheWorkers: a serve of role enrich
// with embeddings off, beside a running worker that embeds, gives what its
// requests write (memory.store's item, docs.put's chunks) embed jobs of
// that worker's model, in the write's transaction. Before, they got none and
// stayed lexical-only until the worker's hourly sweep.
func TestEnrichRoleWithoutEmbeddingsFollowsTheWorkers(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	for kind, models := range enrichRoleEmbedJobModels(t, cfg) {
		if !slices.Equal(models, []string{"m1"}) {
			t.Errorf("%s jobs of models %q, want the running worker's m1", kind, models)
		}
	}
}

// TestEnrichRoleWithEmbeddingsFollowsTheOtherModels: an enrich serve that
// embeds with one model, beside workers of another (a model change rolling
// out), gives what its memory.store and docs.put write embed jobs of both
// models, as a worker's writes get. Before, only of its own.
func TestEnrichRoleWithEmbeddingsFollowsTheOtherModels(t *testing.T) {
	t.Parallel()
	srv := embeddingtest.New(t)
	cfg := testConfig(t)
	cfg.Embed.BaseURL, cfg.Embed.Model = srv.URL, "m2"
	for kind, models := range enrichRoleEmbedJobModels(t, cfg) {
		if !slices.Equal(models, []string{"m1", "m2"}) {
			t.Errorf("%s jobs of models %q, want its own m2 and the running worker's m1", kind, models)
		}
	}
}

// enrichRoleEmbedJobModels runs an enrich-role App of cfg beside a
// recorded worker process embedding with m1, writes an item
// (memory.store) and a document (docs.put) through it, and returns the
// models of the embed and chunk embed jobs those writes inserted, sorted.
func enrichRoleEmbedJobModels(t *testing.T, cfg Config) map[string][]string {
	t.Helper()
	cfg.Role = RoleEnrich
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := storetest.Open(t, cfg.Store.URL)
	if _, err := s.Pool().Exec(ctx, `INSERT INTO memoryd_processes (id, embed_model, heartbeat_at)
		VALUES ('serve-embedding', 'm1', now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop(context.Background()) })
	c := events.NewClient(eventstest.Conn(t), cfg.Prefix)
	eventstest.Eventually(t, "memory.store answered", time.Minute, func() (bool, string) {
		_, err := c.Store(ctx, events.StoreRequest{UserID: "alice", Question: "my dog's name?", Answer: "Rex"})
		return err == nil, fmt.Sprint(err)
	})
	if _, err := c.PutDocument(ctx, events.DocsPutRequest{UserID: "alice", Collection: "notes", DocID: "d", Content: "The zebra notes."}); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, kind := range []string{worker.EmbedJobKind, worker.ChunkEmbedJobKind} {
		var models []string
		if err := s.Pool().QueryRow(ctx, `SELECT coalesce(array_agg(DISTINCT args->>'model' ORDER BY args->>'model'), '{}') FROM river_job WHERE kind = $1`, kind).Scan(&models); err != nil {
			t.Fatal(err)
		}
		out[kind] = models
	}
	return out
}
