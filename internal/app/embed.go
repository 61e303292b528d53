package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// ErrEmbeddingOff is EmbedBackfill's error when Config.Embed.BaseURL is
// empty.
var ErrEmbeddingOff = errors.New("app: embedding is off (set Embed.BaseURL, --embed-base-url)")

// embedder builds the configured embedding client once; nil when embedding
// is off. a.mu is held.
func (a *App) embedder() (*embedding.Client, error) {
	if a.cfg.Embed.BaseURL == "" {
		return nil, nil
	}
	if a.emb == nil {
		cfg := a.cfg.Embed
		cfg.Logger = embedLogger(cfg.Logger, "jobs")
		cfg.InputSizes = a.embedSizes
		c, err := embedding.New(cfg)
		if err != nil {
			return nil, err
		}
		a.emb = c
	}
	return a.emb, nil
}

// queryEmbedder builds the client enrich and search embed queries with,
// when embedding is on (nil otherwise). It is a client of its own, not the
// worker's: its requests must not queue behind the embed jobs' batches
// (MaxConcurrency) nor wait for their rate limit. It shares what the
// worker's learns of the text lengths the server takes (embedSizes). One request per enrich or
// search in flight at most, each bounded by Enricher.EmbedTimeout.
func (a *App) queryEmbedder() (*embedding.Client, error) {
	if a.cfg.Embed.BaseURL == "" {
		return nil, nil
	}
	c := a.cfg.Embed
	c.Timeout = a.cfg.Enricher.EmbedTimeout
	c.MaxConcurrency = a.cfg.Enricher.MaxInFlight + a.cfg.Enricher.MaxSearchInFlight
	c.RequestsPerSecond = 0
	c.BatchSize = 1
	c.Logger = embedLogger(c.Logger, "queries")
	// A query longer than the server was seen to take (by the embed
	// jobs' texts, or an earlier query) is cut to that before it is
	// sent: refused, it had no time for its start, and every long
	// message was answered lexically by a 512-token server.
	c.InputSizes, c.CutInputs = a.embedSizes, true
	return embedding.New(c)
}

// embedLogger tells apart the lines of serve's two embeddings clients
// (client: "jobs" embeds items, "queries" enrich's and search's queries),
// which would otherwise log the same outage's end ("embeddings server
// answering again") alike.
func embedLogger(l *slog.Logger, client string) *slog.Logger {
	if l == nil {
		l = slog.Default()
	}
	return l.With("client", client)
}

func (m *metrics) registerQueryEmbeddings() {
	m.queryEmbeds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "memoryd_query_embeddings_total",
		Help: "Enrich and search queries embedded for hybrid retrieval, by outcome (ok; timeout, rate_limited, error: answered lexically; skipped: answered lexically without asking, the server having failed the last five, or counting as down and probed by another query).",
	}, []string{"outcome"})
	for _, o := range enricher.EmbedOutcomes() {
		m.queryEmbeds.WithLabelValues(o)
	}
	m.reg.MustRegister(m.queryEmbeds)
}

// QueryEmbedded implements enricher.EmbedObserver.
func (m *metrics) QueryEmbedded(outcome string, _ time.Duration) {
	m.queryEmbeds.WithLabelValues(outcome).Inc()
}

// setEmbedHookLocked makes writes through s insert embed jobs when
// embedding is on and no worker of this process does it already (an
// enrich-only process: its memory.store items get their jobs too): of its
// own model and of every model running workers embed with, as a worker's
// writes (worker.EmbedFollower with Own). a.mu is held.
func (a *App) setEmbedHookLocked(ctx context.Context, s *store.Store) error {
	emb, err := a.embedder()
	if err != nil || emb == nil || a.worker != nil || a.follower != nil {
		return err
	}
	enq, err := worker.NewEnqueuer(worker.EnqueuerConfig{Store: s, Logger: a.logger})
	if err != nil {
		return err
	}
	f, err := worker.NewEmbedFollower(worker.EmbedFollowerConfig{Store: s, Enqueuer: enq, Own: emb.Model(),
		Live: a.cfg.Worker.ProcessTimeout, JobSize: a.cfg.Worker.EmbedJobSize, MaxAttempts: a.cfg.Worker.EmbedMaxAttempts, Logger: a.logger})
	if err != nil {
		return err
	}
	if err := f.Start(ctx); err != nil {
		return err
	}
	a.follower = f
	return nil
}

// EmbedOptions selects what EmbedBackfill embeds.
type EmbedOptions struct {
	// User limits the backfill to one user's items; empty: every user's.
	User string
	// Work also runs workers in this process (without the ingest
	// consumer) until Stop, so that the jobs run without a serve.
	Work bool
	// Progress, when set, is called while waiting, when the count changes.
	Progress func(store.EmbeddingCount)
	// Documents, when set, is set to how many documents with chunks
	// lacking a vector EmbedBackfill enqueued (of the collections User
	// owns; of every collection, shared ones included, without User).
	Documents *int
	// Dims, when positive, is recorded as the model's dimensions first
	// (store.SetEmbeddingDims): the model behind its name changed, and
	// every vector of other dimensions is to be embedded anew; the
	// refusals recorded for the name before the dimensions last changed
	// (store.ForgetStaleEmbeddingRefusals), of User's items and chunks
	// (every user's without), are forgotten. The same dimensions again (a
	// nightly backfill keeping the flag) change no model and keep those
	// since: before, every such run sent the refused texts again and
	// failed for them.
	Dims int
	// RetryRefused forgets the refusals recorded for the model first
	// (store.ForgetEmbeddingRefusals), so that the items whose text the
	// server refused are sent again (it now takes longer texts).
	// Without it they are left out, as the sweep leaves them.
	RetryRefused bool
	// Refused, when set, is set to how many items in scope the server
	// refused and this backfill leaves out (store.EmbeddingCount.Refused);
	// when it forgot them (RetryRefused, or Dims changed), to how many
	// refusals it forgot, whose items it sends again.
	Refused *int64
	// RefusedChunks, when set, is set as Refused is, of the document
	// chunks (store.SaveChunkEmbeddingRefusals).
	RefusedChunks *int64
	// Forgot, when set, is set to whether the refusals were forgotten
	// (RetryRefused, or Dims and some were the old model's).
	Forgot *bool
	// Mark, when set, is set to what exists before anything is enqueued
	// (store.MarkEmbeddings), for WaitEmbedded: taken once the database is
	// migrated (or, with Config.NoMigrate, found to need none). Before, the
	// embed command marked before EmbedBackfill migrated, and on a
	// database memoryd never migrated failed "mark embeddings: relation
	// "context" does not exist", with --migrate=false too.
	Mark *store.EmbeddingMark
}

// probeEmbedder embeds one text before a backfill enqueues anything, and
// with dims positive checks that the server's vectors have dims
// dimensions. A refusal (an unknown --embed-model, a bad key) is an error:
// before, a mistyped model ran every job of the backfill against the
// server's 404 (1,744 texts sent for 922 items, an embeddings walk) and
// left jobs on a queue no process works. An unanswered probe is an error
// too when this process is to do the work, and a warning with work left to
// the serves (they may reach a server this host does not). --dims records
// the dimensions for the model, every user's vectors of others then count
// as missing, so it is never recorded unchecked.
func (a *App) probeEmbedder(ctx context.Context, emb interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	Model() string
}, dims int, work bool) error {
	v, err := probeEmbed(ctx, emb, waitCtx)
	switch {
	case err != nil && dims > 0:
		return fmt.Errorf("--dims %d not checked against the embeddings server, so not recorded: %w", dims, err)
	case errors.Is(err, embedding.ErrPermanent), embedding.IsMisconfigured(err):
		// A 401 or 403 is the key, not the model: an operator's walk with
		// a revoked key was asked whether the model was served.
		hint, flags := "is the model served there, under that name?", "--embed-model "+a.cfg.Embed.Model
		if d := a.cfg.Embed.Dimensions; d > 0 {
			// The stored name (model?dimensions=N) is no --embed-model
			// value, and a model that takes no dimensions, or not these,
			// refuses every request as a model not served does not.
			hint, flags = fmt.Sprintf("is the model served there, under that name, and does it take --embed-dimensions %d?", d), fmt.Sprintf("%s --embed-dimensions %d", flags, d)
		}
		var e *embedding.Error
		if errors.As(err, &e) && (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden) {
			hint = "is --embed-api-key or --embed-api-key-file a key the server takes?"
		}
		return fmt.Errorf("the embeddings server refused a test text for %s (%s): %w; nothing enqueued", flags, hint, err)
	case err != nil && work:
		return fmt.Errorf("the embeddings server did not embed a test text: %w; nothing enqueued: run again once it answers (or with --no-work, to leave the jobs to the serves)", err)
	case err != nil:
		a.logger.WarnContext(ctx, "the embeddings server did not embed a test text from here; enqueueing for the serves all the same", "embed_model", emb.Model(), "error", err)
		return nil
	case dims <= 0:
		return nil
	case len(v) != 1:
		return fmt.Errorf("--dims %d not checked: the embeddings server returned %d vectors for 1 text; nothing recorded", dims, len(v))
	case len(v[0]) != dims:
		return fmt.Errorf("--dims %d: the embeddings server's vectors have %d dimensions; nothing recorded (run with --dims %d)", dims, len(v[0]), len(v[0]))
	}
	return nil
}

// probeAttempts bounds the test text's tries, probeRetryWait apart: a
// server's passing failure (a 5xx, a connection closed or refused) is
// tried again, where one 500 or EOF of a server that answered the next
// request failed the whole backfill (a probe: 2 of 12 runs). A server
// that asks to wait (a 429, or a 503 with Retry-After) is waited for as
// long as it asks (a 429 without the header: 1 s), up to
// probeMaxRetryAfter, so that the backfill waits at most 20 s on it;
// before, 1 s whatever it asked. A refusal is not tried again, nor a
// failure that took probeSlow or the client's own timeout (Timeout) or
// longer (a timeout: the next would wait as long; under --embed-timeout
// 200ms, three were sent where probeSlow alone counted).
const (
	probeAttempts      = 3
	probeRetryWait     = time.Second
	probeMaxRetryAfter = 10 * time.Second
	probeSlow          = 5 * time.Second
)

// probeEmbed embeds the test text, tried again as probeAttempts says,
// waiting with wait (waitCtx; a test records the waits instead).
func probeEmbed(ctx context.Context, emb interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}, wait func(context.Context, time.Duration) error) ([][]float32, error) {
	slow := probeSlow
	if t, ok := emb.(interface{ Timeout() time.Duration }); ok && t.Timeout() < slow {
		slow = t.Timeout()
	}
	for attempt := 1; ; attempt++ {
		start := time.Now()
		v, err := emb.Embed(ctx, []string{"memoryd: the dimensions of this model's vectors"})
		if err == nil || attempt == probeAttempts || errors.Is(err, embedding.ErrPermanent) || embedding.IsMisconfigured(err) ||
			time.Since(start) >= slow || ctx.Err() != nil {
			return v, err
		}
		d := probeRetryWait
		if after, ok := embedding.RetryAfterOf(err); ok {
			d = min(after, probeMaxRetryAfter)
		}
		if wait(ctx, d) != nil {
			return v, err
		}
	}
}

// waitCtx waits d, or until ctx ends (its error then).
func waitCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// EmbedBackfill enqueues embed jobs for every item (of o.User, or every
// user's) without a vector of the configured model, and for every chunk of
// a document without one (see EmbedOptions.Documents), and, with o.Work, runs
// them in this process; it returns how many items it enqueued. Use
// WaitEmbedded to wait for them.
func (a *App) EmbedBackfill(ctx context.Context, o EmbedOptions) (int, error) {
	a.mu.Lock()
	emb, err := a.embedder()
	if err == nil && emb == nil {
		err = ErrEmbeddingOff
	}
	if err == nil {
		err = a.probeEmbedder(ctx, emb, o.Dims, o.Work)
	}
	var s *store.Store
	if err == nil {
		s, err = a.openStoreToWork(ctx)
	}
	if err == nil && o.Work && a.worker == nil {
		// Embed jobs alone: an extraction job run here would use this
		// command's extractor (the offline rules, without --llm-base-url),
		// not the serves'.
		err = a.startEmbeddingLocked(ctx, s)
	}
	enq := (*worker.Enqueuer)(nil)
	if err == nil && a.worker != nil {
		enq = a.worker.Enqueuer()
	} else if err == nil {
		enq, err = worker.NewEnqueuer(worker.EnqueuerConfig{Store: s, Logger: a.logger})
	}
	a.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if o.Mark != nil {
		if *o.Mark, err = s.MarkEmbeddings(ctx); err != nil {
			return 0, err
		}
	}
	if o.Dims > 0 {
		if _, err := s.SetEmbeddingDims(ctx, emb.Model(), o.Dims); err != nil {
			return 0, err
		}
	}
	// The operator says the server is back: jobs waiting out a backoff
	// from when it was not run now, rather than keep the backfill waiting.
	if _, err := enq.RetryWaitingEmbeds(ctx, emb.Model()); err != nil {
		return 0, err
	}
	// With Dims, the refusals recorded before the dimensions last changed
	// were the old model's: the new one may take those texts. Of the
	// backfill's scope, which it sends again (those of other users, a
	// backfill of theirs with Dims or --retry-refused). Those since, the
	// new model's, stay: before, a backfill with Dims again (of another
	// user, or after one interrupted) kept the old model's too, as the
	// dimensions no longer changed.
	var f, fc int64
	forget := o.RetryRefused
	switch {
	case o.RetryRefused:
		if f, err = s.ForgetEmbeddingRefusals(ctx, o.User, emb.Model()); err != nil {
			return 0, err
		}
		if fc, err = s.ForgetChunkEmbeddingRefusals(ctx, o.User, emb.Model()); err != nil {
			return 0, err
		}
	case o.Dims > 0:
		if f, fc, err = s.ForgetStaleEmbeddingRefusals(ctx, o.User, emb.Model()); err != nil {
			return 0, err
		}
		forget = f+fc > 0
	}
	if o.Forgot != nil {
		*o.Forgot = forget
	}
	if forget {
		if o.Refused != nil {
			*o.Refused = f
		}
		if o.RefusedChunks != nil {
			*o.RefusedChunks = fc
		}
	} else {
		if o.Refused != nil {
			c, err := s.CountEmbeddings(ctx, o.User, emb.Model())
			if err != nil {
				return 0, err
			}
			*o.Refused = c.Refused
		}
		if o.RefusedChunks != nil {
			c, err := s.CountChunkEmbeddings(ctx, o.User, emb.Model())
			if err != nil {
				return 0, err
			}
			*o.RefusedChunks = c.Refused
		}
	}
	n, err := enq.EnqueueMissingEmbeddings(ctx, o.User, emb.Model(), a.cfg.Worker.EmbedJobSize, a.cfg.Worker.EmbedMaxAttempts)
	if err != nil {
		return n, err
	}
	d, err := enq.EnqueueMissingChunkEmbeddings(ctx, o.User, emb.Model(), a.cfg.Worker.EmbedJobSize, a.cfg.Worker.EmbedMaxAttempts)
	if o.Documents != nil {
		*o.Documents = d
	}
	return n, err
}

// WaitEmbedded waits until every item of user (every user's when empty),
// and every chunk of a ready document of the collections user owns (of
// every collection when empty), that existed at mark (EmbedOptions.Mark; the
// zero mark: whenever they came) has a vector of the configured model,
// calling progress when the items' or the chunks' count changes. Bounded by a mark, the
// wait ends while new memory keeps arriving (a backfill beside a serve
// that ingests: the new items' own jobs embed them). It returns ctx's
// error when ctx ends first, and a *NotEmbeddedError when some still lack
// one while no embed job of the model is left to run: the server refused
// them, or their jobs gave up.
func (a *App) WaitEmbedded(ctx context.Context, user string, mark store.EmbeddingMark, progress func(items, chunks store.EmbeddingCount)) error {
	if a.cfg.Embed.BaseURL == "" {
		return ErrEmbeddingOff
	}
	s, err := a.readStore(ctx)
	if err != nil {
		return err
	}
	last, lastChunks := store.EmbeddingCount{Items: -1}, store.EmbeddingCount{Items: -1}
	// Stuck is the shortfall of the last poll that found no job left: it
	// ends the wait only when the next poll finds the same (a write
	// inserts its items and their job in one transaction, which can
	// commit between this poll's two reads).
	var stuck *NotEmbeddedError
	return poll(ctx, 200*time.Millisecond, func() (bool, error) {
		// Read before the counts: a job that ends between the two reads
		// has saved its vectors by then.
		live, err := s.LiveEmbedJobs(ctx, []string{worker.EmbedJobKind, worker.ChunkEmbedJobKind}, []string{worker.EmbedSweepJobKind}, a.cfg.Embed.StoredModel())
		if err != nil {
			return false, err
		}
		n, err := s.CountEmbeddingsAt(ctx, user, a.cfg.Embed.StoredModel(), mark)
		if err != nil {
			return false, err
		}
		c, err := s.CountChunkEmbeddingsAt(ctx, user, a.cfg.Embed.StoredModel(), mark)
		if err != nil {
			return false, err
		}
		if (n != last || c != lastChunks) && progress != nil {
			progress(n, c)
		}
		last, lastChunks = n, c
		if n.Embedded >= n.Items && c.Embedded >= c.Items {
			return true, nil
		}
		if live > 0 {
			stuck = nil
			return false, nil
		}
		now := &NotEmbeddedError{Model: a.cfg.Embed.StoredModel(), Items: n.Items - n.Embedded, Refused: n.Refused, Chunks: max(c.Items-c.Embedded, 0), ChunksRefused: c.Refused}
		if stuck != nil && *stuck == *now {
			return false, now
		}
		stuck = now
		return false, nil
	})
}

// NotEmbeddedError is a wait for vectors that cannot end: items or chunks
// lack a vector of the model and no embed job of it is left to run.
type NotEmbeddedError struct {
	Model         string
	Items, Chunks int64
	// Refused is how many of Items the server refused as input, recorded
	// (store.SaveEmbeddingRefusals): no sweep or backfill sends them
	// again until their text or the model changes.
	Refused int64
	// ChunksRefused is as Refused, of Chunks.
	ChunksRefused int64
}

func (e *NotEmbeddedError) Error() string {
	return fmt.Sprintf("%s and %s have no %s vector and no embed job is left for them: "+
		"the embeddings server refused them (a text it does not take: see the log of the process that ran the jobs) or their jobs ran out of attempts; "+
		"they are searched by their words meanwhile, and the hourly sweep (or memoryd embed --backfill) tries them again%s",
		Plural(max(e.Items, 0), "context item", "context items"), Plural(e.Chunks, "document chunk", "document chunks"), e.Model, e.refusedNote())
}

// Plural is n with the noun's singular or plural form: "1 context item",
// "2 context items", for the counts the commands print.
func Plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// refusedNote is what Error says of the items recorded as refused.
func (e *NotEmbeddedError) refusedNote() string {
	if e.Refused <= 0 && e.ChunksRefused <= 0 {
		return ""
	}
	return fmt.Sprintf(", but for the %s and %s whose text it refused as input: recorded as refused, they are left out until their text or the model changes "+
		"(memoryd embed --backfill --retry-refused sends them again, once the server takes longer texts)", Plural(e.Refused, "item", "items"), Plural(e.ChunksRefused, "document chunk", "document chunks"))
}
