package enricher_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/store"
)

// hostileMessages seed the fuzz tests and run against Postgres in
// TestHostileMessagesNeverError.
var hostileMessages = []string{
	"", " ", "'", "''", `\`, `\\'`, "&", "|", "!", ":", "*", "(", ")", "<->",
	"dog & cat | !bird", "dog:*", "dog:A", "'dog' | 'cat'", `foo\'bar`, "(((dog)))",
	"it's my dog's name", "don't", "dog\x00cat", "\xff\xfe\xfd", "caf\xc3 dog", "\xc3\x28dog",
	"日本語のテキスト 犬", "Straße ÆØÅ", "emoji 🐕 dog", "\u202edog\u202c", "a\u0301bc",
	strings.Repeat("a", 3000), strings.Repeat("dog ", 500), "SELECT * FROM context; --",
	"[facts: x=y] [context: z]", "Please, thanks! Tell me, do you know?",
}

func TestKeywords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		message string
		want    []string
	}{
		{"What's my dog's name?", []string{"dog", "name"}},
		{"Please tell me, do you know where I live?", []string{"live"}},
		{"Dog DOG dog, dogs!", []string{"dog", "dogs"}},
		{"I am in Paris (France) & love it.", []string{"paris", "france", "love"}},
		{"an ox is big", []string{"big"}},
		{"hi", []string{}},                   // greets only: nothing to search
		{"Thanks so much!", []string{}},      // thanks only
		{"ok, great, thank you", []string{}}, // acknowledges only
		{"That's great, thanks!", []string{}},
		// Small talk with stop words around its phatic words (before: their
		// other words searched, 1,300-1,500 tokens of unrelated turns).
		{"Thank you so much, this was really helpful!", []string{}},
		{"I see, makes sense", []string{}},
		{"Good morning! How are you?", []string{}},
		{"thanks, and what about the other one?", []string{}},
		{"Good food here?", []string{"good", "food"}}, // "good" alone greets nothing
		{"Morning or evening?", []string{"morning", "evening"}},
		{"Is it nice there?", []string{"nice"}},
		{"AI?", []string{"ai"}},                                    // short words only: raw words
		{"Who am I?", []string{"who", "am", "i"}},                  // nothing left: raw words
		{"Can you tell me?", []string{"can", "you", "tell", "me"}}, // stop words only: raw words
		{"?!...", []string{}},
		{"", []string{}},
		{"caf\xc3 au lait", []string{"caf", "lait"}}, // invalid byte separates
		{"naïve café Zürich", []string{"naïve", "café", "zürich"}},
		{"a\u0301bc", []string{"\u00e1bc"}}, // combining mark stays in the word, composed (NFC)
		{"x:* & y | z", []string{"x", "y", "z"}},
		{"2026 budget", []string{"2026", "budget"}},
		// Two-character words of scripts where they are nouns are kept
		// (their function words are not): "Where do my dad and mum live?"
		{"Bố mẹ tôi sống ở đâu?", []string{"bố", "mẹ", "sống"}},
		{"Vợ tôi đã đi đâu?", []string{"vợ", "đi"}},
		{"घर कहाँ है", []string{"घर"}},                      // "where is home"
		{"איפה אני גר", []string{"גר"}},                     // "where do I live"
		{"מה המקצוע שלי?", []string{"המקצוע"}},              // "what is my profession?"
		{"أين تعمل أختي؟", []string{"تعمل", "أختي"}},        // "where does my sister work?"
		{"اين تعمل أختي؟", []string{"تعمل", "أختي"}},        // the same, typed without the hamza
		{"أختي أيضاً تعمل", []string{"أختي", "تعمل"}},       // "my sister works too": with its tanween
		{"מי האחות שלי?", []string{"האחות"}},                // "who is my sister?"
		{"मेरी बहन कहाँ रहती है?", []string{"बहन", "रहती"}}, // "where does my sister live?"
		{"في أي حي أسكن", []string{"حي", "أسكن"}},           // "which neighbourhood do I live in"
		{"Tôi thích ăn gì?", []string{"thích", "ăn"}},       // "what do I like to eat?"
		{"xe buýt", []string{"buýt"}},                       // ASCII: by length, as before
		// In a Vietnamese message, Latin-1 accented syllables too ("Where is
		// my mum?", "grandma and I"); its function words not.
		{"Má tôi ở đâu?", []string{"má"}},
		{"Bà và tôi là bạn", []string{"bà", "bạn"}},
		{"Où est le café?", []string{"est", "café"}}, // French: "où" stays a short word
	}
	for _, tt := range tests {
		if got := enricher.Keywords(tt.message); !slices.Equal(got, tt.want) || got == nil {
			t.Errorf("Keywords(%q) = %#v, want %#v", tt.message, got, tt.want)
		}
	}
	long := strings.Repeat("word ", 5) + strings.Repeat("x", store.MaxKeywordBytes+1)
	if got := enricher.Keywords(long); !slices.Equal(got, []string{"word"}) {
		t.Errorf("long word kept: %q", got)
	}
	var many []string
	for i := range store.MaxKeywords + 5 {
		many = append(many, "word"+strings.Repeat("x", i))
	}
	if got := enricher.Keywords(strings.Join(many, " ")); len(got) != store.MaxKeywords {
		t.Errorf("got %d keywords, want the cap %d", len(got), store.MaxKeywords)
	}
}

// checkKeywords holds the invariants of Keywords' output.
func checkKeywords(t *testing.T, message string, kws []string) {
	if kws == nil {
		t.Fatalf("Keywords(%q) is nil", message)
	}
	if len(kws) > store.MaxKeywords {
		t.Fatalf("Keywords(%q): %d keywords", message, len(kws))
	}
	seen := map[string]bool{}
	for _, k := range kws {
		if k == "" || !utf8.ValidString(k) || len(k) > store.MaxKeywordBytes*2 || seen[k] {
			t.Fatalf("Keywords(%q): bad or repeated keyword %q", message, k)
		}
		seen[k] = true
		for _, r := range k {
			if !(unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)) {
				t.Fatalf("Keywords(%q): keyword %q holds %q", message, k, r)
			}
		}
	}
}

func FuzzKeywords(f *testing.F) {
	for _, m := range hostileMessages {
		f.Add(m)
	}
	f.Fuzz(func(t *testing.T, message string) {
		checkKeywords(t, message, enricher.Keywords(message))
	})
}

// lexeme is one quoted tsquery lexeme: a quote, then anything but a quote or
// backslash, or a doubled quote, or a backslash pair, then a quote.
var orQuery = regexp.MustCompile(`^('(?:[^'\\\x00]|''|\\\\)+'(?: \| '(?:[^'\\\x00]|''|\\\\)+')*)?$`)

func FuzzQuery(f *testing.F) {
	for _, m := range hostileMessages {
		f.Add(m, m)
	}
	f.Fuzz(func(t *testing.T, message, raw string) {
		// The enrich path: message -> keywords -> query.
		q := store.TSQuery(enricher.Keywords(message))
		if !utf8.ValidString(q) || !orQuery.MatchString(q) {
			t.Fatalf("TSQuery(Keywords(%q)) = %q is not an OR of quoted lexemes", message, q)
		}
		// Any keyword list, even text no tokenizer produced.
		q = store.TSQuery(append(strings.Fields(raw), raw))
		if !utf8.ValidString(q) || !orQuery.MatchString(q) {
			t.Fatalf("TSQuery(%q) = %q is not an OR of quoted lexemes", raw, q)
		}
	})
}

func TestWordsAndIsStopWord(t *testing.T) {
	t.Parallel()
	if got := enricher.Words("What's my dog's name? Dog!"); !slices.Equal(got, []string{"what", "s", "my", "dog", "s", "name", "dog"}) {
		t.Errorf("Words = %q", got)
	}
	if got := enricher.Words(""); got == nil || len(got) != 0 {
		t.Errorf("Words(\"\") = %#v, want empty", got)
	}
	for _, w := range enricher.Keywords("Please tell me where my dog and the cat live") {
		if enricher.IsStopWord(w) {
			t.Errorf("keyword %q is a stop word", w)
		}
	}
	for _, w := range []string{"the", "my", "ox", "please"} {
		if !enricher.IsStopWord(w) {
			t.Errorf("IsStopWord(%q) = false", w)
		}
	}
}

// BenchmarkKeywords: the keywords of a typical enrich message, parsed on
// every request.
// "64KiB-distinct" is the largest message enrich takes, of words all
// different: the cap chooses 32 of them (it sorted them all at first:
// 10-12 ms a message).
func BenchmarkKeywords(b *testing.B) {
	var long strings.Builder
	for i := 0; long.Len() < 65536-12; i++ {
		fmt.Fprintf(&long, "w%x ", i*7919)
	}
	for _, m := range []struct{ name, msg string }{
		{"short", "Hey, what was the name of that Italian restaurant near the office my sister recommended last month?"},
		{"64KiB-distinct", long.String()},
	} {
		b.Run(m.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				enricher.Keywords(m.msg)
			}
		})
	}
}

// TestKeywordsShortNames: a two-character word written as a name or an
// acronym is searched (before, every ASCII word of two characters was
// dropped, and "how do I fix the Go build error?" found the Rust build's
// turn first; "how big is the JS bundle?" the CSS bundle's).
func TestKeywordsShortNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		message string
		want    []string
	}{
		{"how do I fix the Go build error?", []string{"fix", "go", "build", "error"}},
		{"how big is the JS bundle?", []string{"big", "js", "bundle"}},
		{"when did I move to the UK?", []string{"move", "uk"}},
		{"who lives in the US?", []string{"lives", "us"}},
		{"what does my partner do in AI?", []string{"partner", "ai"}},
		{"where is the NY office now?", []string{"ny", "office"}},
		{"why is the CI red on my PR?", []string{"ci", "red", "pr"}},
		{"what do we use the 5G modem for?", []string{"use", "5g", "modem"}},
		{"is the bucket on S3 or in 3D storage?", []string{"bucket", "s3", "3d", "storage"}},
		{"did Ed Sheeran play with Jo?", []string{"ed", "sheeran", "play", "jo"}},
		{"what about Go?", []string{"go"}},
		{"UK or US?", []string{"uk", "us"}},
		// Not names: a sentence's first word, lower case, shouting, titles,
		// fillers, Postgres' english stop words.
		{"Go to the store and buy milk", []string{"store", "buy", "milk"}},
		{"so we go up to the lake", []string{"lake"}},
		{"WHERE DID WE GO FOR US", []string{"where", "did", "we", "go", "for", "us"}}, // stop words only: raw words, as before
		{"WHERE IS MY CAR IN THE UK", []string{"car"}},
		{"I saw Dr Smith at 5 PM, OK?", []string{"saw", "smith"}},
		{"what does our IT team do?", []string{"team"}},
		{"Oh no, the PM said the build is ON again", []string{"build"}},
	}
	for _, tt := range tests {
		if got := enricher.Keywords(tt.message); !slices.Equal(got, tt.want) {
			t.Errorf("Keywords(%q) = %#v, want %#v", tt.message, got, tt.want)
		}
	}
}
