package enricher

import (
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Time expressions in Chinese, Japanese and Korean. They are read for every
// user, whatever the user's language, as CJK text is searched for every
// user (docs/protocol.md, "Languages"): the script tells the words apart
// from English ones, and the readings are the same in each of the three
// languages that writes them. The ranges are those of the English
// expressions with the same meaning (ParseTime's doc).
//
// Words are matched as written; full-width digits are digits. A Han or
// kana expression may start anywhere a character does, as these languages
// do not space words, but not inside a number or a word that holds it
// (refusedPhrase: 之前天气, べんきょう), and "N units ago" not after another
// word, whose time it then is (agoFollows: 会議の3日前, 試験1週間前); a
// Hangul one only at a word's start, followed by the word's end or a
// particle (어제는, 작년에; not 오늘날, nowadays).

// cjkSpan is what a CJK expression means: a range, or a calendar unit
// relative to at's.
type cjkSpan struct {
	// unit and back: the calendar unit back units before at's (back 0:
	// at's own), when part is nil.
	unit timeUnit
	back int
	// part, when set, is the range of a part of a day, given at.
	part func(at time.Time) (time.Time, time.Time)
}

// cjkPartsOfDay are the parts of a day (hours from the day's midnight):
// morning 00–12, afternoon 12–18, evening 18–24, night 18 to 06 the next
// day, as in English.
var cjkPartsOfDay = []struct {
	words    []string
	from, to int
}{
	{strings.Fields("朝 午前 早上 上午 早晨 아침 오전"), 0, 12},
	{strings.Fields("午後 下午 오후"), 12, 18},
	{strings.Fields("夕方 晩 傍晚 晚上 夜晚 저녁"), 18, 24},
	{strings.Fields("夜 夜里 夜裡 밤"), 18, 30},
}

// cjkDays are the words of a day before at's (back days before): today,
// yesterday, the day before yesterday, and the day before that (大前天,
// さきおととい: three days back, not the day before yesterday).
var cjkDays = []struct {
	words []string
	back  int
}{
	{strings.Fields("今日 きょう 今天 오늘"), 0},
	{strings.Fields("昨日 きのう 昨天 어제 어저께"), 1},
	{strings.Fields("一昨日 おととい おとつい 前天 그저께 그제"), 2},
	{strings.Fields("大前天 一昨々日 さきおととい"), 3},
}

// cjkUnits are the words of a calendar unit back units before at's: this
// and last week, month, year, and the one before last. 前年 is left out:
// the year before last in Chinese, the previous one of something else in
// Japanese; and 上月 (last month): 上月球 is to go to the moon.
var cjkUnits = []struct {
	words []string
	unit  timeUnit
	back  int
}{
	{strings.Fields("今週 这周 這週 这个星期 這個星期 这星期 這星期 本周 本週 这礼拜 這禮拜 这个礼拜 這個禮拜 이번주 금주"), unitWeek, 0},
	{strings.Fields("先週 上周 上週 上个星期 上個星期 上星期 上礼拜 上禮拜 上个礼拜 上個禮拜 지난주 저번주"), unitWeek, 1},
	{strings.Fields("先々週 先先週 上上周 上上週 上上个星期 上上個星期 上上星期 지지난주"), unitWeek, 2},
	{strings.Fields("今月 这个月 這個月 本月 이번달"), unitMonth, 0},
	{strings.Fields("先月 上个月 上個月 지난달 저번달"), unitMonth, 1},
	{strings.Fields("先々月 先先月 上上个月 上上個月 지지난달"), unitMonth, 2},
	{strings.Fields("今年 올해 금년"), unitYear, 0},
	{strings.Fields("去年 昨年 작년 지난해"), unitYear, 1},
	{strings.Fields("一昨年 おととし 재작년"), unitYear, 2},
}

// cjkWeekends are the words of this week's weekend (back 0) and last
// week's (back 1).
var cjkWeekends = []struct {
	words []string
	back  int
}{
	{strings.Fields("今週末 这周末 這週末 本周末 本週末 这个周末 這個週末 이번주말"), 0},
	{strings.Fields("先週末 上周末 上週末 上个周末 上個週末 지난주말 저번주말"), 1},
}

// cjkPhrase is a fixed expression and what it means.
type cjkPhrase struct {
	text string
	span cjkSpan
	// week: the phrase is this or last week, which a weekday may follow
	// (先週の月曜日, 上周一, 지난주 월요일).
	week bool
}

// cjkPhrases are the fixed expressions by their first rune, longest first,
// each Korean one also with a space between its words (지난 주, 이번 달).
var cjkPhrases = func() map[rune][]cjkPhrase {
	var all []cjkPhrase
	add := func(text string, sp cjkSpan, week bool) {
		all = append(all, cjkPhrase{text: text, span: sp, week: week})
		if spaced := koSpaced(text); spaced != text {
			all = append(all, cjkPhrase{text: spaced, span: sp, week: week})
		}
	}
	for _, d := range cjkDays {
		back := d.back
		for _, w := range d.words {
			add(w, cjkSpan{unit: unitDay, back: back}, false)
			for _, p := range cjkPartsOfDay {
				part := partSpan(back, [2]int{p.from, p.to})
				for _, pw := range p.words {
					// 昨日の夜, 昨天晚上, 어제 저녁.
					for _, join := range []string{"", "の", " "} {
						add(w+join+pw, part, false)
					}
				}
			}
		}
	}
	for _, w := range strings.Fields("今朝 今早") {
		add(w, partSpan(0, partMorning), false)
	}
	for _, w := range strings.Fields("昨夜 昨晩 ゆうべ 昨晚 어젯밤") {
		add(w, partSpan(1, partNight), false)
	}
	for _, w := range strings.Fields("今夜 今晩 今晚") {
		add(w, partSpan(0, partEvening), false)
	}
	for _, u := range cjkUnits {
		for _, w := range u.words {
			add(w, cjkSpan{unit: u.unit, back: u.back}, u.unit == unitWeek && u.back < 2)
		}
	}
	for _, we := range cjkWeekends {
		for _, w := range we.words {
			add(w, weekendSpan(we.back), false)
		}
	}
	// 前几天, 前两天, 前些天: a few days ago.
	for _, w := range strings.Fields("前几天 前幾天 前两天 前兩天 前些天") {
		add(w, cjkSpan{part: func(at time.Time) (time.Time, time.Time) {
			start := unitStart(at, unitDay)
			return addUnits(start, unitDay, -fewUnits[unitDay]), addUnits(start, unitDay, -1)
		}}, false)
	}
	out := map[rune][]cjkPhrase{}
	for _, p := range all {
		r, _ := utf8.DecodeRuneInString(p.text)
		out[r] = append(out[r], p)
	}
	for _, ps := range out {
		slices.SortStableFunc(ps, func(a, b cjkPhrase) int { return len(b.text) - len(a.text) })
	}
	return out
}()

// koSpaced puts a space where Korean spaces the words of a listed
// expression (지난주 is also written 지난 주).
func koSpaced(w string) string {
	for _, p := range []string{"지지난", "지난", "저번", "이번"} {
		if rest, ok := strings.CutPrefix(w, p); ok && rest != "" && (p == "지난" || !strings.HasPrefix(rest, "해")) {
			return p + " " + rest
		}
	}
	if rest, ok := strings.CutPrefix(w, "오늘"); ok && rest != "" {
		return "오늘 " + strings.TrimPrefix(rest, " ")
	}
	return w
}

// koParticles may follow a Korean time word in its word (어제는, 작년에).
var koParticles = stringSet(strings.Fields(`
	은 는 이 가 을 를 에 의 도 만 부터 까지 동안 내내 쯤 엔 에는 에도 에서 이나 나 처럼 보다 과 와 이랑 랑 하고 에만
`))

// cjkFutureWords make a month or a date without its year, in the same
// sentence, a plan rather than the last such month ("5月に旅行する予定").
// Korean ones are phrases: 할 거 (will do), not 할 (in 할머니) and 거
// (in 말한 거, what was said) alone.
var cjkFutureWords = append(strings.Fields(`
	予定 つもり 来週 来月 来年 明日 あした ましょう
	打算 计划 計劃 准备 準備 将要 將要 明天 下周 下週 下个月 下個月 明年
	しよう 行こう
	예정 계획 내일 다음 내년 려고 할까 갈까 할래 갈래 하자 가자
`), "할 거", "갈 거", "할게", "갈게")

// cjkAgoUnits are the units "N units ago" counts (with its number before
// and 前 or 전 after), by the words written.
var cjkAgoUnits = func() map[string]any {
	m := map[string]any{}
	for _, w := range strings.Fields("日 天 일") {
		m[w] = unitDay
	}
	for _, w := range strings.Fields("週間 週 周 个星期 個星期 星期 个礼拜 個禮拜 礼拜 禮拜 주 주일") {
		m[w] = unitWeek
	}
	for _, w := range strings.Fields("か月 ヶ月 カ月 ケ月 ヵ月 箇月 个月 個月 개월 달") {
		m[w] = unitMonth
	}
	for _, w := range strings.Fields("年 년 해") {
		m[w] = unitYear
	}
	for _, w := range strings.Fields("時間 小时 小時 个小时 個小時 钟头 鐘頭 个钟头 個鐘頭 시간") {
		m[w] = time.Hour
	}
	for _, w := range strings.Fields("分 分钟 分鐘 분") {
		m[w] = time.Minute
	}
	return m
}()

// cjkAgoUnitWords are cjkAgoUnits' words, longest first.
var cjkAgoUnitWords = func() []string {
	var ws []string
	for w := range cjkAgoUnits {
		ws = append(ws, w)
	}
	slices.SortFunc(ws, func(a, b string) int {
		if d := len(b) - len(a); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return ws
}()

// cjkAgoWords say "ago": 前, 以前, 之前 (Chinese), 전 (Korean, also after
// a space).
var cjkAgoWords = strings.Fields("以前 之前 前 전")

// koNativeCounts are Korean native numbers as counted days and months
// (하루 전, a day ago; 두 달 전, two months ago); 며칠 is a few days.
var koNativeCounts = []struct {
	word string
	n    int
}{{"하루", 1}, {"이틀", 2}, {"사흘", 3}, {"나흘", 4}, {"한", 1}, {"두", 2}, {"세", 3}, {"네", 4},
	{"다섯", 5}, {"여섯", 6}, {"일곱", 7}, {"여덟", 8}, {"아홉", 9}, {"열", 10}, {"일주일", 1}}

// cjkFew are the words for "a few": 数 (Japanese), 几 幾 (Chinese), 몇
// (Korean).
var cjkFew = strings.Fields("数 几 幾 몇")

// cjkDigits are the Han numerals' values.
var cjkDigits = map[rune]int{'〇': 0, '零': 0, '一': 1, '二': 2, '两': 2, '兩': 2, '三': 3, '四': 4, '五': 5,
	'六': 6, '七': 7, '八': 8, '九': 9}

// jaWeekdays, zhWeekdays and koWeekdays are the characters of the
// weekdays, Monday first:
// Japanese 月曜日 ... 日曜日 (the first character), Chinese 星期一 ...
// 星期日 and 星期天 (the last), Korean 월요일 ... 일요일 (the first).
var (
	jaWeekdays = []rune("月火水木金土日")
	zhWeekdays = []rune("一二三四五六日")
	koWeekdays = []rune("월화수목금토일")
)

// cjkTime finds the first Chinese, Japanese or Korean time expression of
// message and resolves it against at, as ParseTime does for English.
func cjkTime(message string, at time.Time) (TimeExpr, bool) {
	if !strings.ContainsFunc(message, isCJK) {
		return TimeExpr{}, false
	}
	prev := rune(0)
	for i, r := range message {
		if (cjkFirst[r] || isDigitNFKC(r)) && cjkBoundary(prev, r) {
			if e, ok := cjkExprAt(message, i, prev, at); ok {
				// A zero range: an expression of what is to come, which
				// makes the message no question about a past time.
				return e, !e.Until.IsZero()
			}
		}
		prev = r
	}
	return TimeExpr{}, false
}

// cjkFirst are the runes a CJK expression may start with, besides digits.
var cjkFirst = func() map[rune]bool {
	m := map[rune]bool{'十': true, '百': true}
	for r := range cjkPhrases {
		m[r] = true
	}
	for r := range cjkDigits {
		m[r] = true
	}
	first := []string{"며칠"}
	first = append(first, cjkFew...)
	for _, y := range cjkYears {
		first = append(first, y.word)
	}
	for _, c := range koNativeCounts {
		first = append(first, c.word)
	}
	for _, w := range first {
		r, _ := utf8.DecodeRuneInString(w)
		m[r] = true
	}
	return m
}()

// agoWords may stand right before "N units ago" in Chinese or Japanese
// (大概三天前, 好几天前, ちょうど1週間前, 今から3時間前), besides a particle or a
// function character.
var agoWords = strings.Fields(`
	ちょうど だいたい およそ ほんの 約 大体 から 大概 大约 大約 约 刚好 剛好 正好 差不多 已经 已經 才 仅 僅 只 好
`)

// agoFollows reports whether "N units ago" may follow before (the
// message up to it, whose last rune is prev) and mean ago: after
// nothing, a space or punctuation, a Japanese particle other than の, a
// Chinese function character other than 的 (我三天前), an agoWords word,
// or Hangul (Korean spaces its words). After another word it is that
// thing's time (試験1週間前, 寝る3時間前, 会議の3日前: before the exam,
// going to bed, the meeting).
func agoFollows(before string, prev rune) bool {
	switch {
	case prev == 'の' || prev == '的':
		return false
	case prev == ' ':
		return koAgoFollows(before)
	case !isHan(prev) && !isHiragana(prev) && !isKatakana(prev):
		return true
	case strings.ContainsRune(jaParticleChars, prev) || zhFunctionChars[prev]:
		return true
	}
	return slices.ContainsFunc(agoWords, func(w string) bool { return strings.HasSuffix(before, w) })
}

// koAgoAfter are Korean words that may stand before "N units ago" without
// a particle: pronouns and adverbs of measure (약 3일 전, 벌써 2년 전).
var koAgoAfter = stringSet(strings.Fields(`
	나 너 저 제 내 우리 저희 그 그녀 약 대략 벌써 이미 정확히 딱 바로 겨우 불과 거의 한 지금 오늘 어제 작년 올해
`))

// koAgoFollows reports, for Korean, whether "N units ago" after before
// (ending in a space) means ago: after no word, or a word that is not
// Hangul, ends in a particle or an ending (나는 3일 전에), is a function
// word or one of koAgoAfter. After a bare noun it is that thing's time
// (시험 1주 전, a week before the exam).
func koAgoFollows(before string) bool {
	// The last word alone: splitting all of before at each number of a
	// long message made ParseTime quadratic (3.9 s for 64 KiB of 하루
	// 이틀 사흘).
	field := strings.TrimRightFunc(before, unicode.IsSpace)
	if field == "" {
		return true
	}
	if i := strings.LastIndexFunc(field, unicode.IsSpace); i >= 0 {
		_, n := utf8.DecodeRuneInString(field[i:])
		field = field[i+n:]
	}
	w := strings.TrimRightFunc(field, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	if w != field || w == "" {
		return true // punctuation ends it: 그런데, 3일 전에
	}
	last, _ := utf8.DecodeLastRuneInString(w)
	if !isHangul(last) || koAgoAfter[w] || koFunctionSet[w] {
		return true
	}
	for n := 1; n <= koMaxEnding && n < utf8.RuneCountInString(w); n++ {
		runes := []rune(w)
		if tail := string(runes[len(runes)-n:]); koParticles[tail] || koEndingSet[tail] {
			return true
		}
	}
	return false
}

// cjkBoundary reports whether an expression may start at r after prev:
// not inside a number, and, for Hangul, at a word's start.
func cjkBoundary(prev, r rune) bool {
	switch {
	case isDigitNFKC(prev) && isDigitNFKC(r), cjkNumeral(prev) && cjkNumeral(r):
		return false
	case (isDigitNFKC(prev) || cjkNumeral(prev)) && slices.Contains(cjkFew, string(r)):
		// 十几天前, 十数日前: ten and some days, not a few.
		return false
	case isHangul(r):
		return !unicode.IsLetter(prev) && !unicode.IsDigit(prev)
	}
	return true
}

func isDigitNFKC(r rune) bool { return (r >= '0' && r <= '9') || (r >= '０' && r <= '９') }

func cjkNumeral(r rune) bool { _, ok := cjkDigits[r]; return ok || r == '十' || r == '百' }

// cjkExprAt reads an expression starting at message[i:], after the rune
// prev; one of what is to come is read as a zero TimeExpr.
func cjkExprAt(message string, i int, prev rune, at time.Time) (TimeExpr, bool) {
	s := message[i:]
	// A date first: 去年の5月 is May, not last year.
	if e, ok := cjkDate(message, i, at); ok {
		return e, true
	}
	r, _ := utf8.DecodeRuneInString(s)
	for _, p := range cjkPhrases[r] {
		if !strings.HasPrefix(s, p.text) {
			continue
		}
		n := len(p.text)
		if !cjkEnds(p.text, s[n:]) || refusedPhrase(message, i, p.text) {
			continue
		}
		since, until := cjkResolve(p.span, at)
		if p.week {
			if d, dn, ok := cjkWeekdayAfter(s[n:], p.text); ok {
				since = day(since, d)
				until = day(since, 1)
				n += dn
			}
		}
		if since.After(at) {
			// This week's day or weekend still to come: a plan.
			return TimeExpr{}, true
		}
		return TimeExpr{Since: since, Until: until, Start: i, End: i + n}, true
	}
	if e, ok := koLastWeekday(s, at); ok {
		e.Start, e.End = i, i+e.End
		return e, true
	}
	if !agoFollows(message[:i], prev) {
		// 会議の3日前, 試験1週間前, 寝る3時間前: before the meeting, the
		// exam, going to bed.
		return TimeExpr{}, false
	}
	if e, ok := cjkAgo(s, at); ok {
		e.Start, e.End = i, i+e.End
		return e, true
	}
	return TimeExpr{}, false
}

// cjkEnds reports whether text (an expression) may end before rest: a
// Hangul expression only at its word's end or before a particle.
func cjkEnds(text, rest string) bool {
	last, _ := utf8.DecodeLastRuneInString(text)
	if !isHangul(last) {
		return true
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return !isHangul(r) })
	if end < 0 {
		end = len(rest)
	}
	return end == 0 || koParticles[rest[:end]]
}

// refusedPhrase reports the places where a listed word is part of
// another: 前天 in 之前天气 (before, the weather), 今日 in 今日本 (now in
// Japan; 今日本当に, today really, is today).
func refusedPhrase(message string, i int, text string) bool {
	before, _ := utf8.DecodeLastRuneInString(message[:i])
	after := message[i+len(text):]
	switch text {
	case "前天":
		return strings.ContainsRune("之以提从從目眼大", before) || strings.HasPrefix(after, "气") || strings.HasPrefix(after, "氣")
	case "大前天":
		return before == '大'
	case "今日":
		return strings.HasPrefix(after, "本") && !strings.HasPrefix(after, "本当")
	}
	first, _ := utf8.DecodeRuneInString(text)
	switch {
	case isHiraganaWord(text):
		// きょう in べんきょう (study), とうきょう, きょうだい (siblings),
		// きょうみ (interest); きのう in きのうえ (on the tree).
		return isHiragana(before) && !strings.ContainsRune(jaParticleChars, before) ||
			isHiragana(firstRune(after)) && !slices.ContainsFunc(jaAfterTimeWord, func(p string) bool { return strings.HasPrefix(after, p) })
	case first == '上':
		// 晚上周末 (evenings, weekends), 马上周末了 (the weekend is
		// near), 路上周围 (around the road): the 上 ends another word;
		// 上周围, 上周边: 周 starts another.
		return strings.ContainsRune(zhBeforeShang, before) ||
			!strings.HasSuffix(text, "末") && strings.ContainsRune("围圍边邊遭期到刊转轉", firstRune(after))
	case first == '本':
		// 日本周边 (around Japan), 基本月薪 (basic monthly pay), 一本周刊
		// (a weekly): the 本 ends another word or counts.
		return strings.ContainsRune(zhBeforeBen, before) || cjkNumeral(before)
	}
	return false
}

// zhBeforeShang are characters that make a 上 after them a word's end (晚上,
// 早上, 马上, 路上, 网上, ...), zhBeforeBen the same for 本 (日本, 基本,
// 根本, 成本, 书本, 这本, ...).
const (
	zhBeforeShang = "晚早马馬路网網身世以楼樓桌线線街山车車床脸臉头頭墙牆海"
	zhBeforeBen   = "日基根资資成书書课課剧劇版样樣文脚腳账賬笔筆这這那每"
)

// jaParticleChars may come right before a hiragana time word (ところできょう,
// ねえ、きのう needs none); jaAfterTimeWord may follow one (きょうは,
// きのうの, おとといから).
const jaParticleChars = "はがをにでともへのやねよかなわ"

var jaAfterTimeWord = strings.Fields("は も の に で が と や まで から こそ じゅう ぐらい くらい って")

func firstRune(s string) rune { r, _ := utf8.DecodeRuneInString(s); return r }

// isHiraganaWord reports whether text is all hiragana (きょう, ゆうべ).
func isHiraganaWord(text string) bool {
	return text != "" && !strings.ContainsFunc(text, func(r rune) bool { return !isHiragana(r) })
}

// cjkResolve is the range of sp at at.
func cjkResolve(sp cjkSpan, at time.Time) (time.Time, time.Time) {
	if sp.part != nil {
		return sp.part(at)
	}
	since := addUnits(unitStart(at, sp.unit), sp.unit, -sp.back)
	return since, addUnits(since, sp.unit, 1)
}

// cjkWeekdayAfter reads a weekday after this or last week (先週の月曜日,
// 先週月曜, 上周一, 上星期天, 上周的星期五, 지난주 월요일), the phrase
// week: its index from Monday and its length in bytes.
func cjkWeekdayAfter(s, week string) (int, int, bool) {
	rest, join := s, ""
	for _, j := range []string{"の", "的", " "} {
		if r, ok := strings.CutPrefix(s, j); ok {
			rest, join = r, j
			break
		}
	}
	used := func(r string) int { return len(s) - len(r) }
	r, n := utf8.DecodeRuneInString(rest)
	if n == 0 {
		return 0, 0, false
	}
	// Japanese 月曜日, 月曜; Korean 월요일.
	if d := slices.Index(jaWeekdays, r); d >= 0 && strings.HasPrefix(rest[n:], "曜") {
		return d, used(strings.TrimPrefix(rest[n+len("曜"):], "日")), true
	}
	if d := slices.Index(koWeekdays, r); d >= 0 && strings.HasPrefix(rest[n:], "요일") {
		return d, used(rest[n+len("요일"):]), true
	}
	// Chinese: 一 ... 日 or 天 right after the week (上周一), or after 星期,
	// 礼拜, 周 (上周的星期一).
	// 上星期天, 上个礼拜一: the week's word names the day too.
	named := strings.HasSuffix(week, "星期") || strings.HasSuffix(week, "礼拜") || strings.HasSuffix(week, "禮拜")
	for _, w := range []string{"星期", "礼拜", "禮拜", "周", "週"} {
		if x, ok := strings.CutPrefix(rest, w); ok {
			rest, named = x, true
			break
		}
	}
	if join != "" && !named {
		return 0, 0, false
	}
	r, n = utf8.DecodeRuneInString(rest)
	if r == '天' && named {
		r = '日'
	}
	d := slices.Index(zhWeekdays, r)
	if d < 0 || n == 0 {
		return 0, 0, false
	}
	after := rest[n:]
	if next, _ := utf8.DecodeRuneInString(after); cjkNumeral(next) || strings.ContainsRune(zhNotWeekday, next) {
		// 上周一起 (together), 上周三天 (three days): not a day.
		return 0, 0, false
	}
	return d, used(after), true
}

// zhNotWeekday are characters that make a numeral after a week a word of
// its own: 一起 (together), 一直 (all along), 一共, 一些, 一次, 一个, 一样,
// 一定, 一般, 一切, 一点, 一下, 三天; a measure word (一本书, 三场比赛,
// 五个人), 二手 (second-hand), 一整天, and 日本 after 上周日.
const zhNotWeekday = "起直共些次个個样樣定般切点點下天日年周週月" +
	"本张張件位名只隻条條份家场場台部篇首种種项項封杯瓶双雙对對套辆輛回遍趟顿頓岁歲号號人成倍千万萬亿億手整"

// koLastWeekday reads 지난 금요일 (저번 금요일, 지난금요일) at s's start:
// last Friday, the most recent before at's day, as English "last
// Friday"; End is its length.
func koLastWeekday(s string, at time.Time) (TimeExpr, bool) {
	for _, p := range []string{"지난 ", "저번 ", "지난", "저번"} {
		rest, ok := strings.CutPrefix(s, p)
		if !ok {
			continue
		}
		r, n := utf8.DecodeRuneInString(rest)
		d := slices.Index(koWeekdays, r)
		if d < 0 || !strings.HasPrefix(rest[n:], "요일") {
			return TimeExpr{}, false
		}
		after := rest[n+len("요일"):]
		if !cjkEnds("요일", after) {
			return TimeExpr{}, false
		}
		since := lastWeekdayBefore(at, d)
		return TimeExpr{Since: since, Until: day(since, 1), End: len(s) - len(after)}, true
	}
	return TimeExpr{}, false
}

// lastWeekdayBefore is the day of the last weekday d (Monday 0) before
// at's day.
func lastWeekdayBefore(at time.Time, d int) time.Time {
	back := (int(at.Weekday())+6-d)%7 + 7
	if back > 7 {
		back -= 7
	}
	return day(at, -back)
}

// cjkNumber reads a number at s's start: digits (ASCII or full width),
// Han numerals (一 ... 九百九十九, 两; not two digits in a row, which
// count roughly: 两三, 二三), or a Korean native count; it
// returns the value, its length in bytes, and few when the number is "a
// few" (数, 几, 幾, 몇).
func cjkNumber(s string) (n, size int, few, ok bool) {
	for _, w := range cjkFew {
		if strings.HasPrefix(s, w) {
			return 0, len(w), true, true
		}
	}
	i := 0
	for i < len(s) {
		r, sz := utf8.DecodeRuneInString(s[i:])
		if !isDigitNFKC(r) {
			break
		}
		d := int(r - '0')
		if r >= '０' {
			d = int(r - '０')
		}
		n = n*10 + d
		i += sz
		if n > 999 {
			return 0, 0, false, false
		}
	}
	if i > 0 {
		return n, i, false, n > 0
	}
	// Han numerals: 十五, 二十, 三百五十, 两.
	total, cur := 0, -1
numerals:
	for i < len(s) {
		r, sz := utf8.DecodeRuneInString(s[i:])
		switch {
		case cjkDigits[r] != 0 || r == '〇' || r == '零':
			if cur > 0 {
				// 两三天, 二三日, 一两个月, 三四年: two or three, an
				// approximation, not 23; nor is a year in numerals
				// (二〇二四) read.
				return 0, 0, false, false
			}
			cur = cjkDigits[r]
		case r == '十':
			total += max(cur, 1) * 10
			cur = -1
		case r == '百':
			total += max(cur, 1) * 100
			cur = -1
		default:
			break numerals
		}
		if total+max(cur, 0) >= 1000 {
			return 0, 0, false, false
		}
		i += sz
	}
	if i > 0 {
		total += max(cur, 0)
		return total, i, false, total > 0 && total < 1000
	}
	for _, c := range koNativeCounts {
		if strings.HasPrefix(s, c.word) {
			return c.n, len(c.word), false, true
		}
	}
	return 0, 0, false, false
}

// cjkAgo reads "N units ago" at s's start (三天前, 3日前, 2年前, 数日前,
// 几个月前, 3일 전, 두 달 전, 며칠 전, 하루 전); End is its length.
func cjkAgo(s string, at time.Time) (TimeExpr, bool) {
	if strings.HasPrefix(s, "며칠") {
		s = "몇일" + s[len("며칠"):] // a few days, as 몇 일
	}
	n, size, few, ok := cjkNumber(s)
	if !ok {
		return TimeExpr{}, false
	}
	rest := s[size:]
	native := false
	if r, _ := utf8.DecodeRuneInString(s); isHangul(r) {
		native = !few
		rest = strings.TrimPrefix(rest, " ")
	}
	var unit any
	switch {
	case native && n == 1 && strings.HasPrefix(s, "일주일"):
		unit = unitWeek
	case native && (strings.HasPrefix(s, "하루") || strings.HasPrefix(s, "이틀") || strings.HasPrefix(s, "사흘") || strings.HasPrefix(s, "나흘")):
		unit = unitDay
	default:
		for _, w := range cjkAgoUnitWords {
			if r, ok := strings.CutPrefix(rest, w); ok {
				if native && w != "달" && w != "시간" && w != "주" {
					// Korean counts years, days and minutes with
					// Sino-Korean numbers or digits (한 달, 두 주, but 3일).
					return TimeExpr{}, false
				}
				unit, rest = cjkAgoUnits[w], r
				break
			}
		}
	}
	if unit == nil {
		return TimeExpr{}, false
	}
	if r, _ := utf8.DecodeRuneInString(rest); r == '间' || r == '間' {
		// 3ヶ月間: a duration.
		return TimeExpr{}, false
	}
	rest = strings.TrimPrefix(rest, " ")
	for _, w := range cjkAgoWords {
		if r, ok := strings.CutPrefix(rest, w); ok {
			if w == "전" && !cjkEnds(w, r) {
				return TimeExpr{}, false
			}
			end := len(s) - len(r)
			switch u := unit.(type) {
			case time.Duration:
				lo, hi := n, n
				if few {
					lo, hi = 2, fewUnits[unitDay]
				}
				since, until := clockAgo(at, u, lo, hi)
				return TimeExpr{Since: since, Until: until, End: end}, true
			case timeUnit:
				start := unitStart(at, u)
				if few {
					return TimeExpr{Since: addUnits(start, u, -fewUnits[u]), Until: addUnits(start, u, -1), End: end}, true
				}
				since := addUnits(start, u, -n)
				return TimeExpr{Since: since, Until: addUnits(since, u, 1), End: end}, true
			}
		}
	}
	return TimeExpr{}, false
}

// cjkYears are the words of a year a month may follow (去年の5月, 작년 5월).
var cjkYears = []struct {
	word string
	back int
}{{"今年", 0}, {"올해", 0}, {"금년", 0}, {"去年", 1}, {"昨年", 1}, {"작년", 1}, {"지난해", 1},
	{"一昨年", 2}, {"おととし", 2}, {"재작년", 2}}

// cjkDate reads a year, a month or a date at message[i:]: 2024年, 2024년
// (that year, 1970 up to at's); 2024年5月, 去年の5月, 작년 5월 (that
// month); with 3日, 3号, 3일 after it, that day; a month or a date without
// a year (5月, 5月3日, 5월 3일): the most recent not after at, unless the
// sentence tells of a plan (cjkFutureWords). One still to come, or
// planned, is a zero TimeExpr and true.
func cjkDate(message string, i int, at time.Time) (TimeExpr, bool) {
	s := message[i:]
	year, rest := 0, s
	if y, size := cjkYearDigits(s); size > 0 {
		r := s[size:]
		yw := ""
		for _, w := range []string{"年", "년"} {
			if strings.HasPrefix(r, w) {
				yw = w
			}
		}
		if yw == "" || y < 1970 || y > at.Year() {
			return TimeExpr{}, false
		}
		year, rest = y, strings.TrimPrefix(r[len(yw):], " ")
		if _, _, _, ok := cjkMonthAt(rest); !ok {
			// 2024年: the year.
			end := size + len(yw)
			if !cjkEnds(s[:end], s[end:]) {
				return TimeExpr{}, false
			}
			since := time.Date(year, time.January, 1, 0, 0, 0, 0, at.Location())
			return TimeExpr{Since: since, Until: since.AddDate(1, 0, 0), Start: i, End: i + end}, true
		}
	} else {
		for _, y := range cjkYears {
			if r, ok := strings.CutPrefix(s, y.word); ok {
				for _, join := range []string{"の", "的", " "} {
					if x, ok := strings.CutPrefix(r, join); ok {
						r = x
						break
					}
				}
				if _, _, _, ok := cjkMonthAt(r); ok {
					year, rest = at.Year()-y.back, r
				}
				break
			}
		}
	}
	m, d, size, ok := cjkMonthAt(rest)
	if !ok {
		return TimeExpr{}, false
	}
	end := len(s) - len(rest) + size
	if after := strings.TrimPrefix(s[end:], " "); d == 0 && (strings.HasPrefix(after, "前") || strings.HasPrefix(after, "전")) {
		// 一月前, 三月前: a month (three) ago in Japanese, not January;
		// 5월 전: before May.
		return TimeExpr{}, false
	}
	if !cjkEnds(s[:end], s[end:]) {
		return TimeExpr{}, false
	}
	if year == 0 {
		if cjkPlanned(message, i) {
			return TimeExpr{}, true
		}
		year = at.Year()
		if time.Date(year, m, max(d, 1), 0, 0, 0, 0, at.Location()).After(at) {
			year--
		}
	}
	since := time.Date(year, m, max(d, 1), 0, 0, 0, 0, at.Location())
	until := since.AddDate(0, 1, 0)
	if d > 0 {
		if since.Month() != m {
			return TimeExpr{}, false // 2月30日
		}
		until = day(since, 1)
	}
	if since.After(at) {
		// 今年の12月 asked in May: still to come.
		return TimeExpr{}, true
	}
	return TimeExpr{Since: since, Until: until, Start: i, End: i + end}, true
}

// cjkYearDigits reads four digits at s's start.
func cjkYearDigits(s string) (int, int) {
	y, i := 0, 0
	for k := 0; k < 4; k++ {
		r, sz := utf8.DecodeRuneInString(s[i:])
		if !isDigitNFKC(r) {
			return 0, 0
		}
		d := int(r - '0')
		if r >= '０' {
			d = int(r - '０')
		}
		y = y*10 + d
		i += sz
	}
	if r, _ := utf8.DecodeRuneInString(s[i:]); isDigitNFKC(r) {
		return 0, 0
	}
	return y, i
}

// cjkMonthAt reads a month (1 to 12) and an optional day at s's start:
// 5月, 五月, 5月3日, 5月3号, 5월, 5월 3일; d is 0 without a day.
func cjkMonthAt(s string) (m time.Month, d, size int, ok bool) {
	if r, _ := utf8.DecodeRuneInString(s); isHangul(r) {
		return 0, 0, 0, false // a native count: 한 달, not a month
	}
	n, sz, few, ok := cjkNumber(s)
	if !ok || few || n < 1 || n > 12 {
		return 0, 0, 0, false
	}
	rest := s[sz:]
	var mw string
	switch {
	case strings.HasPrefix(rest, "月"):
		mw = "月"
	case strings.HasPrefix(rest, "월"):
		mw = "월"
	default:
		return 0, 0, 0, false
	}
	rest = rest[len(mw):]
	size = len(s) - len(rest)
	if mw == "月" {
		// 3月曜: a weekday (月曜日), not March.
		if strings.HasPrefix(rest, "曜") {
			return 0, 0, 0, false
		}
	} else if strings.HasPrefix(rest, "요일") {
		return 0, 0, 0, false
	}
	dr := strings.TrimPrefix(rest, " ")
	if dn, dsz, dfew, ok := cjkNumber(dr); ok && !dfew && dn >= 1 && dn <= 31 {
		after := dr[dsz:]
		for _, w := range []string{"日", "号", "號", "일"} {
			if a, ok := strings.CutPrefix(after, w); ok {
				if r, _ := utf8.DecodeRuneInString(dr); isHangul(r) {
					break
				}
				return time.Month(n), dn, len(s) - len(a), true
			}
		}
	}
	return time.Month(n), 0, size, true
}

// cjkPlanned reports whether the sentence holding message[i] tells of a
// plan (cjkFutureWords).
func cjkPlanned(message string, i int) bool {
	isEnd := func(r rune) bool { return strings.ContainsRune("。．！？!?\n", r) }
	start := strings.LastIndexFunc(message[:i], isEnd) + 1
	end := strings.IndexFunc(message[i:], isEnd)
	if end < 0 {
		end = len(message) - i
	}
	sentence := message[start : i+end]
	for _, w := range cjkFutureWords {
		if strings.Contains(sentence, w) {
			return true
		}
	}
	return false
}

// cjkTalkMorphemes are the Chinese and Japanese words a question about a
// time asks with, as talkWords are in English (昨日何を話しましたか, 上周我们
// 聊了什么): not searched for within the time's range. koTalkWords are the
// Korean ones, as whole words or stems (이야기를, 얘기했지).
var (
	cjkTalkMorphemes = strings.Fields(`
		話し 話した 話して 言っ 言い 聞い 話題 内容 こと 何か まとめ まとめて 要約 振り返 思い出 覚え 教え
		何て ったか したか 今頃
		提到 提过 提過 讨论 討論 总结 總結 事情 话题 哪些 说过 說過 聊过 聊過 回顾 回顧 记得 記得 发生 發生 起来 起來
	`)
	// 啥 (what), and the part of a month or year after one (上个月底,
	// 3月末, 今年初).
	cjkTalkChars = runeSet("话話说說聊谈談讲講提啥底末初頃")
	koTalkWords  = strings.Fields(`
		이야기 얘기 말 대화 대해 관해 요약 내용 했 했지 했었 했니 했나 했던 했더라 나눴 나눈 뭐라고 뭐라 무슨 있었 있었지 있었던 말했 말했지
		이야기했 이야기했지 얘기했 얘기했지 알려줘 알려 줘 했어 했어요 했었지 했었어
		말한 말했던 말하던 얘기한 얘기했던 얘기하던 이야기한 이야기했던 이야기하던
	`)
)

// cjkGreetMorphemes greet or thank (koGreetWords in Korean), as greetWords
// in English: a message of a time and these is small talk (今日はありがとう,
// thanks for today).
var (
	cjkGreetMorphemes = strings.Fields(`
		ありがとう ありがとうございます ありがとうございました おはよう おはようございます こんにちは こんばんは お疲れ様 お疲れさま おつかれ よろしく
		谢谢 謝謝 你好 您好 早上好 晚上好 晚安 再见 再見 辛苦
	`)
	koGreetWords = strings.Fields(`
		감사합니다 감사해요 감사했습니다 감사했어요 고마워 고마워요 고마웠어 고마웠어요 고마웠습니다 고맙습니다
		안녕 안녕하세요 수고했어 수고하셨습니다
	`)
)

// cjkAskingWords ask about the user's past, as askingWords do in English:
// question words and the first person ("去年の5月に何をしましたか" asks,
// though its rest is a particle and 何 alone).
var cjkAskingWords = strings.Fields(`
	何 なに なん いつ どこ どう どんな だれ 誰 私 僕 什么 什麼 哪 谁 吗 嗎 啥 我 뭐 무엇 무슨 어디 언제 누구 어떤 어떻게 내가 제가 우리
`)

// cjkGreetLists and cjkTalkLists mark what a time expression's rest says
// besides function material: greetings, and greetings and talk. A
// particle left alone by the expression (지난주에 → 에) is function
// material there, as is one starting a Japanese run (昨日は → は).
var (
	cjkGreetLists = &cjkLists{chars: zhFunctionChars,
		morphemes: newMorphemeTable(jaFunctionMorphemes, zhFunctionMorphemes, cjkGreetMorphemes),
		koWords:   union(koFunctionSet, koParticles, stringSet(koGreetWords)), leadingParticle: true}
	cjkTalkLists = &cjkLists{chars: union(zhFunctionChars, cjkTalkChars),
		morphemes: newMorphemeTable(jaFunctionMorphemes, zhFunctionMorphemes, cjkGreetMorphemes, cjkTalkMorphemes),
		koWords:   union(koFunctionSet, koParticles, stringSet(koGreetWords), stringSet(koTalkWords)), leadingParticle: true}
)

// union is the union of sets.
func union[K comparable](sets ...map[K]bool) map[K]bool {
	out := map[K]bool{}
	for _, s := range sets {
		for k := range s {
			out[k] = true
		}
	}
	return out
}

// cjkMarked returns, for each of lists, the CJK pieces of text (as
// Keywords cuts them) made only of what it marks; text is split once.
func cjkMarked(text string, lists ...*cjkLists) []map[string]bool {
	out := make([]map[string]bool, len(lists))
	for i := range out {
		out[i] = map[string]bool{}
	}
	for w := range words(norm.NFC.String(text)) {
		if !norm.NFKC.IsNormalString(w) {
			w = strings.ToLower(norm.NFKC.String(w))
		}
		if !hasUnspaced(w) {
			continue
		}
		for i, l := range lists {
			cjkPiecesBy(w, l, func(p cjkPiece) bool {
				if p.stop && isBigramToken(p.tok) {
					out[i][p.tok] = true
				}
				return true
			})
		}
	}
	return out
}
