package enricher

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

func TestBigramTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text string
		want       []string
	}{
		{"empty", "", nil},
		{"latin", "Hello world", []string{"Hello world"}},
		{"latin with accents", "Häuser in Zürich, naïve café", []string{"Häuser in Zürich, naïve café"}},
		{"japanese", "東京の天気はどうですか", []string{"東京", "京の", "の天", "天気", "気は", "はど", "どう", "うで", "です", "すか"}},
		{"chinese", "今天的天气很好", []string{"今天", "天的", "的天", "天气", "气很", "很好"}},
		{"korean", "서울 날씨가 좋아요", []string{"서울", " ", "날씨", "씨가", " ", "좋아", "아요"}},
		{"katakana and prolonged mark", "コーヒー", []string{"コー", "ーヒ", "ヒー"}},
		{"half-width katakana", "ｺｰﾋｰ", []string{"ｺｰ", "ｰﾋ", "ﾋｰ"}},
		{"iteration mark", "人々", []string{"人々"}},
		{"mixed", "東京でReactを勉強", []string{"東京", "京で", "React", "を勉", "勉強"}},
		{"single character run", "猫", []string{"猫"}},
		{"single characters between latin", "a猫b犬", []string{"a", "猫", "b", "犬"}},
		{"digits", "2024年", []string{"2024", "年"}},
		{"punctuation separates runs", "東京、大阪。「京都」・奈良", []string{"東京", "、", "大阪", "。「", "京都", "」・", "奈良"}},
		{"ideographic space", "東京\u3000大阪", []string{"東京", "\u3000", "大阪"}},
		{"voicing mark symbol is not cjk", "か゛き", []string{"か", "゛", "き"}},
		{"combining voicing mark is", "か\u3099き", []string{"か\u3099", "\u3099き"}},
		{"emoji", "🐕東京🐕", []string{"🐕", "東京", "🐕"}},
		{"supplementary ideograph", "𠮷野家", []string{"𠮷野", "野家"}},
		{"ideographic zero is not cjk", "〇〇", []string{"〇〇"}},
		{"invalid utf-8", "東\xff京", []string{"東", "\xff", "京"}},
		// South-East Asian scripts: a unit is a letter and its marks.
		{"thai", "ฉันชอบข้าวผัด", []string{"ฉัน", "นช", "ชอ", "อบ", "บข้", "ข้า", "าว", "วผั", "ผัด"}},
		{"thai words spaced", "ข้าว ผัด", []string{"ข้า", "าว", " ", "ผัด"}},
		{"thai one letter with marks", "ที่", []string{"ที่"}},
		{"thai digits and punctuation separate", "ปี๒๕๖๘ฯลฯ", []string{"ปี", "๒๕๖๘", "ฯล", "ลฯ"}},
		{"lao", "ຂ້ອຍມັກ", []string{"ຂ້ອ", "ອຍ", "ຍມັ", "ມັກ"}},
		{"khmer coeng", "ខ្ញុំចូល", []string{"ខ្ញុំ", "ញុំចូ", "ចូល"}},
		{"myanmar", "ကျွန်တော်", []string{"ကျွန်", "န်တော်"}},
		{"stray mark opens a run", "a\u0e48ขา", []string{"a", "\u0e48ข", "ขา"}},
		{"stray mark alone", "x\u0e48y", []string{"x", "\u0e48", "y"}},
		{"thai beside cjk", "東京ไป", []string{"東京", "ไป"}},
		{"thai in latin", "pad ผัดไทย please", []string{"pad ", "ผัด", "ดไ", "ไท", "ทย", " please"}},
	}
	for _, tt := range tests {
		if got := BigramTokens(tt.text); !slices.Equal(got, tt.want) {
			t.Errorf("%s: BigramTokens(%q) = %q, want %q", tt.name, tt.text, got, tt.want)
		}
	}
}

func TestKeywordsCJK(t *testing.T) {
	t.Parallel()
	tests := []struct {
		message string
		want    []string
	}{
		{"東京の天気は？", []string{"東京", "京の", "の天", "天気", "気は"}},
		// 怎么 么样: function pieces (cjkstop.go).
		{"今天的天气怎么样", []string{"今天", "天的", "的天", "天气", "气怎"}},
		// Latin parts keep the usual rules (lower case, stop words, length).
		// した たい: function pieces.
		{"東京でReactを勉強したい", []string{"東京", "京で", "react", "を勉", "勉強", "強し"}},
		{"What about 東京?", []string{"東京"}},
		// った たの のい: past tense and what follows it (cjkstop.go).
		{"IKEAに行ったのいつ？", []string{"ikea", "に行", "行っ"}},
		// Full width and half width in their ordinary forms (NFKC).
		{"ＩＫＥＡで２つ買った", []string{"ikea", "つ買", "買っ"}},
		{"ｽﾀｰﾊﾞｯｸｽ", []string{"スタ", "ター", "ーバ", "バッ", "ック", "クス"}},
		// South-East Asian runs: trigrams of units (a letter and its
		// marks), those of function words (ผม, อะไร, ครับ) dropped.
		{"แมว ชื่อ อะไร", []string{"แมว", "ชื่อ"}},
		{"ผมแพ้อะไร", []string{"ผมแ", "มแพ้", "แพ้อ", "พ้อะ"}},
		{"ขอบคุณครับ", []string{}},                                       // thanks: nothing to recall
		{"ทำไมครับ", []string{}},                                         // "why?": ทำ (NFKC ทํา) in the lists as typed
		{"ผมอยู่ที่ไหน", []string{"ผมอ", "มอยู่", "อยู่ที่", "ยู่ที่ไ"}}, // "where do I live?": อยู่ is asked
		{"ok ครับ", []string{}},
		// Only grammar around a short word: the word, not the grammar.
		{"AIについて教えて", []string{"ai"}},
		{"thanks \u0e48", []string{}},          // a stray mark is no word
		{"ធនាគារ", []string{"ធនាគា", "នាគារ"}}, // Khmer: units ធ នា គា រ
		{"ကျေးဇူးတင်ပါတယ်", []string{}},        // Burmese thanks
		{"猫", []string{"猫"}},
		{"東京 東京 京都", []string{"東京", "京都"}}, // deduplicated
		{"서울 날씨", []string{"서울", "날씨"}},
	}
	for _, tt := range tests {
		if got := Keywords(tt.message); !slices.Equal(got, tt.want) {
			t.Errorf("Keywords(%q) = %q, want %q", tt.message, got, tt.want)
		}
	}
	for _, w := range []string{"東京", "猫", "ｺｰ"} {
		if IsStopWord(w) {
			t.Errorf("IsStopWord(%q): a CJK token is never a stop word", w)
		}
	}
	if !IsStopWord("ab") || !IsStopWord("the") {
		t.Error("IsStopWord changed for Latin words")
	}
}

// sqlForm is what memoryd_cjk makes of text by BigramTokens: bigram
// tokens between spaces, the rest as it is.
func sqlForm(text string) string {
	var b strings.Builder
	for _, tok := range BigramTokens(text) {
		if isBigramToken(tok) {
			b.WriteString(" " + tok + " ")
		} else {
			b.WriteString(tok)
		}
	}
	return b.String()
}

// TestBigramTokensMatchPostgres: the query side (BigramTokens, isCJK,
// isSEA, isSEAMark) and the index side (the SQL function memoryd_cjk)
// split text identically: on the table's texts, on every edge of every
// range isCJK lists (each edge character, and its neighbours, in runs of
// one, two and three), and on every code point of the Thai, Lao, Myanmar
// and Khmer blocks (and Myanmar's extensions), alone, after a letter,
// before one, and in a run.
func TestBigramTokensMatchPostgres(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	texts := []string{
		"", "Hello world", "東京の天気はどうですか", "今天的天气很好", "서울 날씨가 좋아요", "東京でReactを勉強",
		"東京、大阪。「京都」・奈良", "か゛き", "か\u3099き", "🐕東京🐕", "𠮷野家", "〇〇", "人々", "ｺｰﾋｰ", "2024年",
		"It's 'quoted' \\ text & | !", "a猫b犬",
		"ฉันชอบกินข้าวผัดมาก", "ข้าว ผัด", "ปี๒๕๖๘ฯลฯ", "ຂ້ອຍມັກກິນເຂົ້າ", "ខ្ញុំចូលចិត្តញ៉ាំបាយ",
		"ကျွန်တော်ထမင်းစားချင်တယ်", "a\u0e48ขา", "x\u0e48y", "\u0e48\u0e49", "東京ไป", "ไป東京", "pad ผัดไทย please",
	}
	edges := []rune{0x1100, 0x11ff, 0x3005, 0x3006, 0x3041, 0x309a, 0x309d, 0x309f, 0x30a1, 0x30fa, 0x30fc, 0x30ff,
		0x3131, 0x318e, 0x31f0, 0x31ff, 0x3400, 0x4dbf, 0x4e00, 0x9fff, 0xa960, 0xa97f, 0xac00, 0xd7ff, 0xf900, 0xfaff,
		0xff66, 0xff9f, 0xffa0, 0xffdc, 0x20000, 0x3fffd}
	for _, e := range edges {
		for _, r := range []rune{e - 1, e, e + 1} {
			if r >= 0xd800 && r <= 0xdfff {
				continue // surrogates are not characters
			}
			c := string(r)
			texts = append(texts, "x"+c+"y"+c+c+"z"+c+c+c)
		}
	}
	for _, block := range [][2]rune{{0x0e00, 0x0eff}, {0x1000, 0x109f}, {0x1780, 0x17ff}, {0xa9e0, 0xa9ff}, {0xaa60, 0xaa7f}} {
		for r := block[0]; r <= block[1]; r++ {
			c := string(r)
			texts = append(texts, "x"+c+"y ก"+c+" "+c+"ก "+c+c+" กข"+c+"ค"+c+c+"ง")
		}
	}
	got := callSQL(t, s, "memoryd_cjk", texts)
	for i, text := range texts {
		if want := sqlForm(text); got[i] != want {
			t.Errorf("memoryd_cjk(%q) = %q, BigramTokens gives %q", text, got[i], want)
		}
	}
}

// callSQL returns fn($1) for each of in, read in one batch.
func callSQL(t *testing.T, s *store.Store, fn string, in []string) []string {
	t.Helper()
	got := make([]string, len(in))
	batch := &pgx.Batch{}
	for i, v := range in {
		batch.Queue(`SELECT `+fn+`($1)`, v).QueryRow(func(row pgx.Row) error { return row.Scan(&got[i]) })
	}
	if err := s.Pool().SendBatch(context.Background(), batch).Close(); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestLanguageConfigsExist: every configuration a language maps to is one
// Postgres has.
func TestLanguageConfigsExist(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	rows, err := s.Pool().Query(context.Background(), `SELECT cfgname::text FROM pg_ts_config`)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		have[name] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for code, config := range events.LanguageConfigs() {
		if !have[config] {
			t.Errorf("language %q maps to %q, which Postgres does not have", code, config)
		}
	}
}

// TestSelectFactsCJK: a fact's CJK value is split like the message, so a
// fact about 東京大学 is relevant to a message about 東京.
func TestSelectFactsCJK(t *testing.T) {
	t.Parallel()
	facts := []store.Fact{{Key: "school", Value: "東京大学"}, {Key: "pet", Value: "猫のミケ"}, {Key: "hobby", Value: "guitar"}}
	var got []string
	for _, f := range selectFacts(events.FactsRelevant, Keywords("東京の天気は？"), facts) {
		got = append(got, f.Key)
	}
	if !slices.Equal(got, []string{"school"}) {
		t.Errorf("facts for 東京の天気は = %q, want [school]", got)
	}
}

// TestSelectFactsThai: a Thai fact is relevant to a message sharing a
// bigram of units with it outside function words, though the message is
// searched by pieces of three units: a fact shorter than a piece ("กุ้ง"),
// or sharing only part of one ("แพ้กุ้ง" for "what am I allergic to?").
func TestSelectFactsThai(t *testing.T) {
	t.Parallel()
	facts := []store.Fact{
		{Key: "allergy", Value: "แพ้กุ้ง"},       // allergic to shrimp
		{Key: "favourite_food", Value: "กุ้ง"},   // shrimp
		{Key: "pet", Value: "แมว"},               // cat
		{Key: "pet_name", Value: "ส้มโอ"},        // Som-O
		{Key: "employer", Value: "บริษัทของฉัน"}, // my company: ของ ฉัน are function words
	}
	for _, tt := range []struct {
		message string
		want    []string
	}{
		{"ฉันแพ้อะไรบ้าง", []string{"allergy"}},               // what am I allergic to?
		{"กุ้งแพงไหม", []string{"allergy", "favourite_food"}}, // is shrimp expensive?
		{"แมวของฉันชื่ออะไร", []string{"pet"}},                // what is my cat's name?
		{"ส้มโอกินอะไร", []string{"pet_name"}},                // what does Som-O eat?
		{"ของฉันอยู่ไหน", nil},                                // "where is mine": function words only
	} {
		var got []string
		for _, f := range selectFacts(events.FactsRelevant, Keywords(tt.message), facts) {
			got = append(got, f.Key)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("facts for %s = %q, want %q (keywords %q)", tt.message, got, tt.want, Keywords(tt.message))
		}
	}
}
