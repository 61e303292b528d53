package enricher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

const canineQuestion = "what is my canine companion named?"

// fakeEmbeddings starts the fake embeddings server (256 dimensions, so that
// few words share a dimension) where "canine companion named" means "dog
// dog called", and a client of it. Its bag of words makes the question
// words ("what is my") count as much as the rest: the dog's item stands
// out, but less than with a real model.
func fakeEmbeddings(t *testing.T) (*embeddingtest.Server, *embedding.Client) {
	t.Helper()
	srv := embeddingtest.New(t)
	srv.SetDims(256)
	srv.Alias("canine", "dog")
	srv.Alias("companion", "dog")
	srv.Alias("named", "called")
	c, err := embedding.New(embedding.Config{BaseURL: srv.URL, Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

// startHybrid runs a service over st whose queries are embedded with emb.
func startHybrid(t *testing.T, st *store.Store, emb *embedding.Client, configure func(*enricher.Config)) *harness {
	return start(t, st, func(c *enricher.Config) {
		c.Embedder = emb
		// The query's embedding gets most of start's budget: at the
		// default 100ms a loaded machine (the race detector, parallel
		// packages) times the fake out and the reply is lexical, which
		// the tests that expect a vector match would read as a bug. The
		// tests of a slow endpoint set their own.
		c.EmbedTimeout = c.Timeout / 2
		if configure != nil {
			configure(c)
		}
	})
}

// embedAll saves a vector of every item of user that lacks a current one,
// as the worker's embed job does (question, newline, answer).
func embedAll(t *testing.T, st *store.Store, emb *embedding.Client, user string) {
	t.Helper()
	ctx := ctxT(t)
	refs, err := st.MissingEmbeddings(ctx, user, emb.Model(), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) == 0 {
		return
	}
	var ids []int64
	for _, r := range refs {
		ids = append(ids, r.ID)
	}
	targets, err := st.EmbeddingTargets(ctx, user, ids, emb.Model())
	if err != nil {
		t.Fatal(err)
	}
	texts := make([]string, len(targets))
	for i, tg := range targets {
		texts[i] = tg.Question + "\n" + tg.Answer
	}
	vs, err := emb.Embed(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	ws := make([]store.EmbeddingWrite, len(targets))
	for i, tg := range targets {
		ws[i] = store.EmbeddingWrite{ContextID: tg.ID, ContentHash: tg.ContentHash, Dims: len(vs[i]), Vector: embedding.Encode(vs[i])}
	}
	if _, err := st.SaveEmbeddings(ctx, emb.Model(), ws); err != nil {
		t.Fatal(err)
	}
}

// fillers are memories unrelated to dogs.
var fillers = [][2]string{
	{"Where do I work?", "At the bakery on Main Street."},
	{"Which city do I live in?", "Lisbon, near the river."},
	{"What is my favourite colour?", "Green, like moss."},
	{"When is my sister's birthday?", "On the fourth of March."},
	{"Which language am I learning?", "Japanese, twice a week."},
	{"What car do I drive?", "An old blue Volvo estate."},
	{"What did the doctor say about my knee?", "Rest it for two weeks."},
	{"Which book am I reading?", "A novel about sailors in winter."},
	{"What is my usual coffee order?", "A flat white with oat milk."},
	{"Where did I go on holiday last summer?", "Crete, with friends from school."},
	{"Which team do I support?", "The local football club."},
	{"What instrument do I play?", "The cello, badly."},
	{"How do I get to the office?", "By tram and a short walk."},
	{"What is my allergy?", "Peanuts and shellfish."},
	{"Which plants are on my balcony?", "Tomatoes, basil and a lemon tree."},
	{"What is the wifi password hint?", "The street we live on, reversed."},
	{"Which dentist do I see?", "Doctor Silva on Rua Augusta."},
	{"What films do I like?", "Old westerns and quiet dramas."},
	{"What is my running distance?", "Ten kilometres on Sundays."},
	{"Which bank do I use?", "A small cooperative bank."},
}

// seedDogs gives user the fillers, the dog's name (which shares no
// keyword with canineQuestion) and the dog food (which shares "canine"'s
// stem with it), and returns the ids of the last two.
func seedDogs(t *testing.T, st *store.Store, user string) (dogName, dogFood int64) {
	t.Helper()
	var ws []store.ContextWrite
	for i, f := range fillers {
		ws = append(ws, store.ContextWrite{UserID: user, Question: f[0], Answer: f[1], CreatedAt: t0.Add(time.Duration(i) * time.Minute)})
	}
	ws = append(ws,
		store.ContextWrite{UserID: user, Question: "What is my dog called?", Answer: "My dog is called Rex.", CreatedAt: t0.Add(time.Hour)},
		store.ContextWrite{UserID: user, Question: "Which food do I buy for the puppy?", Answer: "Royal Canin puppy formula.", CreatedAt: t0.Add(2 * time.Hour)})
	ids := insertContext(t, st, ws...)
	return ids[len(ids)-2], ids[len(ids)-1]
}

// startDogs seeds alice's dogs (seedDogs) in a store of its own, embeds
// them with emb, and serves them hybrid.
func startDogs(t *testing.T, emb *embedding.Client) (*store.Store, *harness) {
	t.Helper()
	st := storetest.New(t)
	seedDogs(t, st, "alice")
	embedAll(t, st, emb, "alice")
	return st, startHybrid(t, st, emb, nil)
}

func contextIDs(items []events.ContextItem) []int64 {
	out := []int64{}
	for _, c := range items {
		out = append(out, c.ID)
	}
	return out
}

// enrichStats reads the enrich endpoint's stats data.
func enrichStats(t *testing.T, h *harness) map[string]float64 {
	t.Helper()
	var stats micro.Stats
	if err := json.Unmarshal(h.raw(t, "$SRV.STATS.memoryd."+h.svc.ID(), nil).Data, &stats); err != nil {
		t.Fatal(err)
	}
	for _, e := range stats.Endpoints {
		if e.Name == "enrich" {
			var data map[string]float64
			if err := json.Unmarshal(e.Data, &data); err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
	t.Fatalf("no enrich stats in %+v", stats)
	return nil
}

// TestHybridFindsByMeaning: lexical and vector evidence disagree. Keywords
// alone find the dog food ("canine" and "Canin" share a stem) and not the
// dog's name; hybrid retrieval finds the dog's name too (by the vector
// side, its text read in the same statement), over the default threshold,
// in enrich and in search. (The order of the two follows their evidence;
// fuse's table test checks orders on constructed scores.)
func TestHybridFindsByMeaning(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	_, emb := fakeEmbeddings(t)
	dogName, dogFood := seedDogs(t, st, "alice")
	embedAll(t, st, emb, "alice")
	zero, ten := 0.0, 10

	lexical := start(t, st, nil)
	r := enrich(t, lexical, events.EnrichRequest{UserID: "alice", Message: canineQuestion, Threshold: &zero, MaxResults: &ten})
	if got := contextIDs(r.Context); !slices.Equal(got, []int64{dogFood}) {
		t.Fatalf("lexical enrich found %v, want only the dog food %d (the constructed disagreement)", got, dogFood)
	}

	h := startHybrid(t, st, emb, nil)
	r = enrich(t, h, events.EnrichRequest{UserID: "alice", Message: canineQuestion, MaxResults: &ten})
	if got := contextIDs(r.Context); r.Degraded || !slices.Equal(got, []int64{dogFood, dogName}) || !strings.Contains(r.Injection, "Rex") {
		t.Fatalf("hybrid enrich: %+v, want the dog food (lexical %.3f) and the dog's name %d (vector side) over the default threshold, in the injection",
			r.Context, 0.0, dogName)
	}
	for _, c := range r.Context {
		if c.Score < events.DefaultThreshold || c.Score > 1 {
			t.Errorf("item %d scored %v", c.ID, c.Score)
		}
	}
	s, err := h.client.Search(ctxT(t), events.SearchRequest{UserID: "alice", Query: canineQuestion})
	if got := contextIDs(s.Results); err != nil || len(got) < 2 || !slices.Equal(got[:2], []int64{dogFood, dogName}) {
		t.Fatalf("hybrid search: %+v %v, want the dog food and the dog's name first (no threshold: weaker items after)", s.Results, err)
	}
	if st := enrichStats(t, h); st["query_embeddings_ok"] != 2 || st["vector_cache_users"] != 1 || st["vector_cache_hits"] != 1 {
		t.Errorf("stats %v: want 2 embeddings ok, one user cached, the search a cache hit", st)
	}
}

// textsStore is a real store that counts the items whose texts a search
// asks for.
type textsStore struct {
	*store.Store
	mu    sync.Mutex
	texts []int // ContextTexts' items, per call
}

func (s *textsStore) ContextTexts(ctx context.Context, userID string, items []store.ContextItem) ([]store.ContextItem, error) {
	s.mu.Lock()
	s.texts = append(s.texts, len(items))
	s.mu.Unlock()
	return s.Store.ContextTexts(ctx, userID, items)
}

// TestHybridSearchReadsOnlyItsHitsTexts: a hybrid search ranks the
// candidates first and reads the texts of its hits alone, as a lexical
// one does (a heavy user's candidates are thousands of ~2 KB texts), and
// its results are the first of a longer search's, with their texts.
func TestHybridSearchReadsOnlyItsHitsTexts(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	_, emb := fakeEmbeddings(t)
	seedDogs(t, st, "alice")
	// More candidates than a read returns with their texts (a heavy
	// user's case): each of these holds a word of the query.
	var more []store.ContextWrite
	for i := range 40 {
		more = append(more, store.ContextWrite{UserID: "alice", Question: fmt.Sprintf("Note %d about my teeth", i),
			Answer: "Brush twice a day.", CreatedAt: t0.Add(time.Duration(i) * time.Second)})
	}
	insertContext(t, st, more...)
	embedAll(t, st, emb, "alice")
	ts := &textsStore{Store: st}
	h := start(t, ts, func(c *enricher.Config) { c.Embedder, c.EmbedTimeout = emb, c.Timeout/2 })
	search := func(limit int) []events.ContextItem {
		t.Helper()
		s, err := h.client.Search(ctxT(t), events.SearchRequest{UserID: "alice", Query: "What do I play, and which dentist do I see about my teeth?", MaxResults: &limit})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range s.Results {
			if r.Question == "" || r.Answer == "" {
				t.Fatalf("result %+v came without its texts", r)
			}
		}
		return s.Results
	}
	long := search(10)
	ts.mu.Lock()
	ts.texts = nil
	ts.mu.Unlock()
	short := search(2)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.texts) != 1 || ts.texts[0] > 2 {
		t.Fatalf("the 2-result search read the texts of %v items; want one read of at most its 2 hits (not every candidate's)", ts.texts)
	}
	if len(long) < 3 || !slices.Equal(contextIDs(short), contextIDs(long[:2])) {
		t.Fatalf("2 results %v, want the first two of 10's %v", contextIDs(short), contextIDs(long))
	}
	if st := enrichStats(t, h); st["query_embeddings_ok"] != 2 {
		t.Fatalf("stats %v: want both searches hybrid", st)
	}
}

// TestHybridCacheConsistency: the vector cache never answers with what the
// store no longer holds: an edited item is not found by its old vector, a
// re-embedded item by its new one, a new item is found on the very next
// request (no TTL), a deleted one never again, and another user's items
// never; each check is one request after the change.
func TestHybridCacheConsistency(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	_, emb := fakeEmbeddings(t)
	ctx := ctxT(t)
	dogName, _ := seedDogs(t, st, "alice")
	bobDog, _ := seedDogs(t, st, "bob")
	embedAll(t, st, emb, "alice")
	embedAll(t, st, emb, "bob")
	h := startHybrid(t, st, emb, nil)
	ten := 10
	found := func(user string) []int64 {
		t.Helper()
		r := enrich(t, h, events.EnrichRequest{UserID: user, Message: canineQuestion, MaxResults: &ten})
		if r.Degraded {
			t.Fatalf("degraded: %s", r.Reason)
		}
		ids := contextIDs(r.Context)
		if user == "alice" && slices.Contains(ids, bobDog) {
			t.Fatalf("alice was shown bob's item %d", bobDog)
		}
		return ids
	}
	if got := found("alice"); !slices.Contains(got, dogName) {
		t.Fatalf("before any change: %v, want %d", got, dogName)
	}
	if got := found("alice"); !slices.Contains(got, dogName) { // a cache hit
		t.Fatalf("cached: %v, want %d", got, dogName)
	}
	if got := found("bob"); !slices.Contains(got, bobDog) {
		t.Fatalf("bob: %v, want his %d", got, bobDog)
	}

	// Edited, not yet embedded again: its old vector must not find it.
	q, a := "Which bus do I take?", "The number 28."
	if _, err := st.UpdateContext(ctx, store.ContextUpdate{UserID: "alice", ID: dogName, Question: &q, Answer: &a}); err != nil {
		t.Fatal(err)
	}
	if got := found("alice"); slices.Contains(got, dogName) {
		t.Fatalf("after the edit: %v still holds %d", got, dogName)
	}
	embedAll(t, st, emb, "alice") // its new text's vector: nothing to do with dogs
	if got := found("alice"); slices.Contains(got, dogName) {
		t.Fatalf("after re-embedding: %v holds %d", got, dogName)
	}

	// A new item, embedded: found on the next request.
	newDog := insertContext(t, st, store.ContextWrite{UserID: "alice", Question: "What is my new dog called?",
		Answer: "My new dog is called Bella.", CreatedAt: t0.Add(3 * time.Hour)})[0]
	if got := found("alice"); slices.Contains(got, newDog) {
		t.Fatalf("the new item %d was found before it was embedded (no keyword matches it): %v", newDog, got)
	}
	embedAll(t, st, emb, "alice")
	if got := found("alice"); !slices.Contains(got, newDog) {
		t.Fatalf("the new item %d is not found once embedded: %v", newDog, got)
	}

	// Deleted: gone from the next reply.
	if _, err := st.DeleteContext(ctx, store.ContextDelete{UserID: "alice", ID: newDog}); err != nil {
		t.Fatal(err)
	}
	if got := found("alice"); slices.Contains(got, newDog) {
		t.Fatalf("the deleted item %d is still found: %v", newDog, got)
	}
	// Everything deleted: nothing, and bob keeps his.
	if _, err := st.DeleteContext(ctx, store.ContextDelete{UserID: "alice", All: true}); err != nil {
		t.Fatal(err)
	}
	if got := found("alice"); len(got) != 0 {
		t.Fatalf("after deleting all: %v", got)
	}
	if got := found("bob"); !slices.Contains(got, bobDog) {
		t.Fatalf("bob after alice's deletes: %v, want %d", got, bobDog)
	}
	if st := enrichStats(t, h); st["vector_cache_hits"] < 2 || st["vector_cache_reloads"] < 5 {
		t.Errorf("stats %v: want cache hits and a reload after each change", st)
	}
}

// TestHybridDegradesToLexical: whatever the embeddings endpoint does
// (fails, asks to slow down, answers garbage, hangs past its share of the
// budget), enrich answers lexically within its budget, not degraded, and
// counts the outcome; once it recovers, hybrid again.
func TestHybridDegradesToLexical(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	srv, emb := fakeEmbeddings(t)
	dogName, dogFood := seedDogs(t, st, "alice")
	embedAll(t, st, emb, "alice")
	h := startHybrid(t, st, emb, func(c *enricher.Config) {
		// Long enough for the store on a loaded machine; the embedding's
		// share is what a hang must not exceed.
		c.Timeout, c.EmbedTimeout = 3*time.Second, 300*time.Millisecond
	})
	zero, ten := 0.0, 10
	ask := func(what string) []int64 {
		t.Helper()
		r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: canineQuestion, Threshold: &zero, MaxResults: &ten})
		if r.Degraded {
			t.Fatalf("%s: degraded: %s", what, r.Reason)
		}
		return contextIDs(r.Context)
	}
	lexical := []int64{dogFood}
	srv.Fail(http.StatusInternalServerError, "")
	if got := ask("500"); !slices.Equal(got, lexical) {
		t.Errorf("endpoint failing: %v, want the lexical answer %v", got, lexical)
	}
	srv.Fail(http.StatusTooManyRequests, "30")
	if got := ask("429"); !slices.Equal(got, lexical) {
		t.Errorf("endpoint rate-limiting: %v, want %v", got, lexical)
	}
	srv.Recover()
	srv.Garbage()
	if got := ask("garbage"); !slices.Equal(got, lexical) {
		t.Errorf("endpoint answering zero vectors: %v, want %v", got, lexical)
	}
	srv.Recover()
	srv.SetDelay(time.Minute)
	if got := ask("hang"); !slices.Equal(got, lexical) {
		t.Errorf("endpoint hanging: %v, want %v", got, lexical)
	}
	srv.SetDelay(0)
	if got := ask("recovered"); !slices.Contains(got, dogName) {
		t.Errorf("recovered: %v, want the dog's name %d", got, dogName)
	}
	st2 := enrichStats(t, h)
	for outcome, want := range map[string]float64{"error": 2, "rate_limited": 1, "timeout": 1, "ok": 1} {
		if st2["query_embeddings_"+outcome] != want {
			t.Errorf("query_embeddings_%s = %v, want %v (stats %v)", outcome, st2["query_embeddings_"+outcome], want, st2)
		}
	}
	if st2["degraded"] != 0 {
		t.Errorf("degraded %v", st2["degraded"])
	}
}

// TestHybridScopeAndRange: the vector side keeps to the request's scope and
// range, as the keywords do: the dog (work scope, 3 November) is not found
// by a home-scoped request nor outside a search's or a time expression's
// range.
func TestHybridScopeAndRange(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	_, emb := fakeEmbeddings(t)
	ctx := ctxT(t)
	if _, err := st.InsertTurns(ctx, []store.Turn{
		{EventID: "w1", UserID: "alice", UserMessage: "x", TurnAt: t0, Scope: "work"},
		{EventID: "h1", UserID: "alice", UserMessage: "x", TurnAt: t0, Scope: "home"},
	}); err != nil {
		t.Fatal(err)
	}
	var ws []store.ContextWrite
	for i, f := range fillers {
		ev := []string{"w1", "h1"}[i%2]
		ws = append(ws, store.ContextWrite{UserID: "alice", Question: f[0], Answer: f[1], CreatedAt: t0.Add(time.Duration(i) * time.Minute), EventID: ev})
	}
	dogAt := t0.Add(48 * time.Hour)
	ws = append(ws,
		store.ContextWrite{UserID: "alice", Question: "Which vet do I see?", Answer: "A canine specialist in town.", CreatedAt: t0.Add(time.Hour), EventID: "h1"},
		store.ContextWrite{UserID: "alice", Question: "What is my dog called?", Answer: "My dog is called Rex.", CreatedAt: dogAt, EventID: "w1"})
	ids := insertContext(t, st, ws...)
	vet, dog := ids[len(ids)-2], ids[len(ids)-1]
	embedAll(t, st, emb, "alice")
	h := startHybrid(t, st, emb, nil)
	ten, zero := 10, 0.0
	for _, c := range []struct {
		scope string
		want  bool
	}{{"", true}, {"work", true}, {"home", false}} {
		// Threshold 0: in a scope of 11 items the fake's dog stands out
		// less; what is checked here is that it is not found elsewhere.
		r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: canineQuestion, Scope: c.scope, MaxResults: &ten, Threshold: &zero})
		if got := slices.Contains(contextIDs(r.Context), dog); got != c.want || r.Degraded {
			t.Errorf("enrich scope %q: %v, want the dog (work scope) found %v", c.scope, contextIDs(r.Context), c.want)
		}
	}
	for _, c := range []struct {
		since, until time.Time
		want         bool
	}{
		{time.Time{}, time.Time{}, true},
		{dogAt.Add(-time.Hour), dogAt.Add(time.Hour), true},
		{dogAt.Add(time.Second), time.Time{}, false},
		{time.Time{}, dogAt, false}, // until is exclusive
	} {
		s, err := h.client.Search(ctx, events.SearchRequest{UserID: "alice", Query: canineQuestion, Since: c.since, Until: c.until})
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(contextIDs(s.Results), dog); got != c.want {
			t.Errorf("search since %v until %v: %v, want the dog found %v", c.since, c.until, contextIDs(s.Results), c.want)
		}
	}
	// "yesterday" on 2 November is 1 November: the vet (a keyword match)
	// answers, and the dog's vector does not reach outside the range;
	// "today" on 3 November holds the dog.
	for _, c := range []struct {
		msg     string
		at      time.Time
		want    int64
		wantDog bool
	}{
		{canineQuestion + " yesterday", t0.Add(26 * time.Hour), vet, false},
		{canineQuestion + " today", dogAt.Add(2 * time.Hour), dog, true},
	} {
		r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: c.msg, At: c.at, MaxResults: &ten})
		got := contextIDs(r.Context)
		if !slices.Contains(got, c.want) || slices.Contains(got, dog) != c.wantDog {
			t.Errorf("enrich %q: %v, want %d and the dog found %v", c.msg, got, c.want, c.wantDog)
		}
	}
}

// TestHybridConfig: the embedding's share must leave the store time.
func TestHybridConfig(t *testing.T) {
	t.Parallel()
	_, emb := fakeEmbeddings(t)
	_, err := enricher.New(enricher.Config{Conn: connect(t), Store: storetest.New(t), Embedder: emb,
		Timeout: 100 * time.Millisecond, EmbedTimeout: 100 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "Config.EmbedTimeout") {
		t.Errorf("EmbedTimeout = Timeout: %v, want an error naming EmbedTimeout", err)
	}
	if c := (enricher.Config{Timeout: 50 * time.Millisecond}).WithDefaults(); c.EmbedTimeout != 20*time.Millisecond {
		t.Errorf("default EmbedTimeout under a 50ms Timeout: %v, want 20ms", c.EmbedTimeout)
	}
	if c := (enricher.Config{}).WithDefaults(); c.EmbedTimeout != enricher.DefaultEmbedTimeout || c.VectorCacheBytes != enricher.DefaultVectorCacheBytes {
		t.Errorf("defaults: %v %v", c.EmbedTimeout, c.VectorCacheBytes)
	}
}

// TestHybridEmbedsTheMessageWithoutItsTimeWords: the words of a message's
// time expression say when, not what (protocol.md, "Time in the message"),
// so the vector side does not search for them either: "anything about the
// dog last week?" embedded whole found, by "week" alone, an item of that
// week about the piano (a newcomer's walk: 0.318 against the threshold's
// 0.3, and with "canine companion last week" the piano alone).
func TestHybridEmbedsTheMessageWithoutItsTimeWords(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	srv, emb := fakeEmbeddings(t)
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC) // a Monday: last week is 23-29 November
	var ws []store.ContextWrite
	for i, f := range fillers {
		ws = append(ws, store.ContextWrite{UserID: "alice", Question: f[0], Answer: f[1], CreatedAt: t0.Add(time.Duration(i) * time.Minute)})
	}
	ws = append(ws,
		store.ContextWrite{UserID: "alice", Question: "I started learning to play the piano this week.", Answer: "Great! Practise scales every day.", CreatedAt: at.AddDate(0, 0, -5)},
		store.ContextWrite{UserID: "alice", Question: "What is my dog called?", Answer: "My dog is called Rex.", CreatedAt: at.AddDate(0, 0, -1)})
	ids := insertContext(t, st, ws...)
	piano, dog := ids[len(ids)-2], ids[len(ids)-1]
	embedAll(t, st, emb, "alice")
	h := startHybrid(t, st, emb, nil)
	for _, c := range []struct{ msg, embedded string }{
		{"anything about the canine companion last week?", "anything about the canine companion ?"},
		{"Last week, what did I say about my canine companion?", ", what did I say about my canine companion?"},
		{canineQuestion, canineQuestion},
	} {
		seen := len(srv.Inputs())
		r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: c.msg, At: at})
		inputs := srv.Inputs()[seen:]
		if !slices.Equal(inputs, []string{c.embedded}) {
			t.Errorf("enrich %q embedded %q; want %q", c.msg, inputs, c.embedded)
		}
		got := contextIDs(r.Context)
		if !slices.Contains(got, dog) || slices.Contains(got, piano) || r.Degraded {
			t.Errorf("enrich %q: items %v (degraded %v); want the dog %d and not the piano %d", c.msg, got, r.Degraded, dog, piano)
		}
	}
	// A message that is only a time leaves nothing to embed: its document
	// search (which embeds whatever the context items did not) is lexical,
	// rather than sending an empty input the server refuses.
	putDoc(t, st, store.Owner{User: "alice"}, "notes", "walks.md", "The dog walks at seven.")
	seen := len(srv.Inputs())
	r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: "Yesterday?", At: at, Collections: []string{"notes"}})
	if inputs := srv.Inputs()[seen:]; len(inputs) != 0 || r.Degraded {
		t.Errorf("enrich %q embedded %q (degraded %v); want nothing embedded", "Yesterday?", inputs, r.Degraded)
	}
	if st := enrichStats(t, h); st["query_embeddings_error"] != 0 {
		t.Errorf("query embeddings failed: %v", st["query_embeddings_error"])
	}
}

// TestHybridCacheAfterAForget: a forget deletes the user's embedding
// generation, so the user's next items count from generation 0 again; the
// vector cache's copy of the user from before is older, not newer, and is
// replaced once. Taken as current, it was never replaced: every request of
// the user until their next vector missed the cache and read the
// candidates twice (a review: 3 requests, 3 misses, 0 reloads, 3 stale).
func TestHybridCacheAfterAForget(t *testing.T) {
	t.Parallel()
	_, emb := fakeEmbeddings(t)
	st, h := startDogs(t, emb)
	enrich(t, h, events.EnrichRequest{UserID: "alice", Message: canineQuestion})
	ctx := ctxT(t)
	// What store.ForgetUser does to the items and the generation.
	if _, err := st.Pool().Exec(ctx, `DELETE FROM context WHERE user_id = 'alice'`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `DELETE FROM embedding_generations WHERE user_id = 'alice'`); err != nil {
		t.Fatal(err)
	}
	insertContext(t, st, store.ContextWrite{UserID: "alice", Question: "What is my dog called?", Answer: "Bruno.", CreatedAt: t0})
	before := enrichStats(t, h)
	for range 3 {
		if r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: canineQuestion}); r.Degraded {
			t.Fatal("degraded")
		}
	}
	after := enrichStats(t, h)
	d := func(k string) float64 { return after[k] - before[k] }
	if d("vector_cache_reloads") != 1 || d("vector_cache_stale") != 0 || d("vector_cache_hits") != 2 {
		t.Fatalf("3 requests after a forget: reloads %v, stale %v, hits %v, misses %v; want 1 reload, then 2 hits",
			d("vector_cache_reloads"), d("vector_cache_stale"), d("vector_cache_hits"), d("vector_cache_misses"))
	}
}

// TestHybridReadsAUsersVectorsOnceForABurst: requests of one user that miss
// the vector cache at once share one read of the user's vectors. Each read
// and indexed all of them (a race review: 64 requests at once, 64 reads
// and 138 MB for a user of 2,000 items), and each turn saved changes the
// generation, so a chatting user's next burst missed again. The fake
// embeddings server's delay holds the requests at the query's embedding,
// so that they reach the cache together.
func TestHybridReadsAUsersVectorsOnceForABurst(t *testing.T) {
	t.Parallel()
	srv, _ := fakeEmbeddings(t)
	emb, err := embedding.New(embedding.Config{BaseURL: srv.URL, Model: "fake", MaxConcurrency: 16})
	if err != nil {
		t.Fatal(err)
	}
	_, h := startDogs(t, emb)
	srv.SetDelay(300 * time.Millisecond)
	before := enrichStats(t, h)
	const n = 16
	replies := make(chan events.EnrichReply, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			r, err := h.client.Enrich(ctxT(t), events.EnrichRequest{UserID: "alice", Message: canineQuestion})
			replies <- r
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		if r := <-replies; r.Degraded || len(r.Context) == 0 {
			t.Fatalf("a reply of the burst: degraded %v, %d items", r.Degraded, len(r.Context))
		}
	}
	after := enrichStats(t, h)
	if got := after["query_embeddings_ok"] - before["query_embeddings_ok"]; got != n {
		t.Fatalf("%v of %d queries embedded: the burst was not hybrid", got, n)
	}
	if got := after["vector_cache_reloads"] - before["vector_cache_reloads"]; got != 1 {
		t.Fatalf("%d requests at once read the user's vectors %v times; want once", n, got)
	}
	if hits, misses := after["vector_cache_hits"]-before["vector_cache_hits"], after["vector_cache_misses"]-before["vector_cache_misses"]; hits+misses != n {
		t.Fatalf("cache hits %v + misses %v; want one of the two per request, %d", hits, misses, n)
	}
}

// TestHybridQueryOfOtherDimensions: when the model behind the name changed
// (its query vectors have other dimensions than the stored ones), enrich
// answers lexically, as before, and now counts it in the stats
// (query_vectors_other_dims) and says so in the log: query embeddings
// were counted ok and nothing told an operator (an operator's walk).
func TestHybridQueryOfOtherDimensions(t *testing.T) {
	t.Parallel()
	srv, emb := fakeEmbeddings(t)
	_, h := startDogs(t, emb)
	if r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: canineQuestion}); r.Degraded {
		t.Fatal("degraded")
	}
	if n := enrichStats(t, h)["query_vectors_other_dims"]; n != 0 {
		t.Fatalf("query_vectors_other_dims %v before the change; want 0", n)
	}
	srv.SetDims(128)
	for range 2 {
		r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: canineQuestion})
		if r.Degraded {
			t.Fatal("degraded")
		}
	}
	if n := enrichStats(t, h)["query_vectors_other_dims"]; n != 2 {
		t.Fatalf("query_vectors_other_dims %v after 2 requests of other dimensions; want 2", n)
	}
}

// The message is embedded redacted, as a turn holding it is recorded: a
// secret in it does not reach the embeddings server (maybe a third
// party's API), by enrich or by a document search. Found by an audit:
// both sent the message as it was.
func TestHybridEmbedsTheMessageRedacted(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	srv, emb := fakeEmbeddings(t)
	insertContext(t, st, store.ContextWrite{UserID: "alice", Question: "What is my dog called?", Answer: "My dog is called Rex.", CreatedAt: t0})
	embedAll(t, st, emb, "alice")
	putDoc(t, st, store.Owner{User: "alice"}, "notes", "walks.md", "The dog walks at seven.")
	h := startHybrid(t, st, emb, nil)
	const msg = "my new password is Hunter2Rex and my card is 4111 1111 1111 1111, is the dog fed?"
	const want = "my new password is [redacted:password] and my card is [redacted:card], is the dog fed?"
	seen := len(srv.Inputs())
	if r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: msg}); r.Degraded {
		t.Errorf("enrich degraded: %+v", r)
	}
	docsFound(t, h, events.DocsSearchRequest{UserID: "alice", Query: msg})
	if inputs := srv.Inputs()[seen:]; len(inputs) == 0 || slices.ContainsFunc(inputs, func(in string) bool { return in != want }) {
		t.Errorf("embedded %q; want only %q", inputs, want)
	}
}

// TestHybridSkipsAnEmbeddingsServerThatHangs: once the embeddings server
// has failed five queries in a row (here it hangs past the query's share),
// enrich answers lexically without asking it, but for a probe a second:
// 30 requests send a handful of queries, not 30, and none is degraded.
// Before, every request waited the whole share (100 ms by default) for an
// answer that was lexical anyway.
func TestHybridSkipsAnEmbeddingsServerThatHangs(t *testing.T) {
	t.Parallel()
	srv, emb := fakeEmbeddings(t)
	st := storetest.New(t)
	seedDogs(t, st, "alice")
	embedAll(t, st, emb, "alice")
	h := startHybrid(t, st, emb, func(c *enricher.Config) {
		c.Timeout, c.EmbedTimeout = 3*time.Second, 200*time.Millisecond
	})
	srv.SetDelay(time.Minute)
	before, sent := enrichStats(t, h), srv.Requests()
	const n = 30
	for range n {
		if r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: canineQuestion}); r.Degraded {
			t.Fatalf("degraded: %s", r.Reason)
		}
	}
	after := enrichStats(t, h)
	skipped := after["query_embeddings_skipped"] - before["query_embeddings_skipped"]
	timedOut := after["query_embeddings_timeout"] - before["query_embeddings_timeout"]
	// A probe a second: the 30 requests take a few seconds at most on a
	// loaded machine, so a handful of probes past the first five.
	if got := srv.Requests() - sent; got > 10 || skipped < n-10 || skipped+timedOut != n {
		t.Fatalf("%d requests to a hanging server sent %d queries (%v timed out, %v skipped); want five and a probe now and then",
			n, got, timedOut, skipped)
	}
}

// TestHybridBreakerIgnoresARefusedQuery: a query the embeddings server
// refuses for its own text says nothing of the server, so six of them in a
// row (one user pasting long texts) do not make the next users' queries
// lexical. Before, they opened the breaker: the next query was skipped.
// Refused as OpenAI and vLLM refuse a text longer than the model's context
// (a 400), or as llama.cpp's server refuses one longer than its physical
// batch (-ub, 512 tokens by default: a 500 saying the input is too large
// to process).
func TestHybridBreakerIgnoresARefusedQuery(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		refuse func(srv *embeddingtest.Server)
	}{
		{"over the model's context", func(srv *embeddingtest.Server) { srv.RefuseContaining("pasted") }},
		{"over llama.cpp's batch", func(srv *embeddingtest.Server) {
			srv.FailContaining("pasted", http.StatusInternalServerError)
			srv.ErrorBody(`{"error":{"code":500,"message":"input is too large to process. increase the physical batch size","type":"server_error"}}`)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, emb := fakeEmbeddings(t)
			_, h := startDogs(t, emb)
			tt.refuse(srv)
			for range 6 {
				enrich(t, h, events.EnrichRequest{UserID: "alice", Message: "a long pasted text about dogs"})
			}
			before := enrichStats(t, h)
			enrich(t, h, events.EnrichRequest{UserID: "alice", Message: canineQuestion})
			after := enrichStats(t, h)
			if skipped := after["query_embeddings_skipped"] - before["query_embeddings_skipped"]; skipped != 0 {
				t.Fatalf("a query after six refused for their text was skipped (ok %v, skipped %v): want it embedded",
					after["query_embeddings_ok"]-before["query_embeddings_ok"], skipped)
			}
		})
	}
}

// TestStatsCountItemsWithoutAVector: memory.stats of a process that
// embeds counts the user's items without a vector of its model (found by
// their words only), and those the server refused as input, which no
// sweep sends again. Before, an operator saw them nowhere; a process
// that embeds nothing leaves the field out.
func TestStatsCountItemsWithoutAVector(t *testing.T) {
	_, emb := fakeEmbeddings(t)
	st := storetest.New(t)
	seedDogs(t, st, "alice")
	embedAll(t, st, emb, "alice")
	ids := insertContext(t, st,
		store.ContextWrite{UserID: "alice", Question: "a pasted log", Answer: "far too long", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: "written while the server was down", Answer: "waits for the sweep", CreatedAt: t0})
	targets, err := st.EmbeddingTargets(ctxT(t), "alice", ids[:1], emb.Model())
	if err != nil || len(targets) != 1 {
		t.Fatal(targets, err)
	}
	if _, err := st.SaveEmbeddingRefusals(ctxT(t), emb.Model(), []store.EmbeddingRefusal{{ContextID: targets[0].ID, ContentHash: targets[0].ContentHash}}); err != nil {
		t.Fatal(err)
	}
	h := startHybrid(t, st, emb, nil)
	s, err := h.client.Stats(ctxT(t), "alice")
	if err != nil {
		t.Fatal(err)
	}
	want := events.EmbeddingStats{Model: "fake", ItemsWithoutVector: 2, Refused: 1}
	if s.Embeddings == nil || *s.Embeddings != want {
		t.Errorf("stats' embeddings %+v, want %+v", s.Embeddings, want)
	}
	lexical := start(t, st, nil)
	if s, err := lexical.client.Stats(ctxT(t), "alice"); err != nil || s.Embeddings != nil {
		t.Errorf("stats of a process that embeds nothing: %+v (%v), want no embeddings", s.Embeddings, err)
	}
}
