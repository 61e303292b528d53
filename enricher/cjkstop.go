package enricher

import (
	"strings"
	"unicode/utf8"
)

// CJK function pieces: the query side's equivalent of English stop words.
//
// A CJK run is searched as its character bigrams (see BigramTokens), and the
// bigrams of grammar (Japanese です ます ている, Korean 예요 습니다, Chinese
// 的 了 什么) occur in almost every item, so a question whose only overlap
// with an item was its grammar scored like a real match. Keywords therefore
// drops a query's CJK pieces made only of function material:
//
//  1. Each character of a query's CJK run is marked "function" when it is
//     part of function material there (cjkFunctionMask):
//     - a Chinese or Japanese function character (zhFunctionChars: 的 了
//     吗 我 你 这 那 什 么 哪 是 在 有 ...; 何 私 僕);
//     - a character of an occurrence of a listed function morpheme
//     (jaFunctionMorphemes: endings and auxiliaries such as です ますか
//     ています んで, particle pairs such as には のは から, question words
//     and pronouns such as どこ これ, and the equivalents of the English
//     stop words "tell", "remember", "know", "want"; zhFunctionMorphemes:
//     知道 可以 告诉 ...);
//     - a Japanese one-character case particle (は が を に で と も の へ)
//     right after a kanji, a katakana or a character marked by the two rules
//     above, or first after non-CJK text of the same word (Reactを): where
//     a particle attaches. At the start of a run or after an unmarked hiragana it is
//     not marked, so the all-hiragana content words ねこ かに もも keep
//     their characters;
//     - in a Hangul run that ends a word (Korean separates words with
//     spaces), the particles and endings stripped from the word's end
//     (koEndings: 가 는 를 에서 예요 습니다 ...; a one-syllable ending only
//     when two syllables stay before it, so 나이 and 고양이 keep theirs),
//     and the whole word when it, or what the stripping leaves, is a
//     function word (koFunctionWords: 제 뭐 어디 있어요 ...).
//  2. A bigram is a function piece when both its characters are marked, a
//     lone character when it is marked. A piece with one content character
//     (趣味, 味は, に住, 住ん, 취미) stays a keyword.
//
// The lists are small and deliberately conservative: a missing entry only
// leaves a grammar piece searched (as before), while a wrong one would
// hide content. The index is untouched (items still hold every bigram), so
// the lists can change without re-indexing.

// zhFunctionChars are Han characters that are function words on their own
// in Chinese (particles, pronouns, question words, the copula, common
// auxiliaries and adverbs), in simplified and traditional forms, plus the
// Japanese 何 (what) and 私 僕 (I).
var zhFunctionChars = runeSet(`
	的了吗呢吧啊呀么嘛什怎哪谁几
	我你您他她它们咱这那是在有没不也都就还很个些里样为给把被着过
	想要会能该请
	嗎麼們這個裡沒還會為給過樣該請誰幾
	何私僕
`)

// zhFunctionMorphemes are Chinese function words whose characters are not
// all function characters on their own.
var zhFunctionMorphemes = strings.Fields(`
	知道 记得 告诉 一下 一些 可以 还是 但是 因为 所以 如果 已经 觉得 其实 然后
	怎样 如何 为何 多少 是否
	記得 告訴 還是 因為 所以 已經 覺得 其實 然後 怎樣 為何
`)

// jaFunctionMorphemes are Japanese endings, auxiliaries, particle pairs,
// question words, pronouns, conjunctions and the verbs English lists as
// stop words (tell, remember, know, want), in hiragana as written after a
// stem.
var jaFunctionMorphemes = strings.Fields(`
	です ですか ですね ですよ でした でしょう でしょうか だった だろう だよ だね
	ます ますか ました ましたか ません ませんか ましょう
	った ったの かった っけ たっけ だっけ
	ている ています ていました ていた てる てた てます でいる でいます でいた
	んで んです のです なんです
	する した します しました しません している して しない しなかった したい たい たいです
	できる できます できました できません できた
	ある あった あります ありました ありません いる います いました いません ない なかった
	なる なった なります なりました
	ください くれる くれます もらう
	には では とは にも でも での への との から まで より だけ しか など とか
	ので のに のは のが のを のも けど けれど けれども って という といった
	かな よね かしら
	について ところで ちなみに そういえば それで そして でも また もう とても ちょっと
	どこ どう どの どんな どれ なに なん いつ だれ いくつ いくら
	これ それ あれ この その あの ここ そこ あそこ
	わたし あたし ぼく おれ あなた
	教えて 覚えて 覚えてい 知って 知ってい 思い出 お願い
`)

// jaParticles are the Japanese one-character case particles (rule 1).
var jaParticles = runeSet("はがをにでとものへ")

// koEndings are Korean particles and verb endings, stripped from a word's
// end (rule 1); 워요 봐요 ... are the polite ending fused with the stem's
// last vowel (배우 + 어요 = 배워요).
var koEndings = strings.Fields(`
	이 가 은 는 을 를 에 의 도 로 와 과 요 랑 만
	에서 에게 한테 으로 이랑 하고 까지 부터 보다 처럼 께서 이나
	예요 이에요 에요 이야 이지 인가 인가요 인데 인데요 이다 입니다 입니까
	어요 아요 해요 했어요 였어요 었어요 았어요 세요 으세요 셨어요
	워요 와요 봐요 줘요 져요 쳐요 려요 혀요 겨요 돼요 셔요 했다 했어
	습니다 습니까 니다 니까 나요 까요 죠 지요 는데 는데요 을까 을까요 ㄹ까요 던 었던 았던
`)

// koFunctionWords are Korean pronouns, question words, adverbs and forms
// of 있다 없다 하다 이다 (rule 1: whole words, or what stripping koEndings
// leaves).
var koFunctionWords = strings.Fields(`
	제 저 내 나 너 우리 저희 제가 내가 저는 나는 우리는 그 이 저
	뭐 뭘 무엇 무슨 어디 언제 누구 누가 왜 어떻게 어떤 얼마 얼마나 몇
	이거 그거 저거 이것 그것 저것 것 거
	좀 더 잘 또 꼭 그냥 정말 진짜 너무 아주 혹시 그리고 그런데 근데 그래서 하지만
	있 없 하 했 되
	있어 있어요 있나요 있습니다 있습니까 있었어요 없어 없어요 없습니다
	해요 했어요 합니다 했습니다 하나요 할까요 하는 하고 한 할
	알아요 알려 알려줘 알려주세요 기억 기억해 기억나요 기억하나요
`)

// morphemeTable indexes morphemes by their first character, longest first
// for each.
type morphemeTable map[rune][][]rune

func newMorphemeTable(lists ...[]string) morphemeTable {
	t := morphemeTable{}
	for _, l := range lists {
		for _, m := range l {
			r, _ := utf8.DecodeRuneInString(m)
			t[r] = append(t[r], []rune(m))
		}
	}
	return t
}

// cjkLists are the lists that mark a CJK run's function characters
// (cjkFunctionMask): Han characters, morphemes, and Korean words.
type cjkLists struct {
	chars     map[rune]bool
	morphemes morphemeTable
	koWords   map[string]bool
	// leadingParticle marks a Japanese particle that starts a run: in
	// what is left of a message once a time expression is cut out of it,
	// the particle was the expression's (昨日は何を → は何を).
	leadingParticle bool
}

// functionLists are those of the top of this file, which Keywords applies.
var functionLists = &cjkLists{chars: zhFunctionChars,
	morphemes: newMorphemeTable(jaFunctionMorphemes, zhFunctionMorphemes), koWords: koFunctionSet}

var (
	koEndingSet   = stringSet(koEndings)
	koFunctionSet = stringSet(koFunctionWords)
	// koMaxEnding is the longest ending in runes.
	koMaxEnding = func() int {
		n := 0
		for _, e := range koEndings {
			n = max(n, utf8.RuneCountInString(e))
		}
		return n
	}()
)

func runeSet(s string) map[rune]bool {
	m := map[rune]bool{}
	for _, r := range s {
		if r > ' ' {
			m[r] = true
		}
	}
	return m
}

func stringSet(l []string) map[string]bool {
	m := make(map[string]bool, len(l))
	for _, s := range l {
		m[s] = true
	}
	return m
}

func isHiragana(r rune) bool { return r >= 0x3041 && r <= 0x309f }

func isKatakana(r rune) bool {
	return (r >= 0x30a1 && r <= 0x30ff) || (r >= 0x31f0 && r <= 0x31ff) || (r >= 0xff66 && r <= 0xff9f)
}

func isHangul(r rune) bool {
	return (r >= 0x1100 && r <= 0x11ff) || (r >= 0x3131 && r <= 0x318e) || (r >= 0xa960 && r <= 0xa97f) ||
		(r >= 0xac00 && r <= 0xd7ff) || (r >= 0xffa0 && r <= 0xffdc)
}

// isHan reports whether r is a CJK character that is neither kana nor
// Hangul: an ideograph or an iteration mark.
func isHan(r rune) bool { return isCJK(r) && !isHiragana(r) && !isKatakana(r) && !isHangul(r) }

// cjkPiece is a token of a query word and whether it is a function piece.
type cjkPiece struct {
	tok  string
	stop bool
	// question: the piece is of a South-East Asian run holding a question
	// word (seastop.go), which writes no "?".
	question bool
}

// cjkPieces splits a word as Keywords searches it and says which pieces
// are function pieces: CJK runs as BigramTokens does (see the top of this
// file), South-East Asian runs by seaPieces (seastop.go); other parts are
// never function pieces here (Keywords applies the stop words to spaced
// text).
func cjkPieces(word string, yield func(cjkPiece) bool) bool {
	return cjkPiecesBy(word, functionLists, yield)
}

// cjkPiecesBy is cjkPieces, marking function material by lists.
func cjkPiecesBy(word string, lists *cjkLists, yield func(cjkPiece) bool) bool {
	var run []rune
	return segments(word, func(s segment) bool {
		if s.kind == seaRun {
			return seaPieces(s.units, yield)
		}
		if s.kind != cjkRun {
			for _, tok := range appendBigrams(nil, s) {
				if !yield(cjkPiece{tok: tok}) {
					return false
				}
			}
			return true
		}
		run = run[:0]
		for _, u := range s.units {
			r, _ := utf8.DecodeRuneInString(u)
			run = append(run, r)
		}
		mask := cjkFunctionMask(run, s.start > 0, s.end < len(word), lists)
		if len(run) == 1 {
			return yield(cjkPiece{tok: string(run), stop: mask[0]})
		}
		for i := 0; i+1 < len(run); i++ {
			if !yield(cjkPiece{tok: string(run[i : i+2]), stop: mask[i] && mask[i+1]}) {
				return false
			}
		}
		return true
	})
}

// cjkFunctionMask marks the function characters of a CJK run (rule 1 at
// the top of this file). textBefore and textAfter say whether non-CJK text
// precedes or follows the run in the same word; lists say what is
// function material.
func cjkFunctionMask(run []rune, textBefore, textAfter bool, lists *cjkLists) []bool {
	mask := make([]bool, len(run))
	for i, r := range run {
		if lists.chars[r] {
			mask[i] = true
		}
		for _, m := range lists.morphemes[r] {
			if len(m) <= len(run)-i && equalRunes(run[i:i+len(m)], m) {
				for j := range m {
					mask[i+j] = true
				}
			}
		}
	}
	// Particles: after a kanji, a katakana or function material marked
	// above (not after a particle marked here, so もも stays content).
	lexical := append([]bool(nil), mask...)
	for i, r := range run {
		if !jaParticles[r] || mask[i] {
			continue
		}
		switch {
		case i == 0:
			mask[i] = textBefore || lists.leadingParticle // after a Latin word: Reactを
		default:
			p := run[i-1]
			mask[i] = isHan(p) || isKatakana(p) || lexical[i-1]
		}
	}
	if !textAfter && isHangul(run[len(run)-1]) {
		markKoreanEndings(run, textBefore, mask, lists.koWords)
	}
	return mask
}

// markKoreanEndings marks the endings stripped from the end of a Hangul run
// that ends its word, and the whole run when it, or what is left, is a
// function word (in words).
func markKoreanEndings(run []rune, textBefore bool, mask []bool, words map[string]bool) {
	if words[string(run)] {
		for i := range mask {
			mask[i] = true
		}
		return
	}
	end := len(run)
	for end > 0 {
		stripped := false
		for n := min(koMaxEnding, end); n >= 1; n-- {
			left := end - n
			// A one-syllable ending needs two syllables of stem before it
			// (나이, 고양이 keep their last syllable), a longer one one
			// syllable, or a non-Hangul stem (Java를).
			need := 1
			if n == 1 {
				need = 2
			}
			if (left < need && !(left == 0 && textBefore)) || !koEndingSet[string(run[left:end])] {
				continue
			}
			for i := left; i < end; i++ {
				mask[i] = true
			}
			end, stripped = left, true
			break
		}
		if !stripped {
			break
		}
	}
	if end > 0 && end < len(run) && words[string(run[:end])] {
		for i := range end {
			mask[i] = true
		}
	}
}

func equalRunes(a, b []rune) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
