package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
)

// matched returns the questions of the user's items a search for keywords
// finds, sorted.
func matched(t *testing.T, ctx context.Context, s *store.Store, user string, keywords ...string) []string {
	t.Helper()
	c, err := s.SearchContext(ctx, store.SearchQuery{UserID: user, Keywords: keywords})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range c.Matches {
		out = append(out, m.Item.Question)
	}
	slices.Sort(out)
	return out
}

func TestSearchCJK(t *testing.T) {
	ctx, s := setup(t)
	const (
		ja    = "東京の天気はどうですか"
		zh    = "今天的天气很好"
		mixed = "東京でReactを勉強しています"
		ko    = "서울 날씨가 좋아요"
		kyoto = "京都に行きました"
	)
	// yuki's language is not stemmed (simple); ken is left at English.
	// CJK runs are indexed as character pairs under every configuration,
	// so both find the same.
	if _, err := s.SetLanguage(ctx, "yuki", "ja", "simple"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{ja, zh, mixed, ko, kyoto} {
		seedContext(t, s,
			store.ContextWrite{UserID: "yuki", Question: q, Answer: "", CreatedAt: t0},
			store.ContextWrite{UserID: "ken", Question: q, Answer: "", CreatedAt: t0})
	}
	tests := []struct {
		keywords []string
		want     []string
	}{
		{[]string{"東京"}, []string{ja, mixed}},           // a word inside a sentence
		{[]string{"天气"}, []string{zh}},                  // Chinese
		{[]string{"天気"}, []string{ja}},                  // 天気 and 天气 are different characters
		{[]string{"京都"}, []string{kyoto}},               // not 東京's 京
		{[]string{"react"}, []string{mixed}},            // the Latin part of mixed text
		{[]string{"勉強"}, []string{mixed}},               // the CJK part after it
		{[]string{"天気は"}, []string{ja}},                 // a longer run is a phrase of its bigrams
		{[]string{"天気が"}, nil},                          // ... which must occur in order
		{[]string{"날씨"}, []string{ko}},                  // Korean
		{[]string{"東京", "天气"}, []string{ja, mixed, zh}}, // ORed
		{[]string{"東"}, nil},                            // a lone character finds only a lone one
		{[]string{"大阪"}, nil},                           // absent
		{[]string{"天気は", "react"}, []string{ja, mixed}}, // mixed keywords
		{[]string{"ＲＥＡＣＴ"}, []string{mixed}},            // full-width Latin is its ordinary form (NFKC, migration 049)
		{[]string{"東京の天気はどうですか"}, []string{ja}},         // the whole sentence
		{[]string{"です。"}, []string{ja}},                 // CJK punctuation separates
		{[]string{"🐕", "東京"}, []string{ja, mixed}},      // emoji is not a word
		{[]string{"東京、大阪"}, nil},                        // a phrase: both parts must be in order
		{[]string{"'東京'"}, []string{ja, mixed}},         // quotes stay inside the lexeme
		{[]string{"東京 & !天気"}, nil},                     // operators are blanks: the phrase 東京 天気, not adjacent here
		{[]string{"京の天"}, []string{ja}},                 // any substring of two or more
		{[]string{"はど"}, []string{ja}},                  // Hiragana alone
		{[]string{"ている"}, nil},                          // absent substring
		{[]string{"しています"}, []string{mixed}},
		{[]string{"서울"}, []string{ko}}, // Hangul word
		{[]string{"좋아요"}, []string{ko}},
		{[]string{"今天的天气"}, []string{zh}},
		{[]string{"天气很好", "today"}, []string{zh}},
		{[]string{"東京でreact"}, []string{mixed}}, // a keyword across scripts: a phrase
		{[]string{"京で"}, []string{mixed}},
		{[]string{"東京は"}, nil},
		{[]string{"で"}, nil}, // never alone in these texts
		{[]string{"どうですか"}, []string{ja}},
		{[]string{"天"}, nil},
		{[]string{"气"}, nil},
		{[]string{"天气", "天気"}, []string{ja, zh}},
		{[]string{"天気", "京都", "서울"}, []string{ja, ko, kyoto}},
	}
	for _, user := range []string{"yuki", "ken"} {
		for _, tt := range tests {
			got := matched(t, ctx, s, user, tt.keywords...)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s: search %q found %q, want %q", user, tt.keywords, got, want)
			}
		}
	}
}

func TestCJKTermsCounted(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.SetLanguage(ctx, "mei", "zh", "simple"); err != nil {
		t.Fatal(err)
	}
	seedContext(t, s, store.ContextWrite{UserID: "mei", Question: "今天的天气很好", Answer: "天气预报说明天的天气也很好", CreatedAt: t0})
	c, err := s.SearchContext(ctx, store.SearchQuery{UserID: "mei", Keywords: []string{"天气", "很好"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Terms, []string{"天气", "很好"}) && !slices.Equal(c.Terms, []string{"很好", "天气"}) {
		t.Fatalf("terms %q, want the two bigrams", c.Terms)
	}
	if len(c.Matches) != 1 {
		t.Fatalf("%d matches, want 1", len(c.Matches))
	}
	for i, term := range c.Terms {
		got := c.Matches[0].Terms[i]
		want := store.TermCount{Present: true, Question: 1, Answer: 2}
		if term == "很好" {
			want.Answer = 1
		}
		if got != want {
			t.Errorf("term %q counted %+v, want %+v", term, got, want)
		}
	}
	if m := c.Matches[0]; m.QuestionLen != 6 || m.AnswerLen != 11 {
		t.Errorf("lengths %d, %d, want the distinct bigrams 6, 11", m.QuestionLen, m.AnswerLen)
	}
}

func TestSetLanguage(t *testing.T) {
	ctx, s := setup(t)
	const (
		haus  = "Das Haus am See"
		dogs  = "My dogs are barking"
		later = "Die Häuser sind alt"
	)
	for _, u := range []string{"hans", "alice"} {
		seedContext(t, s,
			store.ContextWrite{UserID: u, Question: haus, CreatedAt: t0},
			store.ContextWrite{UserID: u, Question: dogs, CreatedAt: t0})
	}
	l, err := s.UserLanguage(ctx, "hans")
	if err != nil || l != (store.Language{Config: store.DefaultTSConfig}) {
		t.Fatalf("unset language = %+v, %v", l, err)
	}
	// English: "Häuser" is its own word, and "dog" finds "dogs".
	if got := matched(t, ctx, s, "hans", "Häuser"); got != nil {
		t.Fatalf("english Häuser found %q", got)
	}
	n, err := s.SetLanguage(ctx, "hans", "de", "german")
	if err != nil || n != 2 {
		t.Fatalf("SetLanguage = %d, %v; want 2 items re-indexed", n, err)
	}
	if l, err := s.UserLanguage(ctx, "hans"); err != nil || l.Language != "de" || l.Config != "german" || l.UpdatedAt.IsZero() {
		t.Fatalf("language = %+v, %v", l, err)
	}
	// German stemming now, on the items already there and on new ones.
	if got := matched(t, ctx, s, "hans", "Häuser"); !slices.Equal(got, []string{haus}) {
		t.Fatalf("german Häuser found %q, want %q", got, haus)
	}
	seedContext(t, s, store.ContextWrite{UserID: "hans", Question: later, CreatedAt: t0})
	if got := matched(t, ctx, s, "hans", "Haus"); !slices.Equal(got, []string{haus, later}) {
		t.Fatalf("german Haus found %q", got)
	}
	// Another user keeps english: no stemming of German, dogs → dog.
	if got := matched(t, ctx, s, "alice", "Häuser"); got != nil {
		t.Fatalf("alice's english Häuser found %q", got)
	}
	if got := matched(t, ctx, s, "alice", "dog"); !slices.Equal(got, []string{dogs}) {
		t.Fatalf("alice's dog found %q", got)
	}
	c, err := s.SearchContext(ctx, store.SearchQuery{UserID: "alice", Keywords: []string{"dogs"}})
	if err != nil || !slices.Equal(c.Terms, []string{"dog"}) {
		t.Fatalf("alice's terms %q, %v", c.Terms, err)
	}
	// The same language again re-indexes nothing.
	if n, err := s.SetLanguage(ctx, "hans", "german", "german"); err != nil || n != 0 {
		t.Fatalf("SetLanguage again = %d, %v", n, err)
	}
	// A configuration Postgres does not have is refused, and changes nothing.
	if _, err := s.SetLanguage(ctx, "hans", "xx", "klingon"); err == nil {
		t.Fatal("SetLanguage accepted an unknown configuration")
	}
	if l, _ := s.UserLanguage(ctx, "hans"); l.Config != "german" {
		t.Fatalf("language after a refused change = %+v", l)
	}
	// Back to english: all three items re-indexed.
	if n, err := s.SetLanguage(ctx, "hans", "en", "english"); err != nil || n != 3 {
		t.Fatalf("SetLanguage english = %d, %v", n, err)
	}
	if got := matched(t, ctx, s, "hans", "Häuser"); !slices.Equal(got, []string{later}) {
		t.Fatalf("english Häuser found %q, want the literal word only", got)
	}
	// Forget removes the setting.
	if _, err := s.SetLanguage(ctx, "hans", "ja", "simple"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ForgetUser(ctx, "hans", "hans", store.StreamPosition{}); err != nil {
		t.Fatal(err)
	}
	if l, err := s.UserLanguage(ctx, "hans"); err != nil || l.Language != "" || l.Config != store.DefaultTSConfig {
		t.Fatalf("language after forget = %+v, %v", l, err)
	}
}

// TestSimpleConfigCJK: a user whose language Postgres does not stem (simple)
// finds CJK and Latin words alike; Latin words are not stemmed.
func TestSimpleConfigCJK(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.SetLanguage(ctx, "yuki", "ja", "simple"); err != nil {
		t.Fatal(err)
	}
	const q = "東京でReactを勉強しています"
	seedContext(t, s, store.ContextWrite{UserID: "yuki", Question: q, Answer: "Hooks are nice", CreatedAt: t0})
	for _, kw := range [][]string{{"東京"}, {"react"}, {"勉強"}, {"hooks"}} {
		if got := matched(t, ctx, s, "yuki", kw...); !slices.Equal(got, []string{q}) {
			t.Errorf("simple %q found %q", kw, got)
		}
	}
	if got := matched(t, ctx, s, "yuki", "hook"); got != nil {
		t.Errorf("simple stemmed hooks: hook found %q", got)
	}
}

// TestSetLanguageWaitsForInserts: an item inserted by a transaction still
// open when the language changes is re-indexed too (SetLanguage waits for
// it on the user's language lock), so no item of the user is left under
// the old configuration.
func TestSetLanguageWaitsForInserts(t *testing.T) {
	ctx, s := setup(t)
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := s.WithTx(tx).InsertContext(ctx, []store.ContextWrite{{UserID: "hans", Question: "Das Haus am See", CreatedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.SetLanguage(ctx, "hans", "de", "german")
		done <- err
	}()
	// SetLanguage waits for the insert's shared lock on hans's language.
	eventstest.Eventually(t, "SetLanguage to wait for the open insert", 30*time.Second, func() (bool, string) {
		var waiting int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks l WHERE l.locktype = 'advisory' AND NOT l.granted
			AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended('memoryd.language.' || current_schema() || '.' || 'hans', 0)`).Scan(&waiting)
		return err == nil && waiting == 1, fmt.Sprintf("%d waiting, %v", waiting, err)
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := matched(t, ctx, s, "hans", "Häuser"); !slices.Equal(got, []string{"Das Haus am See"}) {
		t.Fatalf("german Häuser found %q: the item inserted during the change kept english", got)
	}
}

// TestStopWords: the words a user's text search configuration searches
// for nothing, English when none is set; simple has none.
func TestStopWords(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.SetLanguage(ctx, "hans", "de", "german"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetLanguage(ctx, "yuki", "ja", "simple"); err != nil {
		t.Fatal(err)
	}
	words := []string{"und", "ich", "mutter", "diabetes", "the", "about", "東京"}
	for _, c := range []struct {
		user string
		want []string
	}{
		{"anna", []string{"about", "the"}},
		{"hans", []string{"ich", "und"}},
		{"yuki", nil},
	} {
		stops, err := s.StopWords(ctx, c.user, words)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for w := range stops {
			got = append(got, w)
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("StopWords(%s) = %q, want %q", c.user, got, c.want)
		}
	}
}
