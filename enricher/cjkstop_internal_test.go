package enricher

import (
	"slices"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestKeywordsCJKFunctionPieces: a query's CJK grammar (endings,
// auxiliaries, particles, question words, pronouns) is not searched, while
// every piece with a content character is, all-hiragana and all-Hangul
// content words included.
func TestKeywordsCJKFunctionPieces(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, message string
		want          []string
	}{
		// Japanese: です すか は何 何で are grammar; 趣味 is asked.
		{"ja question", "趣味は何ですか？", []string{"趣味", "味は"}},
		{"ja where", "どこに住んでいますか？", []string{"に住", "住ん"}},
		{"ja statement", "大阪に住んでいます", []string{"大阪", "阪に", "に住", "住ん"}},
		{"ja katakana", "コーヒーが好きです", []string{"コー", "ーヒ", "ヒー", "ーが", "が好", "好き", "きで"}},
		{"ja te-iru", "仕事はエンジニアをしています", []string{"仕事", "事は", "はエ", "エン", "ンジ", "ジニ", "ニア", "アを"}},
		// All-hiragana content words keep their pieces: a particle is
		// function only after a kanji, a katakana or function material.
		{"ja hiragana neko", "ねこの名前は？", []string{"ねこ", "の名", "名前", "前は"}},
		{"ja hiragana ringo", "りんごが好きです", []string{"りん", "んご", "ごが", "が好", "好き", "きで"}},
		{"ja hiragana kani", "かにを食べた", []string{"かに", "にを", "を食", "食べ", "べた"}},
		{"ja hiragana momo", "これはもも", []string{"はも", "もも"}},
		{"ja particle after latin", "Reactを", []string{"react"}},
		// The plain past した and the polite pasts of ある いる are grammar
		// as ました is; "あした" keeps its content piece.
		{"ja plain past", "昨日何をした？", []string{"昨日", "日何"}},
		{"ja plain past after noun", "料理をした", []string{"料理", "理を"}},
		{"ja arimashita", "会議がありました", []string{"会議", "議が"}},
		{"ja imashita", "東京にいました", []string{"東京", "京に"}},
		{"ja ashita", "あしたは何？", []string{"あし"}},
		// Chinese: 的 了 是 什么 哪里 我的 are grammar.
		{"zh where", "我住在哪里？", []string{"我住", "住在"}},
		{"zh name", "我的狗叫什么名字？", []string{"的狗", "狗叫", "叫什", "么名", "名字"}},
		{"zh who", "小白是谁？", []string{"小白", "白是"}},
		{"zh know", "你知道我喜欢什么吗", []string{"我喜", "喜欢", "欢什"}},
		// A piece that is grammar in one place and content in another is
		// kept, whichever comes first.
		{"ja grammar then content", "猫はなにが好き？はなが好き", []string{"猫は", "はな", "が好", "好き", "なが"}},
		// Traditional characters are the same grammar.
		{"zh-hant name", "我的貓叫什麼名字？", []string{"的貓", "貓叫", "叫什", "麼名", "名字"}},
		{"zh-hant talk", "你們在說什麼嗎？", []string{"在說", "說什"}},
		// Korean: particles and endings at a word's end, function words.
		{"ko hobby", "제 취미가 뭐예요?", []string{"취미", "미가"}},
		{"ko live", "서울에 살아요", []string{"서울", "울에", "살아"}},
		{"ko choco", "초코는 뭐예요?", []string{"초코", "코는"}},
		{"ko stems keep", "고양이 나이가 몇 살이에요?", []string{"고양", "양이", "나이", "이가", "살이"}},
		{"ko particle after latin", "Java를 배워요", []string{"java", "배워"}},
		// Only grammar: every piece, as English falls back to every word.
		{"ja only grammar", "何ですか？", []string{"何で", "です", "すか"}},
		{"ko only grammar", "뭐예요?", []string{"뭐예", "예요"}},
	}
	for _, tt := range tests {
		if got := Keywords(tt.message); !slices.Equal(got, tt.want) {
			t.Errorf("%s: Keywords(%q) = %q, want %q", tt.name, tt.message, got, tt.want)
		}
	}
}

// TestKeywordsNFC: a message is put in NFC before it is split, so a word
// typed decomposed gives the composed keyword (the index is in NFC too).
func TestKeywordsNFC(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, message string
		want          []string
	}{
		{"latin nfd", "cafe\u0301 in Ko\u0308ln", []string{"caf\u00e9", "k\u00f6ln"}},
		{"latin nfc", "caf\u00e9 in K\u00f6ln", []string{"caf\u00e9", "k\u00f6ln"}},
		{"vietnamese nfd", "pho\u031b\u0309 o\u031b\u0309 Ha\u0300 No\u0323\u0302i", []string{"ph\u1edf", "h\u00e0", "n\u1ed9i"}},
		// Hangul as conjoining Jamo (NFD) is the syllables' bigram.
		{"hangul jamo", "\u1109\u1165\u110b\u116e\u11af", []string{"서울"}},
		// The voiced mark combined: が, not か + U+3099.
		{"kana nfd", "か\u3099いこく", []string{"がい", "いこ", "こく"}},
	}
	for _, tt := range tests {
		if got := Keywords(tt.message); !slices.Equal(got, tt.want) {
			t.Errorf("%s: Keywords(%+q) = %+q, want %+q", tt.name, tt.message, got, tt.want)
		}
	}
	want := map[string]bool{foldWord("caf\u00e9"): true} // as selectFacts makes it
	if !matches(want, nil, "Cafe\u0301 au lait") {
		t.Error("a fact in NFD does not match the NFC keyword")
	}
}

// TestKeywordsCapKeepsQuestion: past store.MaxKeywords, the keywords of a
// message's question come first, then those of its later sentences, so a
// question after a long preamble is searched.
func TestKeywordsCapKeepsQuestion(t *testing.T) {
	t.Parallel()
	var pre []string
	for i := range store.MaxKeywords + 8 {
		pre = append(pre, "word"+strings.Repeat("x", i))
	}
	preamble := strings.Join(pre, " ") + ". "
	tests := []struct {
		name, message string
		want          []string // must be among the keywords
		gone          []string // must not
	}{
		{"question last", preamble + "What is my dog's name?", []string{"dog", "name"}, []string{"word"}},
		{"question first", "What is my dog's name? " + preamble, []string{"dog", "name"}, []string{pre[0]}},
		{"no question: the end", preamble + "My dog Rex.", []string{"dog", "rex"}, []string{"word"}},
		// Arabic's question mark ends a question ("When is my trip to Dubai?").
		{"arabic question first", "متى موعد سفري إلى دبي؟ " + preamble, []string{"دبي", "سفري"}, []string{pre[0]}},
		// One sentence past the cap: its end, where the question is.
		{"japanese", "最近は毎日仕事と家事と買い物と料理と掃除と洗濯と子供の送り迎えで疲れ切っているのだけれど、犬たちの名前を覚えていますか？",
			[]string{"犬た", "名前"}, []string{"最近"}},
		// A Thai question, written without "?" (a question word says it),
		// before a long explanation: "what am I allergic to? tonight I eat
		// out with colleagues near Silom, a new Japanese place ..."
		{"thai question first", "ผมแพ้อาหารอะไรบ้าง พอดีคืนนี้จะไปกินข้าวนอกบ้านกับเพื่อนที่ทำงานแถวสีลมตอนหกโมงเย็น ร้านอาหารญี่ปุ่นที่เพิ่งเปิดใหม่ใกล้สถานีรถไฟฟ้า ช่วยเตือนหน่อยนะครับ",
			[]string{"แพ้อ", "อาห"}, []string{"ข้าว"}},
		// A full-width question mark before a full-width digit still ends
		// the question (NFKC would make it a link's "?2").
		{"full-width question first", "犬の名前は？２匹目の話です。最近は毎日仕事と家事と買い物と料理と掃除と洗濯と子供の送り迎えで疲れ切っているのだけれど。",
			[]string{"犬の", "名前"}, []string{"最近"}},
	}
	for _, tt := range tests {
		got := Keywords(tt.message)
		if len(got) != store.MaxKeywords {
			t.Errorf("%s: %d keywords, want the cap %d: %q", tt.name, len(got), store.MaxKeywords, got)
		}
		for _, w := range tt.want {
			if !slices.Contains(got, w) {
				t.Errorf("%s: %q not among %q", tt.name, w, got)
			}
		}
		for _, w := range tt.gone {
			if slices.Contains(got, w) {
				t.Errorf("%s: %q among %q", tt.name, w, got)
			}
		}
		// Kept in order of first use.
		pos := -1
		for _, w := range got {
			i := strings.Index(strings.ToLower(tt.message), w)
			if i < pos {
				t.Errorf("%s: %q out of message order in %q", tt.name, w, got)
			}
			pos = i
		}
	}
}

// TestQuestionWordsOtherScripts: the full stops and question marks of
// other scripts end sentences, so only a question's own words are its.
func TestQuestionWordsOtherScripts(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		message   string
		statement string // a word of the sentence before the question
		question  string // a word of the question
	}{
		{"मेरा घर नोएडा में है। दफ़्तर कहाँ है?", "नोएडा", "कहाँ"},
		{"The car is blue. Where is the bicycle﹖ Anyway", "blue", "bicycle"},                  // small question mark                            // Hindi: danda
		{"میرا گھر لاہور میں ہے۔ دفتر کہاں ہے؟", "لاہور", "دفتر"},                             // Urdu: full stop, question mark
		{"ខ្ញុំរស់នៅភ្នំពេញ។ ធនាគារនៅឯណា?", "ខ្ញុំរស់នៅភ្នំពេញ", "ធនាគារនៅឯណា"},               // Khmer
		{"ကျွန်တော်မန္တလေးမှာနေတယ်။ ဘဏ်ဘယ်မှာလဲ?", "ကျွန်တော်မန္တလေးမှာနေတယ်", "ဘဏ်ဘယ်မှာလဲ"}, // Myanmar
	} {
		got := map[string]bool{}
		for w, q := range questionWords(tt.message) {
			got[w] = q.question
		}
		if q, ok := got[tt.statement]; !ok || q {
			t.Errorf("%q: %q question = %v (present %v), want a statement's word", tt.message, tt.statement, q, ok)
		}
		if q, ok := got[tt.question]; !ok || !q {
			t.Errorf("%q: %q question = %v (present %v), want the question's", tt.message, tt.question, q, ok)
		}
	}
}

func TestQuestionWords(t *testing.T) {
	t.Parallel()
	type wq struct {
		w string
		q bool
	}
	var got []wq
	for w, q := range questionWords("Rex is 3.5 years old. Where? 東京です。どこ？ see example.com/a?id=4 now. 名字?我忘了。ok?") {
		got = append(got, wq{w, q.question})
	}
	// A "?" inside a link ends no sentence; one at the very end does. A
	// decimal is one word.
	want := []wq{{"rex", false}, {"is", false}, {"3.5", false}, {"years", false}, {"old", false},
		{"where", true}, {"東京です", false}, {"どこ", true}, {"see", false}, {"example", false}, {"com", false},
		{"a", false}, {"id", false}, {"4", false}, {"now", false}, {"名字", true}, {"我忘了", false}, {"ok", true}}
	if !slices.Equal(got, want) {
		t.Errorf("questionWords = %v, want %v", got, want)
	}
}
