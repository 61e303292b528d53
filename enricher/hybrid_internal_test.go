package enricher

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/store"
)

func TestNoiseMax(t *testing.T) {
	// Exact expected maxima of n standard normals (tables of order
	// statistics).
	for _, c := range []struct {
		n    int
		want float64
	}{{1, 0}, {2, 0.5642}, {5, 1.1630}, {10, 1.5388}, {100, 2.5076}, {1000, 3.2414}} {
		if got := noiseMax(c.n); math.Abs(got-c.want) > 0.03 {
			t.Errorf("noiseMax(%d) = %.4f, want %.4f ± 0.03", c.n, got, c.want)
		}
	}
}

func TestVectorScore(t *testing.T) {
	nm := noiseMax(1000)
	for _, c := range []struct {
		name           string
		cos, mean, std float64
		pop, n         int
		want           float64
	}{
		{"at the mean", 0.5, 0.5, 0.05, 1000, 1000, 0},
		{"as the best unrelated item would be", 0.5 + nm*0.05, 0.5, 0.05, 1000, 1000, 0},
		{"0.86 sd above it: 0.3", 0.5 + (nm+0.857142857)*0.05, 0.5, 0.05, 1000, 1000, 0.3},
		{"2 sd above it: 0.5", 0.5 + (nm+2)*0.05, 0.5, 0.05, 1000, 1000, 0.5},
		// The same margin in another model's range scores the same: the
		// calibration is model-independent.
		{"openai-like range", 0.2 + (nm+2)*0.08, 0.2, 0.08, 1000, 1000, 0.5},
		{"below the mean", 0.3, 0.5, 0.05, 1000, 1000, 0},
		{"too few items", 0.9, 0.5, 0.05, 2, 2, 0},
		{"no spread", 0.9, 0.5, 0, 1000, 1000, 0},
		{"nothing searched", 0.9, 0.5, 0.05, 1000, 0, 0},
		{"NaN", math.NaN(), 0.5, 0.05, 1000, 1000, 0},
		// A narrow range searched (n=1) against a large population: the
		// chance maximum of one item is 0.
		{"one item searched", 0.5 + 2*0.05, 0.5, 0.05, 1000, 1, 0.5},
	} {
		if got := vectorScore(c.cos, c.mean, c.std, c.pop, c.n); math.Abs(got-c.want) > 1e-6 {
			t.Errorf("%s: vectorScore = %.6f, want %.6f", c.name, got, c.want)
		}
	}
}

// TestFuse: fused scores on constructed candidates where the lexical and
// vector sides disagree or agree.
func TestFuse(t *testing.T) {
	at := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	item := func(id int64) store.ContextItem { return store.ContextItem{ID: id, CreatedAt: at} }
	present := []store.TermCount{{Present: true, Question: 1}}
	absent := []store.TermCount{{}}
	c := store.Candidates{
		Terms: []string{"canin"},
		Stats: store.ItemStats{Items: 100, AvgQuestionLen: 5, AvgAnswerLen: 5},
		Matches: []store.Candidate{
			{Item: item(1), QuestionLen: 5, AnswerLen: 5, Terms: present}, // lexical only
			{Item: item(2), QuestionLen: 5, AnswerLen: 5, Terms: absent},  // vector only
			{Item: item(3), QuestionLen: 5, AnswerLen: 5, Terms: present}, // both
			{Item: item(4), QuestionLen: 5, AnswerLen: 5, Terms: absent},  // neither
		},
	}
	lexical := Rank(c, at, 0, 10)
	if len(lexical) != 2 {
		t.Fatalf("lexical ranking %v", lexical)
	}
	l := lexical[0].Score // items 1 and 3 score the same
	ids := func(items []store.ContextItem) []int64 {
		out := []int64{}
		for _, it := range items {
			out = append(out, it.ID)
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		vec       map[int64]float64
		threshold float64
		limit     int
		want      []int64
		scores    []float64
	}{
		{"no vector side: exactly the lexical ranking", nil, 0, 10, ids(lexical), []float64{l, l}},
		{"vector beats lexical", map[int64]float64{2: 0.9}, 0, 10, []int64{2, 3, 1}, []float64{0.9, l, l}},
		{"agreement ranks first", map[int64]float64{2: 0.5, 3: 0.2}, 0, 10, []int64{3, 1, 2}, []float64{1 - (1-l)*0.8, l, 0.5}},
		{"threshold means the same", map[int64]float64{2: 0.29, 3: 0.01}, 0.3, 10, []int64{3, 1}, []float64{1 - (1-l)*0.99, l}},
		{"limit", map[int64]float64{2: 0.9}, 0, 1, []int64{2}, []float64{0.9}},
	} {
		got := fuse(c, tc.vec, at, tc.threshold, tc.limit)
		var scores []float64
		for _, it := range got {
			scores = append(scores, it.Score)
		}
		if !slices.Equal(ids(got), tc.want) || len(scores) != len(tc.scores) {
			t.Errorf("%s: %v %v, want %v %v", tc.name, ids(got), scores, tc.want, tc.scores)
			continue
		}
		for i := range scores {
			if math.Abs(scores[i]-tc.scores[i]) > 1e-9 {
				t.Errorf("%s: scores %v, want %v", tc.name, scores, tc.scores)
			}
		}
	}
	// An old item's vector score is discounted by recency as its lexical
	// score is.
	old := store.Candidates{Stats: c.Stats, Matches: []store.Candidate{{Item: store.ContextItem{ID: 9, CreatedAt: at.AddDate(-1, 0, 0)}}}}
	if got := fuse(old, map[int64]float64{9: 0.5}, at, 0, 1); len(got) != 1 || !(got[0].Score < 0.5 && got[0].Score > 0.475) {
		t.Errorf("a year-old vector match scored %v, want 0.5 less a recency discount of at most 5%%", got)
	}
	if got := fuse(store.Candidates{}, nil, at, 0, 5); got == nil || len(got) != 0 {
		t.Errorf("no candidates: %#v, want an empty non-nil slice", got)
	}
}

// TestVectorCacheBudget: the cache keeps users within its byte budget,
// evicting the least recently used first, replaces a user's entry, never
// keeps one over the whole budget, and finds an entry only for its
// dimensions.
func TestVectorCacheBudget(t *testing.T) {
	entry := func(user string, bytes int64) *userVectors {
		return &userVectors{key: cacheKey{user: user, model: "m"}, dims: 8, bytes: bytes}
	}
	c := newVectorCache(100)
	c.put(entry("a", 40))
	c.put(entry("b", 40))
	if c.get("a", "m", 8) == nil { // a is now the most recently used
		t.Fatal("a missing")
	}
	c.put(entry("c", 40)) // evicts b
	if c.get("b", "m", 8) != nil || c.get("a", "m", 8) == nil || c.get("c", "m", 8) == nil {
		t.Fatal("want b evicted, a and c kept")
	}
	if users, bytes := c.size(); users != 2 || bytes != 80 {
		t.Fatalf("size %d users %d bytes, want 2 and 80", users, bytes)
	}
	c.put(entry("a", 50)) // replaced, not added
	if users, bytes := c.size(); users != 2 || bytes != 90 {
		t.Fatalf("after replacing a: %d users %d bytes, want 2 and 90", users, bytes)
	}
	c.put(entry("huge", 101))
	if c.get("huge", "m", 8) != nil {
		t.Error("an entry over the budget was kept")
	}
	if c.get("a", "m", 16) != nil {
		t.Error("an entry of 8 dimensions was found for a 16-dimensional query")
	}
	if c.get("a", "other", 8) != nil {
		t.Error("an entry of model m was found for model other")
	}
}

// TestQueryBreaker: breakerFailures query embeddings failed in a row open
// the breaker: the next queries are not sent, but for a probe every
// breakerProbe; a probe's success closes it, a failure keeps it open. A
// success before the count is reached starts it again.
func TestQueryBreaker(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 11, 0, 0, 0, time.UTC)
	var b queryBreaker
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	for i := range breakerFailures - 1 {
		b.record(at(time.Duration(i)*time.Millisecond), false)
	}
	b.record(at(10*time.Millisecond), true)
	for i := range breakerFailures - 1 {
		if !b.allow(at(20 * time.Millisecond)) {
			t.Fatalf("held back after %d failures since a success", i)
		}
		b.record(at(20*time.Millisecond), false)
	}
	b.record(at(30*time.Millisecond), false) // the fifth in a row
	for _, c := range []struct {
		at   time.Duration
		sent bool
		ok   bool // the sent query's outcome
	}{
		{31 * time.Millisecond, false, false},
		{30*time.Millisecond + breakerProbe - time.Millisecond, false, false},
		{30*time.Millisecond + breakerProbe, true, false}, // a probe, failing
		{30*time.Millisecond + breakerProbe + time.Millisecond, false, false},
		{30*time.Millisecond + 2*breakerProbe, true, true}, // a probe, answered
		{30*time.Millisecond + 2*breakerProbe + time.Millisecond, true, true},
	} {
		sent := b.allow(at(c.at))
		if sent != c.sent {
			t.Fatalf("at +%v: sent %v, want %v", c.at, sent, c.sent)
		}
		if sent {
			b.record(at(c.at), c.ok)
		}
	}
}

// heldBackEmbedder fails every query as embedding.Client does while it
// holds requests back for a server that counts as down.
type heldBackEmbedder struct{ calls int }

func (e *heldBackEmbedder) Embed(context.Context, []string) ([][]float32, error) {
	e.calls++
	return nil, &embedding.Error{Kind: embedding.KindTransient, Reason: "not sent", Unreachable: true, Misconfigured: true,
		NotSent: true, HeldBack: true, ProbeIn: time.Second}
}
func (e *heldBackEmbedder) Model() string { return "m" }

// TestHeldBackQueryIsSkipped: a query the embeddings client held back
// (not sent: the server counts as down, another request probes it) is
// answered lexically as skipped, not as the server's failure: the breaker
// does not count it (it learnt nothing of the server), and the
// skipped outcome says no request was made.
func TestHeldBackQueryIsSkipped(t *testing.T) {
	emb := &heldBackEmbedder{}
	h := newHybrid(Config{Embedder: emb, EmbedTimeout: time.Second, Timeout: 2 * time.Second}, slog.New(slog.DiscardHandler))
	for range breakerFailures + 1 {
		if v := h.embed(context.Background(), "alice", "where is my dog", 0); v != nil {
			t.Fatal("a vector from a query held back")
		}
	}
	if got := h.outcomes[EmbedSkipped].Load(); got != breakerFailures+1 || h.outcomes[EmbedError].Load() != 0 {
		t.Errorf("%d skipped, %d errors; want every query held back counted as skipped", got, h.outcomes[EmbedError].Load())
	}
	if h.breaker.failed != 0 || emb.calls != breakerFailures+1 {
		t.Errorf("breaker counted %d failures, %d queries reached the client; want none counted, each asked of the client (its probe's turn)",
			h.breaker.failed, emb.calls)
	}
}
