package enricher_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

func searchQuestions(t *testing.T, h *harness, user, query string) []string {
	t.Helper()
	r, err := h.client.Search(ctxT(t), events.SearchRequest{UserID: user, Query: query})
	if err != nil {
		t.Fatalf("search %q: %v", query, err)
	}
	var out []string
	for _, it := range r.Results {
		out = append(out, it.Question)
	}
	slices.Sort(out)
	return out
}

// TestLanguageEndpoint: memory.language reads and sets a user's language;
// a German user's "Häuser" finds "Haus" through search and enrich, an
// English user is unaffected, and a language memoryd does not accept is a
// 400 naming the field.
func TestLanguageEndpoint(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	ctx := ctxT(t)
	const haus = "Wir haben ein Haus am See gekauft"
	insertContext(t, st,
		store.ContextWrite{UserID: "hans", Question: haus, Answer: "Schön", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: haus, Answer: "Schön", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: "My dogs love the lake", Answer: "Nice", CreatedAt: t0})

	r, err := h.client.Language(ctx, "hans")
	if err != nil || r != (events.LanguageReply{Language: "en", Config: "english"}) {
		t.Fatalf("unset language = %+v, %v", r, err)
	}
	if got := searchQuestions(t, h, "hans", "Häuser"); got != nil {
		t.Fatalf("english Häuser found %q", got)
	}
	r, err = h.client.SetLanguage(ctx, "hans", "de")
	if err != nil || r != (events.LanguageReply{Language: "de", Config: "german", Reindexed: 1}) {
		t.Fatalf("set de = %+v, %v", r, err)
	}
	if got := searchQuestions(t, h, "hans", "Häuser"); !slices.Equal(got, []string{haus}) {
		t.Fatalf("german Häuser found %q", got)
	}
	e := enrich(t, h, events.EnrichRequest{UserID: "hans", Message: "Welche Häuser kennst du?"})
	if e.Degraded || len(e.Context) != 1 || e.Context[0].Question != haus {
		t.Fatalf("german enrich = %+v", e)
	}
	// alice is still English: stemming as before, no German stems.
	if got := searchQuestions(t, h, "alice", "Häuser"); got != nil {
		t.Fatalf("alice's Häuser found %q", got)
	}
	if got := searchQuestions(t, h, "alice", "dog"); !slices.Equal(got, []string{"My dogs love the lake"}) {
		t.Fatalf("alice's dog found %q", got)
	}
	// A name works like its code; the same configuration re-indexes nothing.
	if r, err := h.client.SetLanguage(ctx, "hans", "german"); err != nil || r.Reindexed != 0 || r.Language != "german" {
		t.Fatalf("set german = %+v, %v", r, err)
	}
	for _, bad := range []string{"klingon", "DE", "de-AT", " de", strings.Repeat("x", 1000)} {
		_, err := h.client.SetLanguage(ctx, "hans", bad)
		var se *events.ServiceError
		if !errors.As(err, &se) || se.Code != 400 || !strings.Contains(se.Description, "language") {
			t.Errorf("set %.20q: %v, want a 400 naming language", bad, err)
		}
	}
	if r, err := h.client.Language(ctx, "hans"); err != nil || r.Config != "german" {
		t.Fatalf("language after refused sets = %+v, %v", r, err)
	}
	// Another user's token is refused like on every endpoint.
	msg := h.raw(t, h.client.Subject("language", "hans"), mustJSON(t, events.LanguageRequest{UserID: "alice", Language: "fr"}))
	if code, _ := errorCode(t, msg); code != 400 {
		t.Fatalf("language for another user's token: code %d", code)
	}
}

// TestEnrichJapaneseAndChinese: CJK items are found by a word inside them
// through enrich, for users whose language is Japanese or Chinese (simple).
func TestEnrichJapaneseAndChinese(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	ctx := ctxT(t)
	for _, u := range []struct{ user, lang string }{{"yuki", "ja"}, {"mei", "chinese"}} {
		if r, err := h.client.SetLanguage(ctx, u.user, u.lang); err != nil || r.Config != "simple" {
			t.Fatalf("set %s = %+v, %v", u.lang, r, err)
		}
	}
	insertContext(t, st,
		store.ContextWrite{UserID: "yuki", Question: "東京の天気はどうですか", Answer: "晴れです", CreatedAt: t0},
		store.ContextWrite{UserID: "yuki", Question: "大阪でたこ焼きを食べた", Answer: "美味しそう", CreatedAt: t0},
		store.ContextWrite{UserID: "mei", Question: "今天的天气很好", Answer: "是的", CreatedAt: t0},
		store.ContextWrite{UserID: "mei", Question: "我喜欢喝茶", Answer: "绿茶还是红茶？", CreatedAt: t0})
	for _, tt := range []struct{ user, message, want string }{
		{"yuki", "東京", "東京の天気はどうですか"},
		{"yuki", "たこ焼きが好き", "大阪でたこ焼きを食べた"},
		{"mei", "天气", "今天的天气很好"},
		{"mei", "你喜欢什么茶？", "我喜欢喝茶"},
	} {
		e := enrich(t, h, events.EnrichRequest{UserID: tt.user, Message: tt.message})
		if e.Degraded || len(e.Context) == 0 || e.Context[0].Question != tt.want {
			t.Errorf("enrich %s %q = %+v, want %q first", tt.user, tt.message, e.Context, tt.want)
		}
	}
}

// TestLanguageChangeHasItsOwnBudget: a language change, which re-indexes
// every item of the user, is bounded by a minute of its own, not by the
// write timeout of the other tool requests: under load a user with 6,076
// items could not change language within the 5 s default (a user probe).
// Here the write timeout is too short for any write.
func TestLanguageChangeHasItsOwnBudget(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, func(c *enricher.Config) { c.WriteTimeout = time.Microsecond })
	var items []store.ContextWrite
	for i := range 300 {
		items = append(items, store.ContextWrite{UserID: "hans", Question: fmt.Sprintf("Haus Nummer %d am See", i), Answer: "Schön", CreatedAt: t0})
	}
	insertContext(t, st, items...)
	// The write timeout is in force: a store does not fit in it.
	if _, err := h.client.Store(ctxT(t), events.StoreRequest{UserID: "hans", Question: "q", Answer: "a"}); err == nil {
		t.Fatal("a store within a write timeout of 1µs succeeded; the test needs a budget no write meets")
	}
	r, err := h.client.SetLanguage(ctxT(t), "hans", "de")
	if err != nil || r.Reindexed != 300 {
		t.Fatalf("set de for 300 items with a write timeout of 1µs = %+v, %v; want all re-indexed", r, err)
	}
}

// A long message of a user whose language is not English keeps its
// subject: the cap of 32 keywords is applied again without the stop words
// of the user's language, which the English list does not hold. Found by
// a multilingual audit: "Meine Mutter hat Diabetes. ..." with a long day
// told after it searched "ich", "und", "nicht", ... and lost "mutter" and
// "diabetes", and the item about the mother's diabetes was not found.
func TestEnrichLongMessageKeepsItsSubjectInTheUsersLanguage(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	if _, err := h.client.SetLanguage(ctxT(t), "hans", "de"); err != nil {
		t.Fatal(err)
	}
	ids := insertContext(t, st,
		store.ContextWrite{UserID: "hans", Question: "Meine Mutter hat Diabetes und muss jetzt Insulin spritzen.", Answer: "Das ist viel auf einmal.", CreatedAt: t0},
		store.ContextWrite{UserID: "hans", Question: "Wir waren im Sommer in Lissabon und haben Fisch gegessen.", Answer: "Klingt schön.", CreatedAt: t0.Add(time.Minute)},
		store.ContextWrite{UserID: "hans", Question: "Lena hatte ihren ersten Schultag und war sehr aufgeregt.", Answer: "Wie süß!", CreatedAt: t0.Add(2 * time.Minute)})
	msg := "Meine Mutter hat Diabetes. Ich war heute den ganzen Tag bei der Arbeit und es war wirklich sehr anstrengend, " +
		"weil wir wieder zu wenig Leute auf der Station hatten und alles doppelt so lange gedauert hat als sonst, " +
		"und danach musste ich noch einkaufen gehen und habe fast nichts bekommen, weil der Laden schon leer war. " +
		"Was meinst du, wie soll ich ihr jetzt am besten helfen, wenn sie das nicht alleine schafft und ich nicht immer da sein kann?"
	r := enrich(t, h, events.EnrichRequest{UserID: "hans", Message: msg})
	if !slices.Contains(contextIDs(r.Context), ids[0]) {
		t.Errorf("the item about the mother's diabetes is not in %v (keywords %q)", contextIDs(r.Context), r.Keywords)
	}
	for _, stop := range []string{"und", "ich", "nicht", "wie", "das"} {
		if slices.Contains(r.Keywords, stop) {
			t.Errorf("keywords %q hold %q, a German stop word", r.Keywords, stop)
		}
	}
	// The search endpoint caps a long query the same way.
	if got := searchQuestions(t, h, "hans", msg); !slices.Contains(got, "Meine Mutter hat Diabetes und muss jetzt Insulin spritzen.") {
		t.Errorf("search found %q, not the item about the mother's diabetes", got)
	}
	// An English user's same message is capped without the German stop
	// words its grammar list does not hold ("nicht"), which are not
	// English ones; its grammar ("und") is left out for every user.
	if r := enrich(t, h, events.EnrichRequest{UserID: "anna", Message: msg}); !slices.Contains(r.Keywords, "nicht") || slices.Contains(r.Keywords, "und") {
		t.Errorf("an English user's keywords %q lost German words", r.Keywords)
	}
}

// A long German message's documents are searched with the keywords the
// reply reports (capped again without the German stop words), not with
// the first cap, which lost the message's subject to "ich", "und", ...
func TestEnrichLongMessageDocumentsUseTheLanguageKeywords(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	if _, err := h.client.SetLanguage(ctxT(t), "hans", "de"); err != nil {
		t.Fatal(err)
	}
	putDoc(t, st, store.Owner{User: "hans"}, "kb", "ratgeber.md", "# Ratgeber\n\n## Diabetes\n\nDiabetes: Insulin richtig spritzen.\n")
	msg := "Meine Mutter hat Diabetes. Ich war heute den ganzen Tag bei der Arbeit und es war wirklich sehr anstrengend, " +
		"weil wir wieder zu wenig Leute auf der Station hatten und alles doppelt so lange gedauert hat als sonst, " +
		"und danach musste ich noch einkaufen gehen und habe fast nichts bekommen, weil der Laden schon leer war. " +
		"Was meinst du, wie soll ich ihr jetzt am besten helfen, wenn sie das nicht alleine schafft und ich nicht immer da sein kann?"
	r := enrich(t, h, events.EnrichRequest{UserID: "hans", Message: msg, Collections: []string{"kb"}})
	if !slices.Contains(r.Keywords, "diabetes") {
		t.Fatalf("keywords %q lack diabetes", r.Keywords)
	}
	found := false
	for _, d := range r.Documents {
		found = found || strings.Contains(d.Text, "Insulin")
	}
	if !found {
		t.Errorf("reply keywords %q hold diabetes, but the documents %+v lack the chunk about it", r.Keywords, r.Documents)
	}
}
