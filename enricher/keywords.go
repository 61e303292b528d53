package enricher

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/memoryd/memoryd/store"
)

// stopWords are conversational words that say nothing about what to recall:
// articles, pronouns, prepositions, conjunctions, auxiliaries and modals,
// question words, contraction stems and fillers, in English, the verbs
// that ask for a recollection in any question ("remind me what I said
// about my sister", "did I ever mention ...": a walk on a real
// conversation found them matching unrelated turns that said "reminder"
// or "talked"; talkWords holds more, dropped only beside a time), and the
// commonest of Vietnamese (tôi, của, không, ...), and the pronouns,
// possessives and question words of Hebrew, Arabic and Hindi (a
// multilingual walk: "מה המקצוע שלי?", "what is my profession?", put a
// turn sharing only שלי, "my", first; Postgres's configurations stop none
// of them). Scripts without capitals cannot tell a name from such a word:
// אלה ("these", and Ella) is left out. Words of two characters
// or fewer are dropped before this list is consulted, so it holds none
// (but see shortStopWords).
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
		the and but nor yet for not also than then too very
		you your yours yourself yourselves him his himself her hers herself its itself
		our ours ourselves they them their theirs themselves mine myself
		this that these those who whom whose which what whats whatever when where why how
		anyone anything someone something everyone everything nobody nothing
		about above across after against along among around before behind below beneath
		beside besides between beyond down during except from inside into near off onto out
		outside over past since through throughout till toward towards under until upon
		with within without via per because while whether though although unless
		can could may might must shall should will would cannot
		are was were been being have has had having does did doing done
		get gets got getting let lets
		don doesn didn isn aren wasn weren haven hasn hadn won wouldn shouldn couldn
		please thanks thank tell told know knew say said ask asked remember recall
		just really okay yes yeah yep hey hello well actually maybe any some all
		much more most again still now here there only own same such each few other
		both every either neither one ones something anyway basically literally
		hmm umm uhm lol want wanted
		tôi của với không này những được một các cũng nhưng rồi thì nào đâu
		שלי שלך שלו שלה שלנו שלכם שלהם אני אתה אתם אתן הוא היא אנחנו זאת
		איפה מתי למה איך כמה האם היה היתה הייתה היו להיות אבל כמו עוד מאוד כבר
		أنا أنت أنتم نحن هذا هذه ذلك تلك التي الذي الذين على إلى كان كانت
		ماذا متى أين كيف لماذا لكن أيضا جدا أيضاً جداً انا انت انتم اين الى ايضا ايضاً
		मेरा मेरी मेरे तुम्हारा तुम्हारी आपका आपकी क्या कहाँ कहां कब क्यों कैसे कौन
	`) {
		m[norm.NFC.String(w)] = true
	}
	for w := range recallWords {
		m[w] = true
	}
	return m
}()

// recallWords are the stop words that ask for a recollection: a message
// of them and a time ("discussed it yesterday") asks about that time, no
// small talk (timeRest).
var recallWords = stringSet(strings.Fields("ever regarding remind reminded mention mentioned talked discussed"))

// phatic are the words of a message that only greets, thanks or
// acknowledges ("thanks!", "ok, great", "hi there"): it asks nothing of
// memory, and searching its words would bring every turn that said them.
var phatic = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
		thanks thank thx ty you very much so lot hi hey hello there bye goodbye see later
		ok okay yeah yep yup nope sure cool great awesome perfect cheers
		lol haha got it that welcome np
		helpful appreciate appreciated sense makes please yes noted understood
		alright glad good wonderful amazing
	`) {
		m[w] = true
	}
	return m
}()

// Keywords extracts the search keywords of a message: words (runs of
// letters, digits and combining marks; anything else separates words) in
// lower case, without words of two characters or fewer or stop words,
// deduplicated in order of first use. Each word is put in Unicode NFKC, as
// the index is (migrations/041, 049), so that a word typed decomposed
// ("cafe\u0301", Hangul as Jamo) is the word stored composed, and one
// typed full width ("ＩＫＥＡ") or half width ("ｽﾀｰ") the word in its
// ordinary form. Words that differ by Latin accents alone ("café" and
// "cafe": foldWord, as the index folds them, migrations/058) are one
// keyword, the first spelling. A word
// holding CJK, Thai, Lao, Khmer or Myanmar text is split by BigramTokens
// first: its bigrams (or single units) are keywords whatever their length,
// except CJK function pieces (grammar: see cjkstop.go), and its other parts are words
// like any. When that leaves nothing it falls back to every word of the
// message. A message that only greets, thanks or acknowledges (every word
// phatic: "ok, great, thanks!") has none. Invalid UTF-8 separates words
// like punctuation. Words longer than store.MaxKeywordBytes are skipped;
// the result is never nil.
//
// At most store.MaxKeywords are returned. When a message has more, those
// of its questions (sentences ending in "?" or "？"; a "?" inside a link,
// right before a letter or digit, ends none) are kept first, then
// the others, in each group the later ones (by last use) first; the kept
// keywords are returned in order of first use. A chat message puts what it
// asks in its question or at its end, after any preamble: a long message
// would otherwise be searched for its preamble alone (a CJK character is
// one bigram, so 32 keywords are about 33 characters of Japanese).
func Keywords(message string) []string {
	out, _ := keywords(message)
	return out
}

// keywords is Keywords, and, when the cap left some of the message's
// words out, the set it chose from (else nil): the caller may leave out
// the words the user's language does not search (store.StopWords: the
// stop words of German, Spanish, ...; this list is English) and cap again
// (recap), so that a long message in another language keeps its subject.
func keywords(message string) ([]string, *keywordSet) {
	kws, over, _ := keywordsNamed(message, nil)
	return kws, over
}

// keywordsNamed is keywords, a word of named (lower-cased, shortNames of
// the text message is a part of) kept as shortName keeps it wherever it
// stands in message: timeRest's message less its time expression makes
// "Jo" of "Yesterday Jo called" its sentence's first word. found are
// message's own short names (shortNames of it, from the same pass).
func keywordsNamed(message string, named map[string]bool) (kws []string, over *keywordSet, found map[string]bool) {
	// Sentences are told apart in NFC (no copy when the message is NFC
	// already), where full-width "？" and "．" are still themselves: NFKC
	// would make "？２" a link's "?2". Each word is then put in NFKC.
	message = norm.NFC.String(message)
	vietnamese := strings.ContainsFunc(message, isVietnameseLetter)
	c := keywordSet{all: make([]keyword, 0, 16)}
	for word, how := range questionWords(message) {
		q := how.question
		if !norm.NFKC.IsNormalString(word) {
			word = strings.ToLower(norm.NFKC.String(word))
		}
		if how.named {
			if found == nil {
				found = map[string]bool{}
			}
			found[word] = true
		}
		if !hasUnspaced(word) {
			if len(word) <= store.MaxKeywordBytes {
				c.add(word, stopWord(word, vietnamese) && !how.named && !named[word], q)
			}
			continue
		}
		cjkPieces(word, func(p cjkPiece) bool {
			if len(p.tok) > store.MaxKeywordBytes {
				return true
			}
			stop := p.stop
			if !isBigramToken(p.tok) {
				stop = IsStopWord(p.tok)
			} else if stop {
				c.functionPiece = true
				r, _ := utf8.DecodeRuneInString(p.tok)
				c.seaFunction = c.seaFunction || kindOf(r) == seaRun
			}
			c.add(p.tok, stop, q || p.question)
			return true
		})
	}
	if len(c.all) < store.MaxKeywords && c.onlyPhatic() {
		return []string{}, nil, found
	}
	if c.kept == 0 && c.functionPiece {
		// Only function pieces of CJK or South-East Asian runs and stop
		// words: the words between spaces, but those that greet or thank,
		// if any ("AIについて教えて" searches "ai", not its grammar); else
		// nothing for South-East Asian grammar ("ขอบคุณครับ", "ok ครับ";
		// seastop.go, rule 3), and every piece for CJK's, as English falls
		// back to every word.
		out := []string{}
		for _, k := range c.all {
			if !isBigramToken(k.word) && !phatic[k.word] && len(out) < store.MaxKeywords {
				out = append(out, k.word)
			}
		}
		if len(out) > 0 || c.seaFunction {
			return out, nil, found
		}
	}
	if c.kept == 0 {
		return c.cap(false), nil, found
	}
	if c.kept > store.MaxKeywords {
		return c.cap(true), &c, found
	}
	return c.cap(true), nil, found
}

// candidates are the words the cap chooses from: those that are not stop
// words.
func (c *keywordSet) candidates() []string {
	out := make([]string, 0, c.kept)
	for _, k := range c.all {
		if !k.stop {
			out = append(out, k.word)
		}
	}
	return out
}

// recap caps the set again with the words of stops taken for stop words,
// as Keywords chooses; nil when nothing would be left (the caller keeps
// the first cap). It changes the set.
func (c *keywordSet) recap(stops map[string]bool) []string {
	kept := c.kept
	for i := range c.all {
		if k := &c.all[i]; !k.stop && stops[k.word] {
			k.stop = true
			kept--
		}
	}
	if kept == 0 {
		return nil
	}
	c.kept = kept
	return c.cap(true)
}

// keywordSet collects a message's distinct words in order of first use.
type keywordSet struct {
	all  []keyword
	at   map[string]int // index in all, once all is long enough for a map to pay
	kept int            // how many are not stop words
	seq  int
	// functionPiece: a CJK or South-East Asian function piece was seen;
	// seaFunction: a South-East Asian one.
	functionPiece, seaFunction bool
}

type keyword struct {
	word     string
	key      string // word folded (foldWord): what tells keywords apart
	stop     bool
	question bool // used in a question at least once
	last     int  // sequence number of its last use
}

// add adds a use of word. Words that fold alike (foldWord: "café" and
// "cafe") are one keyword, the first spelling, as the index holds them as
// one word.
func (c *keywordSet) add(word string, stop, question bool) {
	c.seq++
	key := foldWord(word)
	i := -1
	if c.at != nil {
		if j, ok := c.at[key]; ok {
			i = j
		}
	} else {
		i = slices.IndexFunc(c.all, func(k keyword) bool { return k.key == key })
	}
	if i >= 0 {
		k := &c.all[i]
		k.question = k.question || question
		k.last = c.seq
		if k.stop && !stop {
			// A CJK piece is grammar in one place and content in
			// another (はな after a kanji, then alone): content wins.
			k.stop = false
			c.kept++
		}
		return
	}
	c.all = append(c.all, keyword{word: word, key: key, stop: stop, question: question, last: c.seq})
	if !stop {
		c.kept++
	}
	switch {
	case c.at != nil:
		c.at[key] = len(c.all) - 1
	case len(c.all) > 2*store.MaxKeywords:
		c.at = make(map[string]int, 2*len(c.all))
		for j, k := range c.all {
			c.at[k.key] = j
		}
	}
}

// onlyPhatic reports whether the words greet, thank or acknowledge and say
// nothing else: one phatic word at least, and every other word a stop word
// ("thank you so much, this was really helpful!", "thanks, and what about
// the other one?") or of two characters or fewer ("ok", "it"; "that's"
// leaves "s"), none of them a bigram or a short word keepsShort keeps.
func (c *keywordSet) onlyPhatic() bool {
	greets := false
	good := goodPartOfDay(len(c.all), func(i int) string { return c.all[i].word })
	for _, k := range c.all {
		switch {
		case phatic[k.word] || (good && partsOfDay[k.word]): // "good morning"
			greets = greets || !weakPhatic[k.word]
		case isBigramToken(k.word) || keepsShort(k.word):
			return false
		case utf8.RuneCountInString(k.word) > 2 && !k.stop:
			return false
		}
	}
	return greets
}

// weakPhatic are phatic words that, beside stop words alone, do not make
// a message small talk ("can you tell me?", "so that one?"): one of the
// others must be there.
var weakPhatic = map[string]bool{"you": true, "very": true, "much": true, "so": true, "lot": true, "there": true,
	"see": true, "later": true, "got": true, "it": true, "that": true, "good": true, "makes": true}

// partsOfDay greet after "good".
var partsOfDay = map[string]bool{"morning": true, "afternoon": true, "evening": true, "night": true, "day": true}

// goodPartOfDay reports whether the n words (word(i) the i-th) hold
// "good" right before a part of the day, a greeting ("good morning"), so
// that "good" elsewhere ("good food, this morning?") greets nobody.
func goodPartOfDay(n int, word func(int) string) bool {
	for i := range n - 1 {
		if word(i) == "good" && partsOfDay[word(i+1)] {
			return true
		}
	}
	return false
}

// cap returns the words (without the stop words when kept), at most
// store.MaxKeywords of them, chosen as Keywords says.
func (c *keywordSet) cap(kept bool) []string {
	n := len(c.all)
	if kept {
		n = c.kept
	}
	if n <= store.MaxKeywords {
		out := make([]string, 0, n)
		for _, k := range c.all {
			if !kept || !k.stop {
				out = append(out, k.word)
			}
		}
		return out
	}
	ks := make([]keyword, 0, n)
	for _, k := range c.all {
		if !kept || !k.stop {
			ks = append(ks, k)
		}
	}
	// The words of questions first, then the others, each latest used
	// first: every word's last use is a distinct sequence number, so one
	// table by it orders them without a sort (linear in the message).
	byLast := make([]int32, c.seq+1)
	for i, k := range ks {
		byLast[k.last] = int32(i) + 1
	}
	chosen := make([]bool, len(ks))
	picked := 0
	for _, question := range [2]bool{true, false} {
		for seq := c.seq; seq > 0 && picked < store.MaxKeywords; seq-- {
			if i := byLast[seq] - 1; i >= 0 && ks[i].question == question {
				chosen[i] = true
				picked++
			}
		}
	}
	in := ks[:0]
	for i, k := range ks {
		if chosen[i] {
			in = append(in, k)
		}
	}
	ks = in
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.word
	}
	return out
}

// Words returns every word of text, lower-cased, in order, with repeats: the
// tokenisation Keywords uses (runs of letters, digits and combining marks),
// without its filtering. It is what the quality evaluation's baselines
// tokenise stored text with.
func Words(text string) []string {
	out := []string{}
	for w := range words(text) {
		out = append(out, w)
	}
	return out
}

// IsStopWord reports whether Keywords drops word (already lower-cased): a
// word of two characters or fewer (but see keepsShort), or a
// conversational stop word; never a bigram token (a bigram or single unit
// of BigramTokens).
func IsStopWord(word string) bool { return stopWord(word, false) }

// stopWord is IsStopWord for a word of a message that is Vietnamese or not
// (it holds one of isVietnameseLetter's letters): in a Vietnamese message
// a two-character word with any accent is kept too (má mum, bà grandma,
// cá fish), its function words aside.
func stopWord(word string, vietnamese bool) bool {
	if isBigramToken(word) {
		return false // a bigram or single unit of a run (see BigramTokens)
	}
	n := utf8.RuneCountInString(word)
	if n == 2 && (keepsShort(word) || (vietnamese && !isASCII(word))) {
		return shortStopWords[word]
	}
	return n <= 2 || stopWords[word]
}

// keepsShort reports whether a word of two characters is a word to search
// rather than a function word by its length: in the abjads (Arabic,
// Hebrew, Syriac, Thaana), which write few vowels, and the abugidas of
// India and Ethiopia and Tibetan, whose characters are syllables or vowel
// signs, a noun is often two characters (घर home, גר lives, حي
// neighbourhood); and in Vietnamese, whose words are syllables (bố dad, mẹ
// mum, vợ wife), told by its own letters (ă â đ ê ô ơ ư and the tone-marked
// vowels of Latin Extended Additional). Their common function words are
// shortStopWords.
func keepsShort(word string) bool {
	r, _ := utf8.DecodeRuneInString(word)
	if unicode.In(r, unicode.Arabic, unicode.Hebrew, unicode.Syriac, unicode.Thaana,
		unicode.Devanagari, unicode.Bengali, unicode.Gurmukhi, unicode.Gujarati, unicode.Oriya,
		unicode.Tamil, unicode.Telugu, unicode.Kannada, unicode.Malayalam, unicode.Sinhala,
		unicode.Ethiopic, unicode.Tibetan) {
		return true
	}
	return strings.ContainsFunc(word, isVietnameseLetter)
}

// isVietnameseLetter reports whether r is a letter only Vietnamese writes
// (among the languages of Latin script): ă â đ ê ô ơ ư and the tone-marked
// vowels of Latin Extended Additional, lower case. Keywords keeps the
// two-character words with accents of a message holding one (má, bà, cá,
// whose accents French and Spanish write too).
func isVietnameseLetter(r rune) bool {
	return strings.ContainsRune("ăâđêôơưĂÂĐÊÔƠƯ", r) || (r >= 0x1ea0 && r <= 0x1ef9)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// shortStopWords are the two-character function words of the words
// keepsShort keeps (prepositions, pronouns, conjunctions, the copula and
// particles): Arabic, Hebrew, Hindi and Vietnamese.
var shortStopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
		في من عن لا ما هو هي أن إن أو يا قد لم لن ثم كل بل مع أي إذ هل لي لك له ان او
		לא כי זה זו גם אם על עם יש מה מי אל או רק כן הם הן אז פה לי לך לו לה את
		है का की के को से ने पर और या तो भी ही जो वह यह कि हम ये वे सा सी से था थी थे ना
		đã để sẽ bị họ tớ đó ạ ơi ấy dạ về từ và là có mà nó vì gì nè
	`) {
		m[norm.NFC.String(w)] = true
	}
	return m
}()

// words yields the lower-cased words of s.
func words(s string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		wordSpans(s, func(start, end int) bool { return yield(strings.ToLower(s[start:end])) })
	}
}

// questionWords yields the lower-cased words of s, each with whether its
// sentence is a question: one whose end (the text after its last word)
// holds "？", or "?" not inside a link (sentenceEnd). A sentence also ends
// at "!", "！", "。", "．", a line break, a "." followed by a space, and
// the end of s. The words of a
// sentence are yielded once its end is known.
func questionWords(s string) func(yield func(string, wordUse) bool) {
	return func(yield func(string, wordUse) bool) {
		type sword struct {
			w     string
			named bool
		}
		sentence := make([]sword, 0, 16)
		shouts := inCapitals(s)
		flush := func(gap string, next byte, last bool) bool {
			ends, question := sentenceEnd(gap, next)
			if !ends && !last {
				return true
			}
			for _, w := range sentence {
				if !yield(w.w, wordUse{question: question, named: w.named}) {
					return false
				}
			}
			sentence = sentence[:0]
			return true
		}
		prev := 0
		ok := true
		// dotted is where the sentence's last word, s[dotted:prev], starts
		// when it is ASCII digits (or digits joined by dots so far), else
		// -1: a number is extended in place, as a substring of s, so that
		// a message of many dotted parts costs its length, not its square
		// (each part rescanning and copying the number so far took a 64 KiB
		// "1.1.1...." 10 s on the delivery goroutine every user's enrich
		// waits behind).
		dotted := -1
		wordSpans(s, func(start, end int) bool {
			// Numbers joined by single dots are one word: a version
			// ("0.51.0", "pgx 5.12.0"), an address, a decimal. Split, each
			// part was a short word the query left out, and nothing found
			// them; whole, the store searches it as a phrase of its parts.
			digits := asciiDigits(s[start:end])
			if n := len(sentence); n > 0 && dotted >= 0 && start == prev+1 && s[prev] == '.' && digits {
				sentence[n-1] = sword{w: s[dotted:end]}
				prev = end
				return true
			}
			if ok = flush(s[prev:start], s[start], false); !ok {
				return false
			}
			w := s[start:end]
			sentence = append(sentence, sword{strings.ToLower(w), shortName(w, len(sentence) == 0, shouts)})
			dotted = -1
			if digits {
				dotted = start
			}
			prev = end
			return true
		})
		if ok {
			flush(s[prev:], 0, true)
		}
	}
}

// wordUse is how a message uses a word (questionWords): in a question,
// and written as a name (shortName).
type wordUse struct {
	question, named bool
}

// shortName reports whether w, a word of a message as written, is a word
// of two ASCII characters written as a name or an acronym, so searched
// although two-character words are otherwise dropped: a letter and a digit
// ("5G", "3D", "S3", "v2"); two capitals ("AI", "UK", "JS", "CI") in a
// message that does not shout (inCapitals: in one all in capitals, "US" is
// any "us"); or a capital and a small letter after the
// first word of its sentence ("in Go", "with Jo": at a sentence's start
// "Go", "So", "We" are any word). Not those that are a title ("Dr", "Mr",
// "St"), a greeting or filler ("OK", "Hi", "Oh"), "AM"/"PM", or a stop word of
// Postgres' english configuration ("IT", "IN", "ME", ...), which the index
// does not hold: searching them would find nothing.
func shortName(w string, first, shouts bool) bool {
	if len(w) != 2 || !isASCIIAlnum(w[0]) || !isASCIIAlnum(w[1]) {
		return false
	}
	upper := func(c byte) bool { return c >= 'A' && c <= 'Z' }
	small := func(c byte) bool { return c >= 'a' && c <= 'z' }
	digit := func(c byte) bool { return c >= '0' && c <= '9' }
	switch {
	case digit(w[0]) != digit(w[1]): // a letter and a digit
	case upper(w[0]) && upper(w[1]) && !shouts:
	case upper(w[0]) && small(w[1]) && !first:
	default:
		return false
	}
	return !notShortNames[strings.ToLower(w)]
}

// notShortNames are the two-letter words shortName leaves dropped however
// written: titles, greetings and fillers, the time of day, and the
// two-letter stop words of Postgres' english configuration.
var notShortNames = stringSet(strings.Fields(`
	dr mr ms st jr sr mt ok hi oh ah uh um ty np ps am pm
	an as at be by do he if in is it me my no of on or so to up we
`))

// shortNames are the words of message that shortName keeps, lower-cased
// (nil when none): Keywords searches them, and the callers that take
// the stop words out of its keywords leave them in.
func shortNames(message string) map[string]bool {
	var out map[string]bool
	for w, how := range questionWords(message) {
		if how.named {
			if out == nil {
				out = map[string]bool{}
			}
			out[w] = true
		}
	}
	return out
}

// inCapitals reports whether s is written in capitals: it has no ASCII
// lower-case letter and a run of three ASCII capitals or more ("WHERE IS
// IT"; "AI?" and "UK or US?" are acronyms).
func inCapitals(s string) bool {
	run, long := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z':
			return false
		case c >= 'A' && c <= 'Z':
			run++
			long = long || run >= 3
		default:
			run = 0
		}
	}
	return long
}

// asciiDigits reports whether w is ASCII digits only.
func asciiDigits(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] < '0' || w[i] > '9' {
			return false
		}
	}
	return w != ""
}

// sentenceEnd reports whether gap, the text between two words or after
// the last, ends a sentence, and whether as a question; next is the first
// byte of the word after gap (0 after the last). An ASCII "?" right before
// an ASCII letter or digit is part of a link ("example.com/page?id=42"),
// not a question's end; before white space, at the end or before other
// text ("你叫什么名字?我忘了") it is one. The question marks of other
// scripts (full-width ？, Arabic ؟ as in Persian and Urdu, Ethiopic ፧)
// end a question, and their full stops (Devanagari ।, Urdu ۔, Ethiopic ።,
// Myanmar ။, Khmer ។, CJK 。) a sentence.
func sentenceEnd(gap string, next byte) (ends, question bool) {
	if gap == "" {
		return false, false
	}
	if strings.ContainsAny(gap, "？؟፧﹖⁇⁈⁉") {
		return true, true
	}
	if i := strings.IndexByte(gap, '?'); i >= 0 && !(i == len(gap)-1 && isASCIIAlnum(next)) {
		return true, true
	}
	if strings.ContainsAny(gap, "!！。．｡﹒﹗‼\n।॥۔።။។") {
		return true, false
	}
	i := strings.IndexByte(gap, '.')
	return i >= 0 && strings.ContainsAny(gap[i:], " \t"), false
}

// wordSpans calls yield with the byte span of each word of s (runs of
// letters, digits and combining marks; invalid UTF-8 separates), in order,
// until it returns false.
func wordSpans(s string, yield func(start, end int) bool) {
	start := -1
	for i := 0; i <= len(s); {
		var inWord bool
		size := 1
		switch {
		case i == len(s):
		case s[i] < utf8.RuneSelf: // ASCII: no decoding
			inWord = isASCIIAlnum(s[i])
		default:
			var r rune
			r, size = utf8.DecodeRuneInString(s[i:])
			// RuneError with size 1 is invalid UTF-8: a separator. A
			// literal U+FFFD (size 3) is not a letter either.
			inWord = r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r))
		}
		switch {
		case inWord && start < 0:
			start = i
		case !inWord && start >= 0:
			if !yield(start, i) {
				return
			}
			start = -1
		}
		if i == len(s) {
			break
		}
		i += size
	}
}

// isASCIIAlnum reports whether c is an ASCII letter or digit: the ASCII
// part of a word (wordSpans).
func isASCIIAlnum(c byte) bool {
	c2 := c | 0x20
	return (c2 >= 'a' && c2 <= 'z') || (c >= '0' && c <= '9')
}
