package ranking_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.txt from the current code")

// goldenT0 is the corpus' reference time: items are up to 400 days older,
// queries are made up to 30 days before or after it.
var goldenT0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

// goldenVocab is a conversational vocabulary, drawn with a skew (the first
// words far more often than the last) so that, as in real memory, a few
// words are in many of a user's items and most are in few. It holds stop
// words, stems of one word, words the tsvector text form escapes and
// multibyte words.
var goldenVocab = strings.Fields(`
	the my and a to is it i you of in was we for on that with about what at
	dog dogs walk walked walking park sister brother mother paris porto lisbon
	guitar lesson lessons piano server index deploy deploying deployed database
	postgres query slow fast lunch dinner coffee tea birthday party friday monday
	weekend trip flight hotel booked booking doctor appointment dentist tuesday
	project deadline report meeting budget office team manager review code bug
	fix fixed release version garden tomato tomatoes bike ride running marathon
	training knee injury recipe pasta pizza bread oven wine cheese movie film
	book novel author chapter reading painting canvas blue red green yellow
	it's don't o'neill café naïve 日本語 東京 a\b rex luna max bella charlie
	cat cats kitten vet vaccine insurance car repair garage mechanic tyre
	school homework math exam grade teacher kids son daughter wedding anniversary
	gift present flowers ring holiday beach mountain hiking tent camping rain
	weather snow winter summer spring autumn tax refund salary bank loan rent
	apartment landlord lease move moving boxes kitchen bathroom paint wall
	`)

func goldenWord(rng *rand.Rand) string {
	u := rng.Float64()
	return goldenVocab[int(float64(len(goldenVocab))*u*u*u)]
}

func goldenSentence(rng *rand.Rand, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = goldenWord(rng)
		if rng.IntN(8) == 0 {
			w[i] += []string{",", ".", "?", "!"}[rng.IntN(4)]
		}
	}
	return strings.Join(w, " ")
}

// goldenUsers and goldenItems size the corpus: enough items per user for
// document frequencies and mean lengths to vary.
const (
	goldenUsers   = 12
	goldenItems   = 120 // per user
	goldenQueries = 600
)

func goldenUser(i int) string { return fmt.Sprintf("user-%02d", i) }

// goldenCorpus is the seeded corpus, the same on every run.
func goldenCorpus() []store.ContextWrite {
	rng := rand.New(rand.NewPCG(15, 6))
	var w []store.ContextWrite
	for u := range goldenUsers {
		for i := range goldenItems {
			w = append(w, store.ContextWrite{
				UserID:         goldenUser(u),
				Question:       goldenSentence(rng, 2+rng.IntN(14)),
				Answer:         goldenSentence(rng, rng.IntN(30)),
				CreatedAt:      goldenT0.Add(-time.Duration(rng.IntN(400*24*60)) * time.Minute),
				EventID:        fmt.Sprintf("%s-e%03d", goldenUser(u), i),
				ConversationID: fmt.Sprintf("c%d", i/10),
			})
		}
	}
	return w
}

// goldenQuery is one search of the golden set.
type goldenQuery struct {
	userID    string
	keywords  []string
	at        time.Time
	threshold float64
	limit     int
	recall    bool // through Recall rather than SearchContext
}

// goldenKeywords splits a message into lower-case words of three characters
// or more, the way enrich's keyword extraction roughly does.
func goldenKeywords(message string) []string {
	var kws []string
	for _, w := range strings.FieldsFunc(strings.ToLower(message), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' && r != '\\'
	}) {
		if len([]rune(w)) > 2 {
			kws = append(kws, w)
		}
	}
	return kws
}

func goldenQuerySet(corpus []store.ContextWrite) []goldenQuery {
	rng := rand.New(rand.NewPCG(15, 7))
	qs := make([]goldenQuery, goldenQueries)
	for i := range qs {
		u := rng.IntN(goldenUsers)
		var msg string
		if rng.IntN(10) < 7 { // words of one of the user's own items
			it := corpus[u*goldenItems+rng.IntN(goldenItems)]
			words := strings.Fields(it.Question + " " + it.Answer)
			rng.Shuffle(len(words), func(i, j int) { words[i], words[j] = words[j], words[i] })
			msg = strings.Join(words[:min(len(words), 1+rng.IntN(6))], " ")
		} else {
			msg = goldenSentence(rng, 1+rng.IntN(8))
		}
		kws := goldenKeywords(msg)
		if i%25 == 0 {
			kws = append(kws, "walk dog", "it's") // a phrase and an escaped word
		}
		qs[i] = goldenQuery{
			userID:    goldenUser(u),
			keywords:  kws,
			at:        goldenT0.Add(time.Duration(rng.IntN(60*24*60)-30*24*60) * time.Minute),
			threshold: []float64{0, 0.3, 0.3, 0.5, 0.7}[rng.IntN(5)],
			limit:     []int{1, 3, 5, 5, 10, 20, 200}[rng.IntN(7)],
			recall:    i%2 == 1,
		}
	}
	return qs
}

// goldenLine is a query's results as the golden file holds them: the items'
// event ids and exact scores, in order.
func goldenLine(i int, items []store.ContextItem) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d:", i)
	for _, it := range items {
		fmt.Fprintf(&b, " %s=%s", it.EventID, strconv.FormatFloat(it.Score, 'g', -1, 64))
	}
	return b.String()
}

// TestRankingMatchesGolden runs a fixed set of queries over a fixed corpus
// and compares the items, their order and their exact scores with
// testdata/golden.txt, written by the ranking code that lived in store before
// it moved to this package (go test -run TestRankingMatchesGolden -update
// rewrites it).
func TestRankingMatchesGolden(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	corpus := goldenCorpus()
	if _, err := s.InsertContext(ctx, corpus); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for i, q := range goldenQuerySet(corpus) {
		items, err := goldenSearch(ctx, s, q)
		if err != nil {
			t.Fatalf("query %d %+v: %v", i, q, err)
		}
		lines = append(lines, goldenLine(i, items))
	}
	const path = "testdata/golden.txt"
	if *update {
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n, nonEmpty := 0, 0
	for sc.Scan() {
		if n >= len(lines) {
			t.Fatalf("golden file has more than %d queries", len(lines))
		}
		if sc.Text() != lines[n] {
			t.Errorf("query %d %+v:\n got  %s\n want %s", n, goldenQuerySet(corpus)[n], lines[n], sc.Text())
		}
		if strings.Contains(sc.Text(), "=") {
			nonEmpty++
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(lines) {
		t.Fatalf("golden file has %d queries, want %d", n, len(lines))
	}
	// The set must exercise the ranking, not only return nothing.
	if nonEmpty < len(lines)/2 {
		t.Fatalf("only %d of %d queries return items", nonEmpty, len(lines))
	}
}

// BenchmarkGoldenSearch is the golden queries' cost through the store and the
// ranking, one query per iteration (most of it the Postgres round trip).
func BenchmarkGoldenSearch(b *testing.B) {
	ctx := context.Background()
	s := storetest.New(b)
	corpus := goldenCorpus()
	if _, err := s.InsertContext(ctx, corpus); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, "VACUUM ANALYZE context"); err != nil {
		b.Fatal(err)
	}
	qs := goldenQuerySet(corpus)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := goldenSearch(ctx, s, qs[i%len(qs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
