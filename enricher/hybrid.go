package enricher

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sync/singleflight"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/ranking"
	"github.com/memoryd/memoryd/redact"
	"github.com/memoryd/memoryd/store"
)

// Hybrid retrieval (issue 17 items 2 and 3). With Config.Embedder set,
// enrich and search embed the query, score it against the user's vectors
// (cached per process, vcache.go) and fuse the two sides into one score:
//
//  1. The query is embedded within Config.EmbedTimeout. Any failure (down,
//     slow, rate-limited, a reply without a usable vector) answers the
//     request lexically, exactly as without embeddings: never degraded,
//     counted by outcome (Service stats, EmbedObserver).
//  2. The cached vectors of the user (in the request's scope and range)
//     are searched exactly (embedding.Index: sign prefilter, int8
//     rescoring), and the items whose similarity stands out are calibrated
//     into a vector score in 0..1 (vectorScore).
//  3. Their ids go into the one read of candidates (store.Recall), which
//     returns them with their text beside the keyword matches, and the
//     user's embedding generation, which says whether the cache was current
//     (see vectorCache; when not, the vectors are read again).
//  4. fuse combines each candidate's lexical score (ranking, unchanged) and
//     vector score.

// QueryEmbedder embeds queries; *embedding.Client satisfies it. It is
// declared here, where it is used, so that tests can pass any embedder.
type QueryEmbedder interface {
	// Embed returns one vector per text.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Model is the model's name, as stored with the items' vectors.
	Model() string
}

// VectorReader reads a user's vectors of a model, with their generation
// (*store.Store does).
type VectorReader interface {
	UserVectors(ctx context.Context, userID, model string) (store.UserVectors, error)
}

// EmbedObserver is told the outcome of every query embedding, when
// Config.Observer implements it (e.g. for a counter by outcome).
type EmbedObserver interface {
	QueryEmbedded(outcome string, took time.Duration)
}

// Outcomes of a query embedding.
const (
	EmbedOK          = "ok"
	EmbedTimeout     = "timeout"
	EmbedRateLimited = "rate_limited"
	EmbedError       = "error"
	// EmbedSkipped: not asked, the server having failed the last
	// breakerFailures queries in a row (queryBreaker), or the client
	// holding requests back while the server counts as down
	// (embedding.HeldBackFor).
	EmbedSkipped = "skipped"
)

var embedOutcomes = []string{EmbedOK, EmbedTimeout, EmbedRateLimited, EmbedError, EmbedSkipped}

// EmbedOutcomes are every outcome EmbedObserver.QueryEmbedded reports, so
// that a metric can show each at 0 before its first event.
func EmbedOutcomes() []string { return slices.Clone(embedOutcomes) }

// DefaultEmbedTimeout is Config.EmbedTimeout's default: 100ms of enrich's
// default 250ms, which leaves the store read (a few milliseconds) ample
// room. A local Ollama embeds a short query in 10 to 50ms; a hosted API
// may need more, and a deployment that wants it raises Timeout with it.
const DefaultEmbedTimeout = 100 * time.Millisecond

// Tuning of the vector side.
const (
	// VectorHalf is ranking.VectorHalf, the z-score margin at which an
	// item's vector score is 0.5 (ranking.Hybrid.VectorScore).
	VectorHalf = ranking.VectorHalf
	// vectorCandidates is the most items the vector side adds to the
	// candidates.
	vectorCandidates = 50
	// prefilterCandidates and statsSample tune embedding.Index.Search (see
	// embedding's TestPrefilterRecall and BenchmarkIndexSearch).
	prefilterCandidates = 192
	statsSample         = 64
	// maxQueryBytes bounds the text embedded: the start of a long message
	// says what it is about, and an embedding model's input is limited.
	maxQueryBytes = 4 << 10
	// warnEvery spaces the warnings of failed query embeddings (the rest
	// are logged at debug; all are counted).
	warnEvery = 10 * time.Second
)

// hybrid is the vector side of enrich and search. Nil when Config.Embedder
// is unset.
type hybrid struct {
	emb     QueryEmbedder
	model   string
	timeout time.Duration
	// reserve is the store's share of an enrich's budget (Timeout less
	// EmbedTimeout): an enrich's embedding never eats into it, even when
	// the request waited for its turn.
	reserve  time.Duration
	lastWarn atomic.Int64 // unix nanoseconds of the last failure logged at warn
	breaker  queryBreaker
	vectors  VectorReader
	cache    *vectorCache
	logger   *slog.Logger
	observer EmbedObserver // may be nil

	outcomes map[string]*atomic.Int64
	// reloads counts reads of a user's vectors; stale the requests answered
	// lexically because the vectors changed twice while they were read.
	reloads, stale atomic.Int64
	// otherDims counts the requests answered lexically because the user's
	// vectors all have other dimensions than the query's (otherDimsWarn).
	otherDims atomic.Int64
	// docFallbacks counts the document searches answered lexically because
	// their hybrid search failed (dochybrid.go).
	docFallbacks atomic.Int64
	// loads shares one read of a user's vectors among the requests that
	// miss the cache at the same generation (a burst of one user's
	// requests, after each turn's vectors change the generation): each
	// read and indexed every vector, a copy per request in memory at once
	// (a race review: 64 requests, 64 reads, 138 MB for a 2,000-item user).
	loads singleflight.Group
}

func newHybrid(cfg Config, logger *slog.Logger) *hybrid {
	if cfg.Embedder == nil {
		return nil
	}
	h := &hybrid{emb: cfg.Embedder, model: cfg.Embedder.Model(), timeout: cfg.EmbedTimeout, reserve: cfg.Timeout - cfg.EmbedTimeout, vectors: cfg.Store,
		cache: newVectorCache(cfg.VectorCacheBytes), logger: logger, outcomes: map[string]*atomic.Int64{}}
	h.observer, _ = cfg.Observer.(EmbedObserver)
	for _, o := range embedOutcomes {
		h.outcomes[o] = new(atomic.Int64)
	}
	return h
}

// stats are the hybrid counters shown in the enrich endpoint's stats (flat
// numbers, as the others): query embeddings by outcome
// (query_embeddings_ok, _timeout, _rate_limited, _error), the vector
// cache's users (document collections count as users), bytes, hits,
// misses, reloads and stale answers, and the document searches answered
// lexically because their hybrid search failed (doc_vector_fallbacks).
func (h *hybrid) stats() map[string]any {
	out := map[string]any{}
	for o, n := range h.outcomes {
		out["query_embeddings_"+o] = n.Load()
	}
	users, bytes := h.cache.size()
	out["vector_cache_users"], out["vector_cache_bytes"] = users, bytes
	out["vector_cache_hits"], out["vector_cache_misses"] = h.cache.hits.Load(), h.cache.misses.Load()
	out["vector_cache_reloads"], out["vector_cache_stale"] = h.reloads.Load(), h.stale.Load()
	out["query_vectors_other_dims"] = h.otherDims.Load()
	out["doc_vector_fallbacks"] = h.docFallbacks.Load()
	return out
}

// embedEnrich is embed for an enrich request, whose budget keeps the
// store's share (reserve). Nil-safe, as embed.
func (h *hybrid) embedEnrich(ctx context.Context, userID, text string) []float32 {
	if h == nil {
		return nil
	}
	return h.embed(ctx, userID, text, h.reserve)
}

// embed returns text's unit-length query vector, or nil when the request
// is to be answered lexically. It takes at most the configured timeout,
// and ends reserve before ctx's deadline.
func (h *hybrid) embed(ctx context.Context, userID, text string, reserve time.Duration) []float32 {
	if h == nil {
		return nil
	}
	text = embedText(text)
	start := time.Now()
	if !h.breaker.allow(start) {
		h.outcomes[EmbedSkipped].Add(1)
		if h.observer != nil {
			h.observer.QueryEmbedded(EmbedSkipped, 0)
		}
		return nil
	}
	timeout := h.timeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d)-reserve)
	}
	ectx, cancel := context.WithTimeout(ctx, max(timeout, 0))
	defer cancel()
	var (
		vs  [][]float32
		err error
		v   []float32
	)
	if timeout > 0 {
		vs, err = h.emb.Embed(ectx, []string{text})
	} else {
		err = context.DeadlineExceeded // the request waited its share away
	}
	if err == nil {
		if len(vs) != 1 {
			err = errors.New("embedder returned no vector")
		} else if v = unitVector(vs[0]); v == nil {
			err = errors.New("embedder returned a zero or non-finite vector")
		}
	}
	outcome := EmbedOK
	_, held := embedding.HeldBackFor(err)
	switch {
	case err == nil:
	case held:
		// Not sent: the client holds requests back while the server
		// counts as down (or refuses the key), and probes it.
		outcome = EmbedSkipped
	case ectx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		outcome = EmbedTimeout
	case errors.Is(err, embedding.ErrRetryAfter):
		outcome = EmbedRateLimited
	default:
		outcome = EmbedError
	}
	took := time.Since(start)
	// The server's failure only when it had about the whole share and the
	// request is still waited for: a request that came with less (it
	// waited part of its share away in a queue) or was given up by its
	// client says nothing of the server. Nor does a refusal of the query's
	// own text (400, 413, 422: longer than the model's context): one user
	// pasting long texts made every other user's queries lexical.
	// Nor does a request held back, which was not sent.
	if err == nil || (!held && timeout >= h.timeout*9/10 && ctx.Err() == nil && !embedding.RefusedInput(err)) {
		h.breaker.record(time.Now(), err == nil)
	}
	h.outcomes[outcome].Add(1)
	if h.observer != nil {
		h.observer.QueryEmbedded(outcome, took)
	}
	if err != nil {
		// Warn, at most every warnEvery: the operator should know, but an
		// endpoint that is down fails every request. The error never holds
		// the text.
		msg := "query embedding failed; answering lexically"
		if embedding.IsMisconfigured(err) {
			msg = msgQueryRefused
		}
		h.logger.Log(ctx, h.warnLevel(), msg, "user_id", userID, "outcome", outcome,
			"took_ms", millis(took), "error", err)
		return nil
	}
	return v
}

// msgQueryRefused is the warning of a query embedding the server refused
// for memoryd's configuration (embedding.IsMisconfigured: a key rotated
// away, a model not served), naming what fixes it.
const msgQueryRefused = "embeddings server refuses memoryd's API key or model (--embed-api-key or --embed-api-key-file, --embed-model, --embed-base-url, --embed-dimensions); answering lexically"

// Query embeddings while the server fails: after breakerFailures in a row
// failed (timed out, refused, rate limited, unusable), the queries are
// answered lexically without asking it, but for one every breakerProbe,
// whose success ends it. A server that hangs, or is too slow for
// --embed-query-timeout (one busy with a backfill), cost every enrich the
// whole share, 100 ms by default, for an answer that was lexical anyway.
const (
	breakerFailures = 5
	breakerProbe    = time.Second
)

// queryBreaker counts the query embeddings failed in a row and, past
// breakerFailures, lets one through every breakerProbe. Safe for
// concurrent use.
type queryBreaker struct {
	mu     sync.Mutex
	failed int
	// next is when the next probe may go, once failed reached
	// breakerFailures.
	next time.Time
}

// allow reports whether a query may be sent at now: the breaker is
// closed, or a probe is due (and now taken).
func (b *queryBreaker) allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failed < breakerFailures {
		return true
	}
	if now.Before(b.next) {
		return false
	}
	b.next = now.Add(breakerProbe)
	return true
}

// record counts a query's outcome at now: a success closes the breaker,
// the failure that reaches breakerFailures opens it until a probe.
func (b *queryBreaker) record(now time.Time, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ok {
		b.failed = 0
		return
	}
	b.failed++
	if b.failed == breakerFailures {
		b.next = now.Add(breakerProbe)
	}
}

// unitVector returns a unit-length copy of v, or nil when v is empty, zero
// or not finite.
func unitVector(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if len(v) == 0 || sum == 0 || math.IsNaN(sum) || math.IsInf(sum, 0) {
		return nil
	}
	return embedding.Normalize(append([]float32(nil), v...))
}

// readFunc reads candidates (and facts, for enrich) for a search query.
type readFunc func(ctx context.Context, q store.SearchQuery) ([]store.Fact, store.Candidates, error)

// recall reads q's candidates with qv's vector side: the facts and
// candidates read, and the vector score of each candidate that has one.
// vec is nil when the request is to be ranked lexically: the user's vectors
// could not be read in time or cached, or changed twice while they were.
// Only the first read's error is returned: once it has answered, whatever
// the vector side meets (a slow or failed reload, a failed second read)
// answers lexically with it, within half the time left, so that the reply
// is never degraded because of the vectors.
func (h *hybrid) recall(ctx context.Context, q store.SearchQuery, qv []float32, limit int, read readFunc) ([]store.Fact, store.Candidates, map[int64]float64, error) {
	q.Hybrid = true
	e := h.cache.lookup(cacheKey{user: q.UserID, model: h.model}, len(qv))
	var vec map[int64]float64
	if e != nil {
		q.VectorIDs, vec = e.pick(qv, q, limit)
	}
	facts, cands, err := read(ctx, q)
	if err != nil {
		return facts, cands, vec, err
	}
	// A hit is an entry still current when the candidates were read.
	h.cache.count(e != nil && cands.Generation == e.generation)
	if e != nil && cands.Generation == e.generation {
		h.checkDims(ctx, q.UserID, e, len(qv))
		return facts, cands, vec, nil
	}
	if cands.Generation != 0 && h.cache.skipped(q.UserID, h.model, cands.Generation) {
		return facts, cands, nil, nil
	}
	// A miss, or the vectors changed since they were cached: read them
	// (one query, shared with the requests missing at once), within half
	// the time left.
	sub, cancel := halfLeft(ctx)
	defer cancel()
	e, ok := h.load(sub, q.UserID, len(qv), cands.Generation)
	if !ok {
		return facts, cands, nil, nil
	}
	h.checkDims(ctx, q.UserID, e, len(qv))
	ids, vec := e.pick(qv, q, limit)
	if e.generation == cands.Generation && containsAll(cands, ids) {
		return facts, cands, vec, nil
	}
	q.VectorIDs = ids
	facts2, cands2, err := read(sub, q)
	if err != nil {
		h.logger.Debug("the read with the vector side's picks failed; answering lexically", "user_id", q.UserID, "error", err)
		return facts, cands, nil, nil
	}
	if cands2.Generation != e.generation {
		// Changed again meanwhile: the vectors are not known to be the
		// candidates' (the next request reads them again).
		h.stale.Add(1)
		return facts2, cands2, nil, nil
	}
	return facts2, cands2, vec, nil
}

// load returns the user's vectors of dims, read and indexed once for all
// the requests that ask at once having read the candidates at generation
// (the vectors read may be newer), and cached; false when the request is
// to be answered lexically (not read in ctx's time, unreadable,
// unindexable). The read runs for the first request to ask, within its
// time, whichever of the requests waiting for it stop waiting; one that
// waited and has time left when that time ran out reads once more.
func (h *hybrid) load(ctx context.Context, user string, dims int, generation int64) (*userVectors, bool) {
	return h.loadOnce(ctx, user, dims, generation, false)
}

// loadOnce is load; retried says it is the second try.
func (h *hybrid) loadOnce(ctx context.Context, user string, dims int, generation int64, retried bool) (*userVectors, bool) {
	key := user + "\x00" + strconv.Itoa(dims) + "\x00" + strconv.FormatInt(generation, 10)
	ch := h.loads.DoChan(key, func() (any, error) {
		// Run for this request (the first to ask), within its time but
		// not cancelled with it alone: others may be waiting.
		dl, ok := ctx.Deadline()
		if !ok {
			dl = time.Now().Add(loadTimeout)
		}
		lctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), dl)
		defer cancel()
		// A request that missed just as another's load ended finds its
		// vectors here rather than reading them again.
		// Equal, not newer: a forget deletes the user's generation, so
		// theirs starts again from 0 and an older entry is not newer.
		if e := h.cache.lookup(cacheKey{user: user, model: h.model}, dims); e != nil && e.generation == generation {
			return e, nil
		}
		h.reloads.Add(1)
		uv := store.UserVectors{} // generation 0: no vectors, nothing to read
		if generation != 0 {
			var err error
			if uv, err = h.vectors.UserVectors(lctx, user, h.model); err != nil {
				if lctx.Err() != nil {
					h.logger.Debug("the user's vectors did not arrive in time; answering lexically", "user_id", user)
				} else {
					h.logger.Warn("cannot read the user's vectors; answering lexically", "user_id", user, "error", err)
				}
				return nil, err
			}
		}
		e, err := newUserVectors(user, h.model, dims, uv)
		if err != nil {
			h.cache.markSkip(user, h.model, uv.Generation)
			h.logger.Warn("cannot index the user's vectors; answering lexically", "user_id", user, "error", err)
			return nil, err
		}
		if !h.cache.put(e) {
			// Over the whole cache: used for these requests, then ranked
			// lexically until the user's vectors change (no read per
			// request).
			h.cache.markSkip(user, h.model, uv.Generation)
		}
		return e, nil
	})
	select {
	case r := <-ch:
		if r.Err == nil {
			return r.Val.(*userVectors), true
		}
		if errors.Is(r.Err, context.DeadlineExceeded) && ctx.Err() == nil && !retried {
			// The read ran out of another request's time, and this one
			// has time left: once more, within it.
			return h.loadOnce(ctx, user, dims, generation, true)
		}
		return nil, false
	case <-ctx.Done():
		return nil, false
	}
}

// checkDims counts, and says at warn at most every warnEvery, a request
// whose user's vectors all have other dimensions than its query's: the
// model behind --embed-model changed (an Ollama tag pulled anew), and the
// request is answered lexically until the items are embedded again.
func (h *hybrid) checkDims(ctx context.Context, user string, e *userVectors, dims int) {
	if e.index != nil || e.otherDims == 0 {
		return
	}
	h.otherDims.Add(1)
	h.logger.Log(ctx, h.warnLevel(), "the query's vector has other dimensions than the user's vectors: the model behind the name changed? answering lexically; run embed --backfill --dims N with the new model's dimensions",
		"user_id", user, "model", h.model, "query_dims", dims, "vectors", e.otherDims)
}

// warnLevel is warn at most every warnEvery, debug otherwise: what fails
// every request while it lasts (an endpoint down, a model changed) is
// said, not repeated per request.
func (h *hybrid) warnLevel() slog.Level {
	if last := h.lastWarn.Load(); time.Since(time.Unix(0, last)) >= warnEvery && h.lastWarn.CompareAndSwap(last, time.Now().UnixNano()) {
		return slog.LevelWarn
	}
	return slog.LevelDebug
}

// loadTimeout bounds a load for a request without a deadline.
const loadTimeout = 5 * time.Second

// halfLeft returns ctx bounded to half the time left before its deadline
// (ctx as it is without one): the other half is the lexical answer's.
func halfLeft(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, time.Now().Add(time.Until(dl)/2))
	}
	return context.WithCancel(ctx)
}

// containsAll reports whether every id is among c's candidates.
func containsAll(c store.Candidates, ids []int64) bool {
	have := make(map[int64]bool, len(c.Matches))
	for _, m := range c.Matches {
		have[m.Item.ID] = true
	}
	for _, id := range ids {
		if !have[id] {
			return false
		}
	}
	return true
}

// pick searches the entry for qv among the items q selects (its scope and
// range). It returns the vector scores above 0 of the vectorCandidates most
// similar items, and the ids of those that can make a fused top limit,
// best first: the ones the read must add to the keyword candidates. An
// item found by its vector alone scores v × recency, and recency takes at
// most RecencyWeight: one whose v is under (1 − RecencyWeight) times the
// limit-th best v has limit items above it whatever their age, so it need
// not be read (its score still counts if the keywords find it).
func (e *userVectors) pick(qv []float32, q store.SearchQuery, limit int) ([]int64, map[int64]float64) {
	if e.index == nil {
		return nil, nil
	}
	r := e.search(qv, q)
	var ids []int64
	vec := map[int64]float64{}
	floor := 0.0
	for _, hit := range r.Hits {
		v := vectorScore(float64(hit.Cos), r.Mean, r.Std, r.Population, r.N)
		if v <= 0 {
			break // hits are best first
		}
		vec[e.ids[hit.I]] = v
		if v > floor {
			ids = append(ids, e.ids[hit.I])
			if len(ids) == limit {
				floor = v * (1 - ranking.DefaultParams().RecencyWeight)
			}
		}
	}
	return ids, vec
}

// search is pick's search of the entry (whose index is not nil) for qv,
// among the items q selects.
func (e *userVectors) search(qv []float32, q store.SearchQuery) embedding.Result {
	since, until := int64(math.MinInt64), int64(math.MaxInt64)
	if !q.Since.IsZero() {
		since = q.Since.UnixNano()
	}
	if !q.Until.IsZero() {
		until = q.Until.UnixNano()
	}
	// The statistics are over the scope's items, the search over those in
	// the range: as on the lexical side (store.SearchQuery), a range
	// filters what is ranked, not how.
	p := embedding.SearchParams{K: vectorCandidates, Candidates: prefilterCandidates, Sample: statsSample}
	var keep func(int) bool
	if q.Scope != "" {
		p.Population = func(i int) bool { return e.scopes[i] == q.Scope }
		keep = p.Population
	}
	if since != math.MinInt64 || until != math.MaxInt64 {
		keep = func(i int) bool {
			return (q.Scope == "" || e.scopes[i] == q.Scope) && e.created[i] >= since && e.created[i] < until
		}
	}
	return e.index.Search(qv, keep, p)
}

// VectorSearch is the vector side's search of one query as a hybrid read
// runs it, before its scores: what tools/memeval -cv needs to score and
// fuse the hits again offline, with other constants (ranking.Hybrid).
type VectorSearch struct {
	// Hits are the most similar items searched (at most the vector side's
	// candidates, 50), best first.
	Hits []VectorHit
	// N, Population, Mean and Std are embedding.Result's: the items
	// searched, and the similarity's statistics over the scope's.
	N, Population int
	Mean, Std     float64
}

// VectorHit is an item the vector side found, with its similarity to the
// query.
type VectorHit struct {
	ID        int64
	CreatedAt time.Time
	Cos       float64
}

// SearchVectors searches uv, a user's vectors, for the query vector qv
// (QueryVector's) as a hybrid enrich does for q's scope and range, with the
// same index and search: its hits are those enrich scores.
func SearchVectors(uv store.UserVectors, qv []float32, q store.SearchQuery) (VectorSearch, error) {
	e, err := newUserVectors(q.UserID, "", len(qv), uv)
	if err != nil || e.index == nil {
		return VectorSearch{}, err
	}
	r := e.search(qv, q)
	out := VectorSearch{N: r.N, Population: r.Population, Mean: r.Mean, Std: r.Std}
	for _, h := range r.Hits {
		out.Hits = append(out.Hits, VectorHit{ID: e.ids[h.I], CreatedAt: time.Unix(0, e.created[h.I]).UTC(), Cos: float64(h.Cos)})
	}
	return out, nil
}

// QueryVector returns the query vector a hybrid enrich of message, sent
// at at, searches with (redacted, bounded, unit length, without the words
// of its time expression), without enrich's time limit or breaker; nil
// when enrich embeds nothing (a message of a time alone).
func QueryVector(ctx context.Context, emb QueryEmbedder, message string, at time.Time) ([]float32, error) {
	if !at.IsZero() {
		at = at.In(datesIn(at)) // as parseEnrich reads the request's time
	}
	p := enrichParams{message: message, at: at, keywords: []string{}}.analyze()
	text := queryText(p)
	if p.timed && strings.IndexFunc(text, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }) < 0 {
		return nil, nil // as queryVector: nothing but a time
	}
	vs, err := emb.Embed(ctx, []string{embedText(text)})
	if err != nil {
		return nil, err
	}
	if len(vs) != 1 {
		return nil, errors.New("embedder returned no vector")
	}
	v := unitVector(vs[0])
	if v == nil {
		return nil, errors.New("embedder returned a zero or non-finite vector")
	}
	return v, nil
}

// embedText is the text of a query embedded: the message as a turn would
// be recorded, so that a secret it holds is not sent to the embeddings
// server (maybe a third party's API), as none of a turn's is
// (docs/operations.md, "Sensitive data"), and at most maxQueryBytes.
func embedText(text string) string {
	text, _ = redact.Text(text)
	if len(text) > maxQueryBytes {
		text = text[:maxQueryBytes]
		for !utf8.ValidString(text) {
			text = text[:len(text)-1]
		}
	}
	return text
}

// vectorScore is the vector score of an item (ranking.Hybrid.VectorScore,
// with the default constants).
func vectorScore(cos, mean, std float64, pop, n int) float64 {
	return ranking.DefaultHybrid().VectorScore(cos, mean, std, pop, n)
}

// noiseMax is ranking.NoiseMax.
func noiseMax(n int) float64 { return ranking.NoiseMax(n) }

// fuse ranks candidates by lexical and vector evidence together: an item's
// score is 1 − (1 − l)(1 − v·r) (ranking.Hybrid.Fuse), where l is its
// lexical score (Rank, which includes recency), v its vector score
// (vectorScore; 0 for an item the vector side did not pick) and r
// ranking's recency factor at at. Each side
// alone gives its own score, so an item found by one side only scores
// exactly what that side says (a lexical-only item what lexical retrieval
// gives it: the threshold means the same in both modes), and agreement
// raises it. Items scoring at least threshold (and above 0) are returned
// best first (ties: newest, then highest id), at most limit, each with its
// Score. The result is never nil.
func fuse(c store.Candidates, vec map[int64]float64, at time.Time, threshold float64, limit int) []store.ContextItem {
	if at.IsZero() {
		at = time.Now()
	}
	if len(vec) == 0 {
		return Rank(c, at, threshold, limit) // the same scores, cheaper
	}
	lex := make(map[int64]float64, len(c.Matches))
	for _, it := range Rank(c, at, 0, len(c.Matches)) {
		lex[it.ID] = it.Score
	}
	p, h := ranking.DefaultParams(), ranking.DefaultHybrid()
	// Sorted by index with their keys, not as items: a few hundred
	// candidates' structs would be most of the cost.
	type scored struct {
		score   float64
		created int64
		id      int64
		i       int
	}
	var kept []scored
	for i, m := range c.Matches {
		it := &m.Item
		l, v := lex[it.ID], vec[it.ID]
		f := l
		if v > 0 {
			f = h.Fuse(l, v, p.Recency(at.Sub(it.CreatedAt).Seconds()))
		}
		if f > 0 && f >= threshold {
			kept = append(kept, scored{f, it.CreatedAt.UnixNano(), it.ID, i})
		}
	}
	slices.SortFunc(kept, func(x, y scored) int {
		if c := cmp.Compare(y.score, x.score); c != 0 {
			return c
		}
		if c := cmp.Compare(y.created, x.created); c != 0 {
			return c
		}
		return cmp.Compare(y.id, x.id)
	})
	items := make([]store.ContextItem, min(len(kept), max(limit, 0)))
	for k := range items {
		items[k] = c.Matches[kept[k].i].Item
		items[k].Score = kept[k].score
	}
	return items
}
