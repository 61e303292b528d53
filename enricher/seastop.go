package enricher

import (
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// The query side of the South-East Asian scripts (Thai, Lao, Khmer,
// Myanmar): how Keywords searches a run of them.
//
// A run is indexed as bigrams of units (a letter and its marks; see
// BigramTokens), and a message's run is usually a whole clause: every
// bigram of it ORed made almost any two items of a user share a few
// bigrams by chance, across word boundaries and in the particles of every
// polite sentence (ครับ, ค่ะ), and such chance matches added up to scores
// of 0.4 to 0.9 for questions unrelated to the item. So, unlike a CJK run:
//
//  1. A run of three units or more is searched by its trigrams of units,
//     each a keyword: the store parses one as the phrase of its two
//     bigrams, so an item matches only where three units of the message
//     stand together in it (a word or most of one), while ranking still
//     weighs the bigrams an item holds. A run of two units is its bigram,
//     one unit itself.
//  2. Function material is marked as for CJK (seaFunctionWords: particles,
//     pronouns, question words, auxiliaries and the commonest verbs of
//     talk, per language), wherever an occurrence of a listed word aligns
//     with the run's units; a trigram (bigram, unit) all of whose units are
//     marked is a function piece, dropped like a stop word.
//  3. A message whose runs hold only function material and which has no
//     other keyword ("ขอบคุณครับ", "thank you"; "โอเคครับ") has no keywords,
//     as an English thanks has none, rather than falling back to all its
//     pieces; when it also has words between spaces that only their length
//     or the stop words left out (not greetings or thanks), those are
//     searched (Keywords).
//  4. A run holding a question word (seaQuestionWords) is a question, for
//     the keywords a long message keeps, as a sentence ending in "?" is.
//
// Measured in TestThaiQuestions; what this costs (a two-unit word inside
// a longer run is found only with a unit beside it) is in
// docs/protocol.md, "Languages".

// seaFunctionWords are listed per language; a word is split into units as
// a run is. Verbs a question is about (อยู่ live, ไป go, มา come) are not
// listed, as English lists "have" and "be" but not "live" or "go".
var seaFunctionWords = strings.Fields(`
	ครับ ครับผม คับ ค่ะ คะ ค่า จ้ะ จ้า นะ น่ะ นะคะ นะครับ ไหม มั้ย หรือ หรอ เหรอ หรือเปล่า รึเปล่า
	บ้าง หน่อย ด้วย เลย แล้ว ก็ จะ ได้ ไม่ ที่ ของ และ กับ ใน จาก ให้ มี เป็น คือ ว่า
	นี้ นั้น นี่ นั่น ผม ฉัน ดิฉัน เรา คุณ เขา เธอ มัน พวก อะไร ใคร ที่ไหน ไหน เมื่อไหร่ เมื่อไร
	ยังไง อย่างไร ทำไม กี่ เท่าไหร่ เท่าไร ช่วย ขอ ยัง เคย กำลัง แต่ เพราะ ถ้า เพื่อ โดย ตอนนี้
	บอก จำ รู้ ขอบคุณ ขอบใจ โอเค สวัสดี มาก ๆ ต้อง ควร อยาก คง อาจ จึง ถึง แค่ กัน
	ຂ້ອຍ ເຈົ້າ ແມ່ນ ບໍ່ ບໍ ໃຫ້ ແລະ ກັບ ໃນ ຈາກ ມີ ເປັນ ໄດ້ ຈະ ແລ້ວ ນີ້ ນັ້ນ ຫຍັງ ໃຜ
	ເດີ ເນາະ ແດ່ ຂອບໃຈ ສະບາຍດີ ຫຼາຍ ໆ ຕ້ອງ ຢາກ
	ខ្ញុំ អ្នក គាត់ យើង បាទ ចាស ទេ ហើយ និង ជាមួយ ក្នុង ពី មាន ជា គឺ បាន នឹង នេះ នោះ
	អ្វី អរគុណ សួស្តី ត្រូវ ចង់
	ကျွန်တော် ကျွန်မ ငါ သူ ခင်ဗျား ရှင် ပါ တယ် မယ် သလဲ လဲ လား နဲ့ မှာ ကို ရဲ့ ပြီး ဘာ ဘယ်
	ကျေးဇူးတင်ပါတယ် ကျေးဇူး မင်္ဂလာပါ ချင် ရမယ်
`)

// seaFunctionTable indexes the function words by their first unit, as
// lists of units, longest first.
var seaFunctionTable = unitTable(seaFunctionWords)

// unitTable indexes words by their first unit, as lists of units (a word
// split as a run is), longest first.
func unitTable(words []string) map[string][][]string {
	t := map[string][][]string{}
	for _, w := range words {
		// In NFKC, as Keywords splits the message: Thai ำ is ํ + า there.
		w = norm.NFKC.String(w)
		var units []string
		segments(w, func(s segment) bool {
			if s.kind == seaRun {
				units = append(units, s.units...)
			}
			return true
		})
		if len(units) == 0 {
			continue
		}
		t[units[0]] = append(t[units[0]], units)
	}
	for _, l := range t {
		// Longest first, so that ครับผม is marked whole before ครับ.
		slices.SortStableFunc(l, func(a, b []string) int { return len(b) - len(a) })
	}
	return t
}

// seaFunctionMask marks the units of a run covered by an occurrence of a
// function word aligned with the units.
func seaFunctionMask(units []string) []bool { return markUnits(units, seaFunctionTable) }

// markUnits marks the units of a run covered by an occurrence of a word of
// table aligned with the units.
func markUnits(units []string, table map[string][][]string) []bool {
	mask := make([]bool, len(units))
	for i := range units {
		for _, w := range table[units[i]] {
			if i+len(w) > len(units) || !slices.Equal(units[i:i+len(w)], w) {
				continue
			}
			for j := i; j < i+len(w); j++ {
				mask[j] = true
			}
			break
		}
	}
	return mask
}

// seaQuestionWords are the question words and particles of the four
// languages: a run holding one is a question, as a sentence ending in "?"
// is (these languages rarely write one), so that its pieces are kept first
// when a long message has more than store.MaxKeywords.
var seaQuestionWords = strings.Fields(`
	ไหม มั้ย อะไร ที่ไหน ไหน เมื่อไหร่ เมื่อไร ยังไง อย่างไร ทำไม กี่ ใคร หรือเปล่า รึเปล่า เท่าไหร่ เท่าไร บ้าง
	ບໍ ຫຍັງ ໃສ ໃຜ ແນວໃດ ເປັນຫຍັງ ເທົ່າໃດ
	អ្វី ណា នរណា ប៉ុន្មាន ហេតុអ្វី
	လား လဲ ဘာ ဘယ် ဘယ်လောက်
`)

var seaQuestionTable = unitTable(seaQuestionWords)

// seaPieces yields a South-East Asian run's query pieces (rule 1 at the top
// of this file), whether each is a function piece (rule 2), and whether the
// run asks (seaQuestionWords).
func seaPieces(units []string, yield func(cjkPiece) bool) bool {
	mask := seaFunctionMask(units)
	question := slices.Contains(markUnits(units, seaQuestionTable), true)
	n := min(3, len(units))
	for i := 0; i+n <= len(units); i++ {
		stop := true
		for j := i; j < i+n; j++ {
			stop = stop && mask[j]
		}
		// A unit of marks alone (a stray mark) is no word: Postgres'
		// parser drops it, so it would search nothing.
		if n == 1 {
			r, _ := utf8.DecodeRuneInString(units[i])
			stop = stop || isSEAMark(r)
		}
		if !yield(cjkPiece{tok: strings.Join(units[i:i+n], ""), stop: stop, question: question}) {
			return false
		}
	}
	return true
}
