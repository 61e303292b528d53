package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/internal/app"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// instance is memoryd running in this process on a schema and a subject
// prefix of its own, torn down by close.
type instance struct {
	run     string
	schema  string
	baseURL string
	prefix  string
	stream  string
	app     *app.App
	js      jetstream.JetStream
	client  *events.Client
	llm     bool
	emb     *embedding.Client // with -embed-base-url: the questions' embeddings for the vector-only ranker
	lexical *enricher.Service // with -embed-base-url: enrich without embeddings (embeddings.go)
	logger  *slog.Logger
	cleanup []func(context.Context) error
}

func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// withSearchPath returns base with search_path set to schema.
func withSearchPath(base, schema string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("database url: %w", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// start brings up memoryd as `memoryd serve` does: store, migrations, the
// ingest consumer and extraction workers, and the enrich service.
func start(ctx context.Context, o options, logger *slog.Logger) (in *instance, err error) {
	run := newRunID()
	in = &instance{run: run, schema: "eval_" + run, baseURL: o.databaseURL, prefix: "eval" + run, stream: "EVAL" + strings.ToUpper(run) + "_TURNS", logger: logger}
	defer func() {
		if err != nil {
			in.close(context.WithoutCancel(ctx))
		}
	}()
	// The database (by default the test suite's) is created when missing,
	// as serve does, so a fresh server needs no setup.
	s, err := store.Open(ctx, store.Config{URL: o.databaseURL, MaxConns: 1, CreateDatabase: true, Logger: logger})
	if err != nil {
		return in, fmt.Errorf("postgres: %w", err)
	}
	s.Close()
	admin, err := connect(ctx, o.databaseURL)
	if err != nil {
		return in, fmt.Errorf("postgres %s: %w", app.RedactURL(o.databaseURL), err)
	}
	_, err = admin.Exec(ctx, "CREATE SCHEMA "+in.schema)
	admin.Close(ctx)
	if err != nil {
		return in, fmt.Errorf("create schema: %w", err)
	}
	in.cleanup = append(in.cleanup, func(ctx context.Context) error {
		c, err := connect(ctx, in.baseURL)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, "DROP SCHEMA "+in.schema+" CASCADE")
		return err
	})
	dbURL, err := withSearchPath(o.databaseURL, in.schema)
	if err != nil {
		return in, err
	}
	// memoryd as serve assembles it (internal/app), with the evaluation's
	// names and a generous enrich timeout: the evaluation measures ranking,
	// and a degraded reply (which it reports as an error) would only
	// measure the machine.
	// 30 connections (the 20 workers and enrich) unless the URL caps the
	// pool (pool_max_conns, which store.Open then reads): beside other
	// work on a shared Postgres, two runs would otherwise take 68.
	maxConns := int32(30)
	if strings.Contains(dbURL, "pool_max_conns=") {
		maxConns = 0
	}
	cfg := app.Config{
		Logger: logger, Prefix: in.prefix, Stream: in.stream,
		NATS:     app.NATSConfig{URL: o.natsURL, Name: "memeval"},
		Store:    store.Config{URL: dbURL, MaxConns: maxConns},
		Worker:   worker.Config{Workers: 20, FetchPollInterval: 100 * time.Millisecond},
		Enricher: enricher.Config{Timeout: 10 * time.Second},
	}
	if o.llmBaseURL != "" {
		in.llm = true
		cfg.LLM = extractor.LLMConfig{BaseURL: o.llmBaseURL, APIKey: o.llmAPIKey, Model: o.llmModel, MaxConcurrency: o.llmConcurrency}
	}
	if o.embedBaseURL != "" {
		// A query's embedding may take most of the generous timeout: the
		// evaluation measures ranking, not the endpoint's speed.
		cfg.Embed = embedding.Config{BaseURL: o.embedBaseURL, Model: o.embedModel, Dimensions: o.embedDims, APIKey: o.embedAPIKey}
		cfg.Enricher.EmbedTimeout = 5 * time.Second
		if in.emb, err = embedding.New(cfg.Embed); err != nil {
			return in, err
		}
	}
	if in.app, err = app.New(cfg); err != nil {
		return in, err
	}
	if err = in.app.Start(ctx); err != nil {
		return in, err
	}
	nc, err := in.app.Conn()
	if err != nil {
		return in, err
	}
	if in.js, err = jetstream.New(nc); err != nil {
		return in, err
	}
	in.cleanup = append(in.cleanup, func(ctx context.Context) error {
		// The app's connection is closed by now: one of its own.
		nc, err := nats.Connect(o.natsURL, nats.Name("memeval-cleanup"))
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		var errs []error
		for _, s := range []string{in.stream, events.DeadLetterStream(in.stream)} {
			if err := js.DeleteStream(ctx, s); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
	in.client = events.NewClient(nc, in.prefix)
	return in, nil
}

// close stops memoryd, then deletes the schema and streams it used.
func (in *instance) close(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if in.lexical != nil {
		_ = in.lexical.Stop(ctx)
	}
	if in.app != nil {
		_ = in.app.Stop(ctx)
	}
	for i := len(in.cleanup) - 1; i >= 0; i-- {
		if err := in.cleanup[i](ctx); err != nil {
			fmt.Fprintf(os.Stderr, "memeval: cleanup: %v\n", err)
		}
	}
}
func (in *instance) userID(h haystack) string {
	return fmt.Sprintf("eval-%s-%s-%s", in.run, h.dataset, h.name)
}

// ingest publishes every haystack's units as turn events, as a frontend
// would, and waits until memoryd has processed them all (stats endpoint).
func (in *instance) ingest(ctx context.Context, hs []haystack, wait time.Duration, progress func(done, total int)) error {
	pub := events.NewPublisher(in.js, in.prefix)
	if _, err := events.EnsureStream(ctx, in.js, events.StreamConfig{Prefix: in.prefix, Stream: in.stream}); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	total := 0
	for _, h := range hs {
		total += len(h.units)
		user := in.userID(h)
		g.Go(func() error {
			for _, u := range h.units {
				_, err := pub.Publish(gctx, events.Turn{
					ID: u.eventID, UserID: user, ConversationID: user,
					UserMessage: u.user, AssistantResponse: u.reply, Timestamp: u.at,
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	deadline := time.Now().Add(wait)
	pending := map[string]int{}
	for _, h := range hs {
		pending[in.userID(h)] = len(h.units)
	}
	var mu sync.Mutex
	for {
		done := 0
		for _, h := range hs {
			user := in.userID(h)
			mu.Lock()
			want, ok := pending[user]
			mu.Unlock()
			if !ok {
				done += len(h.units)
				continue
			}
			st, err := in.client.Stats(ctx, user)
			if err != nil {
				return err
			}
			n := int(st.TurnsProcessed + st.TurnsFailed)
			done += n
			if n >= want {
				if st.TurnsFailed > 0 {
					return fmt.Errorf("user %s: %d turn(s) failed extraction", user, st.TurnsFailed)
				}
				mu.Lock()
				delete(pending, user)
				mu.Unlock()
			}
		}
		progress(done, total)
		if len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("turns not processed within %s (%d/%d)", wait, done, total)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// enrichShape is the part of an enrich request a run fixes besides the
// message: nil fields are left to memoryd's defaults, as a frontend that
// sets nothing gets them.
type enrichShape struct {
	name       string
	threshold  *float64
	maxResults *int
	maxTokens  *int
}

// evalShape is the evaluation's request: threshold 0, the top k items, and a
// budget that drops nothing, so that recall measures the ranking alone.
func evalShape(k int) enrichShape {
	threshold, maxTokens := 0.0, events.MaxMaxTokens
	return enrichShape{name: fmt.Sprintf("eval (%d items, threshold 0, no budget)", k), threshold: &threshold, maxResults: &k, maxTokens: &maxTokens}
}

// defaultShape is a request that sets nothing: memoryd's defaults
// (events.DefaultThreshold, DefaultMaxResults, DefaultMaxTokens).
func defaultShape() enrichShape {
	return enrichShape{name: fmt.Sprintf("default (%d items, threshold %.1f, %d-token budget)", events.DefaultMaxResults, events.DefaultThreshold, events.DefaultMaxTokens)}
}

// replyStat is what one enrich reply injected.
type replyStat struct {
	tokens     int // the reply's tokens: the injection's estimate
	facts      int // facts injected
	factTokens int // of tokens, the facts block's (inline format)
}

// factBlockTokens estimates the tokens of an inline injection's facts
// block as memoryd estimates an injection's (enricher/inject.go: four
// UTF-8 bytes a token, rounded up; the dev sets hold no CJK): the block is
// the injection's first line when it opens with events.FactsMarker (stored
// text holds no line break).
func factBlockTokens(injection string) int {
	if !strings.HasPrefix(injection, events.FactsMarker) {
		return 0
	}
	block, _, _ := strings.Cut(injection, "\n")
	return (len(block) + 3) / 4
}

// memorydRanker asks memory.enrich each question, as a frontend would, with
// its facts selection and request shape (evalShape when shape is nil), and
// records what each reply injected.
type memorydRanker struct {
	in      *instance
	client  *events.Client // nil: in.client
	label   string         // "": "memoryd"
	facts   string         // events.FactsRelevant or events.FactsAll
	shape   *enrichShape
	tookMS  []float64
	replies []replyStat
	mu      sync.Mutex
}

func (m *memorydRanker) name() string {
	if m.label == "" {
		return "memoryd"
	}
	return m.label
}

func (m *memorydRanker) rank(ctx context.Context, h haystack, k int) ([][]string, error) {
	out := make([][]string, len(h.questions))
	shape := evalShape(k)
	if m.shape != nil {
		shape = *m.shape
	}
	for qi, q := range h.questions {
		r, err := m.in.enrichWith(ctx, m.client, h, q, m.facts, shape)
		if err != nil {
			return nil, err
		}
		m.mu.Lock()
		m.tookMS = append(m.tookMS, r.TookMS)
		m.replies = append(m.replies, replyStat{tokens: r.Tokens, facts: len(r.Facts), factTokens: factBlockTokens(r.Injection)})
		m.mu.Unlock()
		for _, it := range r.Context {
			out[qi] = append(out[qi], it.EventID)
		}
	}
	return out, nil
}

// enrich asks memory.enrich question q of haystack h's user; a degraded
// reply is an error (the evaluation measures memory, not the machine).
func (in *instance) enrich(ctx context.Context, h haystack, q question, facts string, shape enrichShape) (events.EnrichReply, error) {
	return in.enrichWith(ctx, nil, h, q, facts, shape)
}

// enrichWith is enrich through client (in.client when nil).
func (in *instance) enrichWith(ctx context.Context, client *events.Client, h haystack, q question, facts string, shape enrichShape) (events.EnrichReply, error) {
	if client == nil {
		client = in.client
	}
	r, err := client.Enrich(ctx, events.EnrichRequest{
		UserID: in.userID(h), Message: q.text, MaxResults: shape.maxResults, Threshold: shape.threshold,
		MaxTokens: shape.maxTokens, At: q.at, Facts: facts,
	})
	if err != nil {
		return r, err
	}
	if r.Degraded {
		return r, fmt.Errorf("enrich degraded: %s", r.Reason)
	}
	return r, nil
}

// connect opens one connection on url, which may carry the pool's
// parameters (pool_max_conns, as the guide's capped URLs do): pgx.Connect
// sends them to the server as settings, which refuses them.
func connect(ctx context.Context, url string) (*pgx.Conn, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg.ConnConfig)
}
