package enricher

import (
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Time expressions in German, French, Spanish, Italian, Portuguese,
// Dutch, Russian and Polish. Like the CJK ones they are read for every user, whatever the
// user's language: the phrases are the languages' own ("letzte Woche", "la
// semaine dernière", "hace tres días"), which English text does not hold,
// and a phrase two of these languages share means the same in both ("esta
// semana"). The one word that means a time in one language and something
// else in another, French "hier" (yesterday; "here" in German and Dutch),
// is read only in a message that reads as French (frenchHier). The ranges
// are those of the English expressions with the same meaning (ParseTime's
// doc).
//
// Only phrases that say a past or present time are listed: "letzte Woche"
// and "la semaine dernière" (last week), not "die letzte Woche" before
// "vor" (the last week before something) or after a possessive ("meine
// letzte Woche", my final week), and not French "dernière semaine"
// (the final week). A month, a date or this weekend in a sentence that
// tells of a plan is no range (euLang.planned), as in Chinese, Japanese
// and Korean.

// euLang is one language's words.
type euLang struct {
	code string
	// numbers are the words of a count (1 for the article: "vor einem
	// Jahr", "il y a un an").
	numbers map[string]int
	// counts are several words of a count: n > 0 a number ("un par de",
	// a couple), 0 "a few" ("ein paar", "quelques").
	counts []euCount
	// units are the words of a unit, singular and plural: a timeUnit, or
	// a time.Duration for hours and minutes.
	units map[string]any
	// weekdays from Monday (0), compounds included; months.
	weekdays map[string]int
	// dayParts are the weekdays compounded with a part of the day
	// (German "Montagabend", Dutch "maandagavond"): that part.
	dayParts map[string][2]int
	months   map[string]time.Month
	// yearJoin may stand between a month and its year ("mayo de 2024").
	yearJoin map[string]bool
	// plans are words that make a sentence tell of what is to come;
	// notPlanAfter are the words before one of them that make it a
	// time of the day instead ("heute Morgen", "esta mañana").
	plans, notPlanAfter map[string]bool
	// exprs are the language's expressions, longest first.
	exprs []euExpr
	// plurals are the units in the plural ("in den letzten Tagen": a few
	// days); rollNotBefore the words after "the last N units" that make
	// them the end of something else ("los últimos días de agosto", "die
	// letzten Tage vor dem Umzug").
	plurals       map[string]any
	rollNotBefore map[string]bool
	// past are words that tell of the past (gesagt, parlé, dije): a
	// weekday alone in their sentence is a day gone by.
	past map[string]bool
	// habits are the words before a weekday that make it every such day
	// (jeden, todos, cada, ogni, chaque, elke; Italian "il lunedì",
	// Spanish "los lunes"); clauses the words that begin a clause of
	// what was said ("dije que el viernes ...", "zei dat ik zaterdag
	// ..."): a word of the past before them is not the weekday's.
	habits, clauses map[string]bool
	// What the rest of a timed message asks with (timeRest): grammar
	// (question words, pronouns, auxiliaries, articles, prepositions),
	// talk words and greet words are not searched within the range;
	// greet words, the parts of a greeting that are also words of their
	// own (greetParts: "Guten Tag", "bom dia") and grammar alone are small
	// talk; asking words make a question.
	grammar, talk, greet, greetParts, asking map[string]bool
	// unsearched are grammar and talk: the words a message in the
	// language does not search for (europeanGrammar).
	unsearched map[string]bool
}

// withRolling sets the words of "the last N units".
func (l *euLang) withRolling(plurals, notBefore string) *euLang {
	l.plurals = map[string]any{}
	for _, w := range strings.Fields(plurals) {
		u, ok := l.units[w]
		if !ok {
			panic("enricher: " + l.code + " plural " + w + " is not a unit")
		}
		l.plurals[w] = u
	}
	l.rollNotBefore = stringSet(strings.Fields(notBefore))
	return l
}

// withPast sets the words that tell of the past, the words that make a
// weekday a habit, and those that begin a clause of what was said.
func (l *euLang) withPast(past, habits, clauses string) *euLang {
	l.past = stringSet(strings.Fields(past))
	l.habits, l.clauses = stringSet(strings.Fields(habits)), stringSet(strings.Fields(clauses))
	return l
}

// withCompounds makes each weekday followed by one of parts' words (no
// space: "Montagabend") that weekday's part of the day.
func (l *euLang) withCompounds(parts map[string][2]int) *euLang {
	l.dayParts = map[string][2]int{}
	for w, d := range maps.Clone(l.weekdays) {
		for suffix, part := range parts {
			l.weekdays[w+suffix], l.dayParts[w+suffix] = d, part
		}
	}
	return l
}

// withRest sets the words timeRest reads.
func (l *euLang) withRest(grammar, talk, greet, greetParts, asking string) *euLang {
	set := func(s string) map[string]bool { return stringSet(strings.Fields(s)) }
	l.grammar, l.talk, l.greet, l.greetParts, l.asking = set(grammar), set(talk), set(greet), set(greetParts), set(asking)
	l.unsearched = set(grammar + " " + talk)
	return l
}

// euCount is a count of several words.
type euCount struct {
	words []string
	n     int
}

// euKind is what an expression's slots say.
type euKind int

const (
	euFixed       euKind = iota // span
	euAgo                       // a count and a unit, ago
	euLastWeekday               // the last such weekday before at's day
	euMonth                     // a month, with or without its year
	euDate                      // a day and a month, with or without a year
	euYear                      // a year
	euRolling                   // the last N units, or the last few, to at's day's end
	euEarlyMonth                // days 1-10 of a month, with or without its year ("Anfang Mai")
	euMidMonth                  // days 11-20 ("Mitte Mai", "mi-mai")
	euLateMonth                 // days 21 to its end ("Ende Mai", "fin mai")
	euOnWeekday                 // a weekday alone, in a clause about the past: the most recent before today
)

// euClass is what a slot matches besides its literal words.
type euClass int

const (
	euWords euClass = iota
	euNum           // a count: digits, a number word, or several words (counts)
	euUnit
	euWeekday
	euMonthName
	euYearNum // 1970 to at's year
	euDayNum  // 1 to 31
	euPlural  // a unit in the plural, without a count: a few of them
)

type euSlot struct {
	class euClass
	words map[string]bool
}

// euExpr is one expression: its slots and what it means.
type euExpr struct {
	slots []euSlot
	kind  euKind
	span  cjkSpan
	// week: the phrase is this or last week, which a weekday may qualify
	// ("Montag letzter Woche", "el lunes de la semana pasada").
	week bool
	// planned: a plan in the sentence makes it no range (this weekend).
	planned bool
	// french: read only in a message that reads as French (frenchHier).
	french bool
	// notAfter are words before the phrase that make it another span
	// (German possessives: "meine letzte Woche", my final week);
	// notBefore words after it ("die letzte Woche vor dem Urlaub").
	notAfter, notBefore map[string]bool
}

// euMatch is what an expression's slots read.
type euMatch struct {
	n       int // tokens
	count   int // -1: no count, 0: a few
	unit    any
	weekday int
	dayPart string // the weekday's word, when it is a compound with a part of the day
	month   time.Month
	monthAt int // the month's token
	year    int
	day     int
}

// The parts of a day (hours from its midnight), as in English and
// cjkPartsOfDay: read by partSpan for both the CJK and European phrases.
var (
	partMorning   = [2]int{0, 12}
	partAfternoon = [2]int{12, 18}
	partEvening   = [2]int{18, 24}
	partNight     = [2]int{18, 30}
)

// partSpan is a part of the day back days before at's.
func partSpan(back int, part [2]int) cjkSpan {
	return cjkSpan{part: func(at time.Time) (time.Time, time.Time) { return partOf(day(at, -back), part) }}
}

// partOf is a part of the day d (its midnight).
func partOf(d time.Time, part [2]int) (time.Time, time.Time) {
	return d.Add(time.Duration(part[0]) * time.Hour), d.Add(time.Duration(part[1]) * time.Hour)
}

// weekendSpan is this week's Saturday and Sunday (back 0) or last week's.
func weekendSpan(back int) cjkSpan {
	return cjkSpan{part: func(at time.Time) (time.Time, time.Time) {
		sat := day(unitStart(at, unitWeek), 5-7*back)
		return sat, day(sat, 2)
	}}
}

// euPhrases lists a language's fixed expressions: each line a span's
// phrases separated by commas, alternatives of a word by |.
type euPhrases []struct {
	phrases string
	span    cjkSpan
	// planned: a plan in the sentence makes it no range (this weekend).
	planned bool
	// final: German "letzte" phrases, which after a possessive or
	// before "vor" are the final unit of something (deNotAfter).
	final bool
	// french: a word that is another in German and Dutch (French
	// "hier", yesterday; "here"): read only in a French message
	// (frenchHier).
	french bool
}

func unitSpan(u timeUnit, back int) cjkSpan { return cjkSpan{unit: u, back: back} }

// newEULang builds a language from its word lists. fixed are its fixed
// expressions; patterns its others, each "kind: pattern, pattern" with
// {n} a count, {unit}, {units} (a plural, no count), {weekday}, {month},
// {year} and {day} slots.
func newEULang(code, numbers, units, weekdays, months, yearJoin, plans, notPlanAfter string, counts []euCount,
	fixed euPhrases, patterns map[euKind]string) *euLang {
	l := &euLang{code: code, counts: counts, numbers: map[string]int{}, units: map[string]any{},
		weekdays: map[string]int{}, months: map[string]time.Month{},
		yearJoin: stringSet(strings.Fields(yearJoin)), plans: stringSet(strings.Fields(plans)),
		notPlanAfter: stringSet(strings.Fields(notPlanAfter))}
	for _, f := range strings.Split(numbers, ",") {
		ws := strings.Fields(f)
		n, _ := digits(ws[0])
		for _, w := range ws[1:] {
			l.numbers[w] = n
		}
	}
	unitOf := []any{unitDay, unitWeek, unitMonth, unitYear, time.Hour, time.Minute}
	for i, f := range strings.Split(units, ",") {
		for _, w := range strings.Fields(f) {
			l.units[w] = unitOf[i]
		}
	}
	for i, f := range strings.Split(weekdays, ",") {
		for _, w := range strings.Fields(f) {
			l.weekdays[w] = i
		}
	}
	for i, f := range strings.Split(months, ",") {
		for _, w := range strings.Fields(f) {
			l.months[w] = time.Month(i + 1)
		}
	}
	for _, f := range fixed {
		var notAfter, notBefore map[string]bool
		if f.final {
			notAfter, notBefore = deNotAfter, deNotBefore
		}
		week := f.span.part == nil && f.span.unit == unitWeek && f.span.back < 2
		for _, p := range strings.Split(f.phrases, ",") {
			l.exprs = append(l.exprs, euExpr{slots: euSlots(p), kind: euFixed, span: f.span, week: week, planned: f.planned,
				french: f.french, notAfter: notAfter, notBefore: notBefore})
		}
	}
	l.exprs = append(l.exprs, euExpr{slots: euSlots("{weekday}"), kind: euOnWeekday})
	for kind := euFixed; kind < euOnWeekday; kind++ {
		for p := range strings.SplitSeq(patterns[kind], ",") {
			if strings.TrimSpace(p) != "" {
				l.exprs = append(l.exprs, euExpr{slots: euSlots(p), kind: kind})
			}
		}
	}
	slices.SortStableFunc(l.exprs, func(a, b euExpr) int { return len(b.slots) - len(a.slots) })
	return l
}

// euSlots parses a pattern.
func euSlots(p string) []euSlot {
	var out []euSlot
	classes := map[string]euClass{"{n}": euNum, "{unit}": euUnit, "{weekday}": euWeekday, "{month}": euMonthName,
		"{year}": euYearNum, "{day}": euDayNum, "{units}": euPlural}
	for _, w := range strings.Fields(p) {
		if c, ok := classes[w]; ok {
			out = append(out, euSlot{class: c})
			continue
		}
		out = append(out, euSlot{words: stringSet(strings.Split(w, "|"))})
	}
	return out
}

// euFold is a token's word as the lists write it: NFC, so that an accent
// typed as a combining mark matches.
func euFold(w string) string {
	for i := 0; i < len(w); i++ {
		if w[i] >= utf8.RuneSelf {
			return norm.NFC.String(w)
		}
	}
	return w
}

// euJoined reports whether gap may join two words of one expression:
// spaces, an apostrophe (l'année) or a hyphen (avant-hier, week-end), and
// after a day's number its dot ("am 3. Mai").
func euJoined(gap string, afterDay bool) bool {
	if gap == "" {
		return false
	}
	if afterDay {
		gap = strings.TrimPrefix(gap, ".")
	}
	for _, r := range gap {
		if !strings.ContainsRune(" \t\u00a0'’‘-", r) {
			return false
		}
	}
	return true
}

// match reads e's slots at toks[i:].
func (l *euLang) match(e euExpr, toks []timeTok, words []string, i int, at time.Time) (euMatch, bool) {
	m := euMatch{count: -1}
	j := i
	for k, s := range e.slots {
		if j >= len(toks) || (k > 0 && !euJoined(toks[j].gap, e.slots[k-1].class == euDayNum)) {
			return m, false
		}
		w := words[j]
		switch s.class {
		case euWords:
			if !s.words[w] {
				return m, false
			}
			j++
		case euNum:
			n, size, ok := l.count(toks, words, j)
			if !ok {
				return m, false
			}
			m.count = n
			j += size
		case euUnit:
			u, ok := l.units[w]
			if !ok {
				return m, false
			}
			m.unit = u
			j++
		case euPlural:
			u, ok := l.plurals[w]
			if !ok {
				return m, false
			}
			m.unit, m.count = u, 0
			j++
		case euWeekday:
			d, ok := l.weekdays[w]
			if !ok {
				return m, false
			}
			m.weekday = d
			if _, ok := l.dayParts[w]; ok {
				m.dayPart = w
			}
			j++
			// Portuguese "segunda-feira", "sexta feira".
			if j < len(toks) && words[j] == "feira" && euJoined(toks[j].gap, false) {
				j++
			}
		case euMonthName:
			mo, ok := l.months[w]
			if !ok {
				return m, false
			}
			m.month, m.monthAt = mo, j
			j++
		case euYearNum:
			y, ok := yearAt(toks[j:], at)
			if !ok || isoDateFollows(toks, j) {
				return m, false
			}
			m.year = y
			j++
		case euDayNum:
			t := toks[j]
			t.word = strings.TrimSuffix(strings.TrimSuffix(w, "er"), "º") // French "1er", Spanish and Portuguese "1º"
			d, ok := dayOfMonth(t)
			if !ok {
				return m, false
			}
			m.day = d
			j++
		}
	}
	m.n = j - i
	return m, true
}

// count reads a count at toks[j:]: several words first, then a number
// word or digits (1..999). n 0 is "a few".
func (l *euLang) count(toks []timeTok, words []string, j int) (n, size int, ok bool) {
	for _, c := range l.counts {
		if j+len(c.words) > len(toks) {
			continue
		}
		all := true
		for k, w := range c.words {
			if words[j+k] != w || (k > 0 && !euJoined(toks[j+k].gap, false)) {
				all = false
				break
			}
		}
		if all {
			return c.n, len(c.words), true
		}
	}
	if n, ok := l.numbers[words[j]]; ok {
		return n, 1, true
	}
	if w := words[j]; len(w) <= 3 {
		if n, ok := digits(w); ok && n >= 1 {
			return n, 1, true
		}
	}
	return 0, 0, false
}

// euLangs are the languages read, and euByWord their expressions by the
// word they start with (a slot's class: every word of that class).
var (
	euAll = []*euLang{euGerman.withBare(), euFrench.withBare(), euSpanish.withBare(), euItalian.withBare(),
		euPortuguese.withBare(), euDutch.withBare(), euRussian.withBare(), euPolish.withBare()}
	euLangs = func() map[string]*euLang {
		out := map[string]*euLang{}
		for _, l := range euAll {
			out[l.code] = l
		}
		return out
	}()
	euByWord = func() map[string][]euRef {
		out := map[string][]euRef{}
		for _, l := range euAll {
			for k, e := range l.exprs {
				var first []string
				switch s := e.slots[0]; s.class {
				case euWords:
					for w := range s.words {
						first = append(first, w)
					}
				case euNum:
					for w := range l.numbers {
						first = append(first, w)
					}
					for _, c := range l.counts {
						first = append(first, c.words[0])
					}
					first = append(first, "#")
				case euWeekday:
					for w := range l.weekdays {
						first = append(first, w)
					}
				case euUnit:
					for w := range l.units {
						first = append(first, w)
					}
				case euMonthName:
					for w := range l.months {
						first = append(first, w)
					}
				case euDayNum, euYearNum:
					first = append(first, "#")
				}
				for _, w := range first {
					if !slices.Contains(out[w], euRef{l, k}) {
						out[w] = append(out[w], euRef{l, k})
					}
				}
			}
		}
		return out
	}()
)

// euRef is one language's expression.
type euRef struct {
	lang *euLang
	expr int
}

// europeanTime is ParseTime's expressions in these languages: the first of
// the message. toks are the message's words (timeTokens).
func europeanTime(toks []timeTok, at time.Time) (TimeExpr, bool) {
	var words []string // folded, made at the first candidate
	french := 0        // frenchHier of the message: 0 not read yet, 1 true, -1 false
	for i, t := range toks {
		key := t.word
		switch {
		case key != "" && key[0] >= '0' && key[0] <= '9':
			key = "#"
		case words != nil:
			key = words[i]
		case key != "" && key[0] >= utf8.RuneSelf:
			key = euFold(key)
		}
		refs := euByWord[key]
		if len(refs) == 0 {
			continue
		}
		if words == nil {
			words = make([]string, len(toks))
			for k, t := range toks {
				words[k] = euFold(t.word)
			}
		}
		// The longest of all the languages' expressions here.
		best, bestN := TimeExpr{}, 0
		found, planned := false, false
		for _, r := range refs {
			e := r.lang.exprs[r.expr]
			m, ok := r.lang.match(e, toks, words, i, at)
			if !ok || m.n <= bestN {
				continue
			}
			if e.french {
				// Read once: a message of many "hier" would read its
				// words again for each.
				if french == 0 {
					french = -1
					if frenchHier(words) {
						french = 1
					}
				}
				if french < 0 {
					continue
				}
			}
			x, read, plan := r.lang.resolve(toks, words, i, e, m, at)
			if !read {
				continue
			}
			best, bestN, found, planned = x, m.n, true, plan
		}
		if found {
			if planned {
				return TimeExpr{}, false
			}
			return best, true
		}
	}
	return TimeExpr{}, false
}

// resolve turns a match into a range. read is false for a match that is no
// expression here; plan true for one of what is to come (no range, and no
// other expression read).
func (l *euLang) resolve(toks []timeTok, words []string, i int, e euExpr, m euMatch, at time.Time) (x TimeExpr, read, plan bool) {
	end := i + m.n
	if (i > 0 && e.notAfter[words[i-1]]) || (end < len(toks) && e.notBefore[words[end]]) {
		return TimeExpr{}, false, false
	}
	x.Start, x.End, x.lang = toks[i].start, toks[end-1].end, l.code
	switch e.kind {
	case euFixed:
		x.Since, x.Until = cjkResolve(e.span, at)
		if e.week {
			if d, from, to, ok := l.weekdayOfWeek(toks, words, i, end); ok {
				x.Since = day(x.Since, d)
				x.Until = day(x.Since, 1)
				x.Start, x.End = toks[from].start, toks[to-1].end
				wd := to - 1 // the weekday's word: last, or first ("Montagabend letzter Woche")
				if from < i {
					wd = from
				}
				x.Since, x.Until = l.partOfDay(words[wd], x.Since, x.Until)
			}
		}
		if x.Since.After(at) || (e.planned && l.planned(toks, words, i)) {
			// This week's day or weekend still to come: a plan.
			return TimeExpr{}, true, true
		}
	case euAgo:
		if end < len(toks) && euNotAgo[words[end]] {
			// "il y a deux jours fériés": there are two days off.
			return TimeExpr{}, false, false
		}
		if i > 0 && words[i-1] == "desde" {
			// "enfermo desde hace dos semanas", "desde há dois dias":
			// for two weeks until now, not that week.
			return TimeExpr{}, false, false
		}
		n := m.count
		if n < 0 {
			if !euAgoAlone[words[i]] {
				// "полгода назад", "pół roku temu", "полтора года
				// назад": half a year, one and a half, not a year ago.
				return TimeExpr{}, false, false
			}
			n = 1 // no count: "неделю назад", "rok temu" (a week, a year ago)
		}
		switch u := m.unit.(type) {
		case time.Duration:
			lo, hi := n, n
			if n == 0 {
				lo, hi = 2, fewUnits[unitDay]
			}
			x.Since, x.Until = clockAgo(at, u, lo, hi)
		case timeUnit:
			start := unitStart(at, u)
			if n == 0 {
				x.Since, x.Until = addUnits(start, u, -fewUnits[u]), addUnits(start, u, -1)
			} else {
				x.Since = addUnits(start, u, -n)
				x.Until = addUnits(x.Since, u, 1)
			}
		}
	case euOnWeekday:
		if wk, part, to, ok := l.weekAfterWeekday(toks, words, end, at); ok && !l.habitOrName(toks, words, i) {
			// "Donnerstagabend vor zwei Wochen", "am Montag vorletzter
			// Woche", "zondagmiddag twee weken geleden": that week's
			// day, as English "on Friday two weeks ago" (the weekday
			// alone read last week's).
			if l.planned(toks, words, i) {
				return TimeExpr{}, true, true
			}
			x.Since = day(wk, m.weekday)
			x.Until = day(x.Since, 1)
			x.End = toks[to-1].end
			if m.dayPart != "" {
				x.Since, x.Until = l.partOfDay(m.dayPart, x.Since, x.Until)
			} else if part != nil {
				x.Since, x.Until = partOf(x.Since, *part)
			}
			break
		}
		// The weekday's sentence is read within euWeekdayReach words of
		// it: each weekday of a long message that is no past day read its
		// whole sentence, quadratic (64 KiB of "lundi " took 11 s).
		lo, hi := max(0, i-euWeekdayReach), min(len(toks), end+euWeekdayReach)
		if !l.pastWeekday(toks[lo:hi], words[lo:hi], i-lo, end-lo, at) {
			return TimeExpr{}, false, false
		}
		// The most recent before today: asked on a Wednesday, "Was habe
		// ich am Mittwoch gesagt?" is last week's (today is "heute"; two
		// native readers in review).
		x.Since = lastWeekdayBefore(at, m.weekday)
		x.Until = day(x.Since, 1)
		if m.dayPart != "" {
			x.Since, x.Until = l.partOfDay(m.dayPart, x.Since, x.Until)
		} else if end < len(toks) && euJoined(toks[end].gap, false) {
			if part, ok := euWeekdayPart[words[end]]; ok {
				// "Dienstag Abend", "mardi soir", "lunedì sera": that
				// part of the day, not a word to search for.
				x.Since, x.Until = partOf(x.Since, part)
				x.End = toks[end].end
			}
		}
	case euLastWeekday:
		x.Since = lastWeekdayBefore(at, m.weekday)
		x.Since, x.Until = l.partOfDay(m.dayPart, x.Since, day(x.Since, 1))
	case euMonth, euDate, euEarlyMonth, euMidMonth, euLateMonth:
		if _, en := months[words[m.monthAt]]; en && (words[i] == "in" || e.slots[0].class != euWords ||
			toks[m.monthAt].capital && euEnglishLead[words[i]]) {
			// "in December", "3 december", "September 2024": English
			// reads these, with its own plans; "we begin April with a
			// sprint" is English too, which writes its months
			// capitalised (Dutch "begin april" does not).
			return TimeExpr{}, false, false
		}
		if e.kind != euMonth && e.kind != euDate && euLowerMonths[l.code] && toks[m.monthAt].capital {
			// "la fin de Mars" (the planet), "na początku Maja" (a
			// name): these languages write months in lower case, so a
			// capitalised one after a lower-case word of the phrase is
			// a name ("FIN MARS", all capitals, is still read).
			for k := i; k < m.monthAt; k++ {
				if !toks[k].capital {
					return TimeExpr{}, false, false
				}
			}
		}
		if (e.kind == euEarlyMonth || e.kind == euMidMonth) && euEnglishLead[words[i]] && l.englishLead(toks, words, m.monthAt) {
			// "did the classes begin september 8?", "the project will
			// begin september": English typed in lower case.
			return TimeExpr{}, false, false
		}
		y, n := m.year, 0
		if y == 0 {
			var yok bool
			if y, n, yok = l.yearAfter(toks, words, end, at); !yok {
				// "im Mai 2027", "en mayo de 1960": another year's.
				return TimeExpr{}, false, false
			} else if n > 0 {
				x.End = toks[end+n-1].end
			} else if back, rn, rok := l.relYearAfter(toks, words, end, at); rok {
				// "Ende Mai letzten Jahres", "a finales de mayo del año
				// pasado", "в конце мая прошлого года": that year's, as
				// English "late May last year".
				y, x.End = at.Year()-back, toks[end+rn-1].end
			} else if l.planned(toks, words, i) {
				return TimeExpr{}, true, true
			} else if euYearlyHabit(toks, words, i) {
				// Every year ("jedes Jahr Anfang Mai", "tous les ans
				// début mai"): no one month is meant, but no plan either:
				// the message's next expression is still read ("Jedes
				// Jahr im Mai fahren wir weg. Was habe ich gestern
				// gesagt?").
				return TimeExpr{}, false, false
			}
		}
		// A part of the month is its days first to last (0: its end), as
		// English "early|mid|late <month>" (matchPartOfMonth).
		first, last := max(m.day, 1), 0
		switch e.kind {
		case euEarlyMonth:
			first, last = 1, 10
		case euMidMonth:
			first, last = 11, 20
			if i > 0 && euJoined(toks[i].gap, false) {
				// "la prima metà di maggio", "w drugiej połowie maja":
				// the first or second half, not the middle.
				if h := euHalfBefore[words[i-1]]; h == 1 {
					first, last, x.Start = 1, 15, toks[i-1].start
				} else if h == 2 {
					first, last, x.Start = 16, 0, toks[i-1].start
				}
			}
		case euLateMonth:
			first = 21
		}
		if y == 0 {
			// The most recent not after at's month or day; a part of the
			// month, the most recent that has begun by at's day.
			y = at.Year()
			if time.Date(y, m.month, first, 0, 0, 0, 0, at.Location()).After(day(at, 0)) {
				y--
			}
		}
		if e.kind != euDate {
			x.Since = time.Date(y, m.month, first, 0, 0, 0, 0, at.Location())
			x.Until = time.Date(y, m.month+1, 1, 0, 0, 0, 0, at.Location())
			if last > 0 {
				x.Until = time.Date(y, m.month, last+1, 0, 0, 0, 0, at.Location())
			}
			break
		}
		x.Since = time.Date(y, m.month, m.day, 0, 0, 0, 0, at.Location())
		if x.Since.Day() != m.day {
			return TimeExpr{}, false, false // 31 June
		}
		x.Until = day(x.Since, 1)
	case euYear:
		x.Since = time.Date(m.year, time.January, 1, 0, 0, 0, 0, at.Location())
		x.Until = x.Since.AddDate(1, 0, 0)
	case euRolling:
		if end < len(toks) && l.rollNotBefore[words[end]] {
			return TimeExpr{}, false, false
		}
		n := m.count
		x.Until = day(at, 1)
		switch u := m.unit.(type) {
		case time.Duration:
			// Hours roll from at itself, as in English; "die letzten
			// Stunden": as many as "a few hours ago" reaches.
			if n == 0 {
				n = fewUnits[unitDay]
			}
			x.Since = at.Add(-time.Duration(max(n, 1)) * u)
		case timeUnit:
			if n <= 0 {
				// "die letzten Tage": as many as "a few days ago"
				// reaches; "de afgelopen week" (no count): one.
				n = fewUnits[u]
				if m.count < 0 {
					n = 1
				}
			}
			x.Since = addUnitsClamped(day(at, 0), u, -n)
		}
	}
	if x.Until.After(x.Since) && !x.Until.After(day(at, 1)) {
		// "seit Anfang Oktober", "depuis la semaine dernière", "desde
		// principios de octubre": from its start to the end of at's day,
		// as English "since".
		k := i
		for k > 0 && toks[k].start > x.Start {
			k--
		}
		if k > 1 && euSinceArticle[words[k-1]] && euSince[l.code][words[k-2]] && euJoined(toks[k-1].gap, false) {
			k-- // "desde o início de maio", "seit dem 3. Mai", "depuis le début mai"
		}
		if k > 0 && euSince[l.code][words[k-1]] && euJoined(toks[k].gap, false) &&
			!l.euUntilAfter(toks, words, i, x) {
			x.Start, x.Until = toks[k-1].start, day(at, 1)
		}
	}
	return x, true, false
}

// euUntil are the words after a since expression that make it the start
// of a span to a second time ("seit Anfang Mai bis Ende Juni", "od 3 maja
// do 10 maja", "dal 3 maggio al 10 maggio"): not "since", which would
// read to at's day; the expression is read alone.
var euUntil = bareLangSets(map[string]map[string]bool{
	"de": {"bis": true}, "fr": {"jusqu": true, "jusque": true, "au": true, "à": true}, "es": {"hasta": true, "a": true, "al": true},
	"pt": {"até": true, "ate": true, "a": true, "ao": true}, "it": {"al": true, "alla": true, "allo": true, "all": true, "fino": true, "a": true},
	"nl": {"tot": true, "t/m": true}, "pl": {"do": true},
})

// euUntilAfter reports whether the word right after x (its end in bytes)
// is one of euUntil, joined by a space, and a second time follows it: a
// month or a number within euUntilReach words ("bis Ende Juni", "do 10
// maja", "jusqu'à fin juin"). Many of euUntil are also articles and
// prepositions ("a minha mãe", "au bureau", "do pracy"), and "bis heute",
// "hasta hoy", "do dziś" are still since.
// i is a token of x: the words read from it on are x's.
func (l *euLang) euUntilAfter(toks []timeTok, words []string, i int, x TimeExpr) bool {
	for j := i; j < len(toks); j++ {
		if toks[j].start < x.End {
			continue
		}
		if !euUntil[l.code][words[j]] || !euJoined(toks[j].gap, false) {
			return false
		}
		for k := j + 1; k < len(toks) && k <= j+euUntilReach; k++ {
			if _, ok := l.months[words[k]]; ok || words[k] != "" && words[k][0] >= '0' && words[k][0] <= '9' {
				return true
			}
		}
		return false
	}
	return false
}

// euUntilReach is how many words after an until word its time may start
// ("jusqu'à la fin de juin": à la fin de juin).
const euUntilReach = 5

// euSinceArticle are the articles that may stand between a since word and
// its expression.
var euSinceArticle = stringSet(strings.Fields("o a os as el la los las le l les il lo der dem den die het de"))

// euSince are the words before an expression that make it "since" it:
// from its start to the end of at's day.
var euSince = map[string]map[string]bool{
	"de": {"seit": true}, "fr": {"depuis": true}, "es": {"desde": true}, "pt": {"desde": true},
	"it": {"da": true, "dal": true, "dalla": true, "dall": true, "dallo": true}, "nl": {"sinds": true}, "pl": {"od": true},
}

// isoDateFollows reports whether the year toks[j] starts a date in
// numbers (2026-11-18, 2026/11/18), which English reads.
func isoDateFollows(toks []timeTok, j int) bool {
	if j+1 >= len(toks) {
		return false
	}
	_, ok := digits(toks[j+1].word)
	return ok && (toks[j+1].gap == "-" || toks[j+1].gap == "/")
}

// euLowerMonths are the languages whose part-of-month phrases read a
// capitalised month after a lower-case word as a name: French ("la fin de
// Mars", the planet; "Avril") and Polish ("na początku Maja", the name).
var euLowerMonths = map[string]bool{"fr": true, "pl": true}

// euHalfBefore are the ordinals before a middle-of-month word that make it
// a half of the month: 1 the first, 2 the second.
var euHalfBefore = map[string]int{"prima": 1, "seconda": 2, "pierwszej": 1, "pierwsza": 1, "drugiej": 2, "druga": 2,
	"первой": 1, "второй": 2}

// englishLead reports whether Dutch "begin|half <month>" at the month
// toks[mo] is English typed in lower case: a day number follows the month
// ("begin september 8": Dutch writes "8 september"), or the message's
// English stop words outnumber its Dutch words ("the project will begin
// september").
func (l *euLang) englishLead(toks []timeTok, words []string, mo int) bool {
	if mo+1 < len(toks) && euJoined(toks[mo+1].gap, false) {
		if _, ok := dayOfMonth(timeTok{word: strings.TrimRight(words[mo+1], "stndrh")}); ok && !isYear(words[mo+1]) {
			return true
		}
	}
	english, dutch := 0, 0
	// Within euWeekdayReach words of the month: the whole message for
	// each "begin <month>" of a long one was quadratic (64 KiB of "the
	// project will begin september " took 0.6 s).
	for _, w := range words[max(0, mo-euWeekdayReach):min(len(words), mo+euWeekdayReach)] {
		if l.grammar[w] || l.talk[w] || l.asking[w] || l.past[w] {
			dutch++
		} else if stopWords[w] || euEnglishShort[w] {
			english++
		}
	}
	return english > dutch
}

// euYearly are the words that make a month, a part of one or a date
// without a year every year's ("jedes Jahr Anfang Mai", "tous les ans
// début mai", "каждый год в начале мая"): pairs of words, or one.
var euYearly = func() map[string]bool {
	out := stringSet(strings.Fields("jährlich alljährlich jaarlijks ежегодно corocznie"))
	for _, p := range strings.Split(`jedes jahr,jedem jahr,chaque année,chaque an,tous ans,todos años,cada año,ogni anno,tutti anni,
		todo ano,todos anos,cada ano,elk jaar,ieder jaar,iedere jaar,каждый год,каждом году,co roku,każdego roku`, ",") {
		out[strings.Join(strings.Fields(p), " ")] = true
	}
	return bareSet(out)
}()

// euYearlyHabit reports whether the sentence around toks[i] says every
// year (euYearly); "tous les ans", "todos los años", "tutti gli anni" with
// their article between.
func euYearlyHabit(toks []timeTok, words []string, i int) bool {
	// Within euWeekdayReach words of the month, as pastWeekday reads: a
	// habit's month is read no further, so a long sentence of them ("jedes
	// Jahr Anfang Mai " over 64 KiB) read itself whole for each (0.74 s).
	isEnd := func(r rune) bool { return strings.ContainsRune(".!?\n¿¡", r) }
	from, to := i, i
	for from > 0 && i-from < euWeekdayReach && !strings.ContainsFunc(toks[from].gap, isEnd) {
		from--
	}
	for to+1 < len(toks) && to-i < euWeekdayReach && !strings.ContainsFunc(toks[to+1].gap, isEnd) {
		to++
	}
	for k := from; k <= to; k++ {
		if euYearly[words[k]] {
			return true
		}
		for _, skip := range []int{1, 2} {
			if k+skip <= to && euYearly[words[k]+" "+words[k+skip]] && (skip == 1 || euYearlyArticle[words[k+1]]) {
				return true
			}
		}
	}
	return false
}

var euYearlyArticle = stringSet(strings.Fields("les los gli os"))

// euRelYears are the words after a month, a part of one or a date that
// say its year from at's: 1 last year, 0 this one, 2 the one before last.
var euRelYears = map[string][]struct {
	p    string
	back int
}{
	"de": {{"letzten|vorigen|vergangenen jahres", 1}, {"des letzten|vorigen|vergangenen jahres", 1},
		{"letztes|voriges|vergangenes jahr", 1}, {"dieses jahres", 0}, {"dieses jahr", 0},
		{"vorletzten jahres", 2}, {"vorletztes jahr", 2}},
	"fr": {{"de l année|an dernière|dernier|passée|passé", 1}, {"l année|an dernière|dernier|passée|passé", 1},
		{"de cette année", 0}, {"cette année", 0}},
	"es": {{"del año pasado", 1}, {"el año pasado", 1}, {"de este año", 0}, {"este año", 0}, {"del año antepasado", 2}},
	"it": {{"dell anno scorso|passato", 1}, {"l anno scorso|passato", 1}, {"dello scorso anno", 1},
		{"lo scorso anno", 1}, {"di quest anno", 0}, {"quest anno", 0}},
	"pt": {{"do ano passado", 1}, {"o ano passado", 1}, {"deste|desse ano", 0}, {"este|esse ano", 0}, {"do ano retrasado", 2}},
	"nl": {{"van vorig|vorige|afgelopen|verleden jaar", 1}, {"vorig|vorige|afgelopen|verleden jaar", 1},
		{"van dit jaar", 0}, {"dit jaar", 0}},
	"ru": {{"прошлого года", 1}, {"этого|текущего года", 0}, {"позапрошлого года", 2}, {"в прошлом году", 1}},
	"pl": {{"zeszłego|ubiegłego|poprzedniego roku", 1}, {"tego roku", 0}, {"w zeszłym|ubiegłym roku", 1}},
}

// euRelYear is a year said in words, parsed: its phrase and how many
// years before at's.
type euRelYear struct {
	e    euExpr
	back int
}

// euRelYearSlots are euRelYears parsed.
var euRelYearSlots = func() map[string][]euRelYear {
	out := map[string][]euRelYear{}
	for code, ps := range euRelYears {
		for _, p := range ps {
			e := euExpr{slots: euSlots(p.p)}
			for _, s := range e.slots {
				withBare(s.words, code == "de", nil)
			}
			out[code] = append(out[code], euRelYear{e, p.back})
		}
	}
	return out
}()

// relYearAfter reads a year said in words after a month at toks[j:]
// ("letzten Jahres", "del año pasado"): how many years before at's, and
// the tokens read.
func (l *euLang) relYearAfter(toks []timeTok, words []string, j int, at time.Time) (back, n int, ok bool) {
	if j >= len(toks) || !euJoined(toks[j].gap, false) {
		return 0, 0, false
	}
	for _, r := range euRelYearSlots[l.code] {
		if m, ok := l.match(r.e, toks, words, j, at); ok && m.n > n {
			back, n = r.back, m.n
		}
	}
	for _, e := range l.exprs {
		// "Mitte Mai vor zwei Jahren", "a fine maggio di due anni fa"
		// (after "di"), "в конце мая два года назад".
		if e.kind != euAgo {
			continue
		}
		k := j
		if euWeekJoin[words[k]] || words[k] == "di" || words[k] == "de" {
			k++
		}
		if k >= len(toks) || !euJoined(toks[k].gap, false) {
			continue
		}
		if m, ok := l.match(e, toks, words, k, at); ok && m.unit == any(unitYear) && m.count >= 1 && k-j+m.n > n {
			back, n = m.count, k-j+m.n
		}
	}
	return back, n, n > 0
}

// euEnglishLead are the first words of a part of the month that are
// English words too (Dutch "begin april", "half september").
var euEnglishLead = map[string]bool{"begin": true, "half": true}

// euAgoAlone are the units that say one without a count ("неделю
// назад", "rok temu"): the others are of a count before them ("полтора
// года", "pół roku").
var euAgoAlone = bareSet(stringSet(strings.Fields("день сутки неделю месяц год час минуту dzień tydzień miesiąc rok godzinę minutę")))

// euNotAgo are words after "N units ago" that make it a count of days:
// French "il y a deux jours fériés, de congé, qui ...".
var euNotAgo = bareSet(stringSet(strings.Fields("de d qui que fériés feriés ouvrés ouvrables restants pour par entre")))

// yearAfter reads a year after a month or date at toks[j:], joined by a
// space or the language's yearJoin word: the year and the tokens read (0
// when none follows); ok is false for a year out of 1970 to at's, as in
// English (yearAfter).
func (l *euLang) yearAfter(toks []timeTok, words []string, j int, at time.Time) (y, n int, ok bool) {
	k := j
	if k < len(toks) && l.yearJoin[words[k]] && euJoined(toks[k].gap, false) {
		k++
	}
	if k < len(toks) && euJoined(toks[k].gap, false) && isYear(words[k]) {
		if y, ok := yearAt(toks[k:], at); ok {
			return y, k - j + 1, true
		}
		return 0, 0, false
	}
	return 0, 0, true
}

// euWeekJoin may stand between a weekday and the week that says which
// ("lundi de la semaine dernière", "Montag der letzten Woche").
var euWeekJoin = stringSet(strings.Fields("de la der della da do van"))

// weekdayOfWeek reads a weekday next to this or last week (toks[i:end]):
// before it ("Montag letzter Woche", "lundi de la semaine dernière") or
// after it ("letzte Woche Montag", "letzte Woche am Montag"). It returns
// the day's index from Monday and the tokens [from, to) of the whole.
func (l *euLang) weekdayOfWeek(toks []timeTok, words []string, i, end int) (d, from, to int, ok bool) {
	k := i - 1
	for k >= 0 && i-k <= 3 && euWeekJoin[words[k]] && euJoined(toks[k+1].gap, false) {
		k--
	}
	if k >= 0 && euJoined(toks[k+1].gap, false) {
		if d, ok := l.weekdays[words[k]]; ok {
			return d, k, end, true
		}
	}
	j := end
	if j < len(toks) && euOnDay[words[j]] && euJoined(toks[j].gap, false) {
		j++
	}
	if j < len(toks) && euJoined(toks[j].gap, false) {
		if d, ok := l.weekdays[words[j]]; ok {
			return d, i, j + 1, true
		}
	}
	return 0, 0, 0, false
}

// pastWeekday reports whether the weekday toks[i:end] alone ("am Montag",
// "lundi", "el lunes") is a day of the past: in a sentence holding one of
// the language's past words (gesagt, parlé, dije, detto, disse, gezegd,
// ...) and no plan, not followed by the week that says which (read with
// the week), not a name (Domingo, capitalised inside a sentence in a
// language that writes weekdays in lower case), nor Portuguese ordinal
// (a segunda vez, the second time).
func (l *euLang) pastWeekday(toks []timeTok, words []string, i, end int, at time.Time) bool {
	if end < len(toks) && (euNotWeekdayBefore[words[end]] || l.weekFollows(toks, words, end, at)) {
		return false
	}
	if l.habitOrName(toks, words, i) {
		return false
	}
	for k := end; k < len(toks) && k <= end+1; k++ {
		// "lundi 9 novembre", "el lunes 9", "Montag, den 9.": the date's
		// weekday, read with the date or not at all.
		if _, ok := dayOfMonth(timeTok{word: strings.TrimSuffix(words[k], "º")}); ok {
			return false
		}
		if !euWeekJoin[words[k]] && !euOnDay[words[k]] && words[k] != "den" && words[k] != "dem" {
			break
		}
	}
	if l.planned(toks, words, i) {
		return false
	}
	// The word of the past is of the weekday's clause: a comma bounds it
	// unless the weekday and its article are a clause of their own ("Am
	// Montag, was habe ich gesagt?", not "Am Montag gehe ich zum Arzt,
	// wie ich gesagt habe"); a clause of what was said before the weekday
	// ("Te dije que el viernes no puedo") is of what is to come.
	isEnd := func(r rune) bool { return strings.ContainsRune(".!?\n¿¡", r) }
	isComma := func(r rune) bool { return strings.ContainsRune(",;:", r) }
	from, to := i, end // the weekday's clause
	for from > 0 && !strings.ContainsFunc(toks[from].gap, isEnd) && !strings.ContainsFunc(toks[from].gap, isComma) {
		from--
	}
	for to < len(toks) && !strings.ContainsFunc(toks[to].gap, isEnd) && !strings.ContainsFunc(toks[to].gap, isComma) {
		to++
	}
	alone := true
	for k := from; k < to; k++ {
		if (k < i || k >= end) && !euOnDay[words[k]] && !euWeekJoin[words[k]] && !euWeekdayParts[words[k]] {
			alone = false
		}
	}
	for k := i - 1; k >= 0 && !strings.ContainsFunc(toks[k+1].gap, isEnd); k-- {
		if !alone && k < from || l.clauses[words[k]] {
			break
		}
		if l.past[words[k]] {
			return true
		}
	}
	for k := end; k < len(toks) && !strings.ContainsFunc(toks[k].gap, isEnd); k++ {
		if !alone && k >= to {
			break
		}
		if l.past[words[k]] {
			return true
		}
	}
	return false
}

// habitOrName reports whether the weekday toks[i] is no day: a habit
// ("jeden Montag", "los lunes", "il lunedì": every Monday) or a name
// (Domingo, capitalised inside a sentence in a language that writes
// weekdays in lower case).
func (l *euLang) habitOrName(toks []timeTok, words []string, i int) bool {
	return i > 0 && ((l.habits[words[i-1]] && euJoined(toks[i].gap, false)) ||
		(l != euGerman && toks[i].capital && !strings.ContainsAny(toks[i].gap, ".!?¿¡\n")))
}

// partOfDay narrows a weekday's day [since, until) to the part of the day
// its word names ("Montagabend"); another word leaves it whole.
func (l *euLang) partOfDay(word string, since, until time.Time) (time.Time, time.Time) {
	part, ok := l.dayParts[word]
	if !ok {
		return since, until
	}
	return partOf(since, part)
}

// weekAfterWeekday reads, after a weekday ending at toks[j], its part of
// the day if one follows ("Montag Abend") and then a week further back
// than last week: "vor zwei Wochen", "vorletzter Woche", "twee weken
// geleden". It returns that week's Monday, the part, and the end of the
// tokens read.
func (l *euLang) weekAfterWeekday(toks []timeTok, words []string, j int, at time.Time) (week time.Time, part *[2]int, to int, ok bool) {
	if j < len(toks) && euJoined(toks[j].gap, false) {
		if p, pok := euWeekdayPart[words[j]]; pok {
			part = &p
			j++
		}
	}
	if j < len(toks) && euWeekJoin[words[j]] && euJoined(toks[j].gap, false) {
		j++
	}
	if j >= len(toks) || !euJoined(toks[j].gap, false) {
		return time.Time{}, nil, 0, false
	}
	for _, e := range l.exprs {
		switch {
		case e.kind == euAgo:
		case e.kind == euFixed && e.span.part == nil && e.span.unit == unitWeek && e.span.back == 2:
		default:
			continue
		}
		m, mok := l.match(e, toks, words, j, at)
		if !mok {
			continue
		}
		back := 2
		if e.kind == euAgo {
			if u, uok := m.unit.(timeUnit); !uok || u != unitWeek || m.count < 1 {
				continue
			}
			back = m.count
		}
		return addUnits(unitStart(at, unitWeek), unitWeek, -back), part, j + m.n, true
	}
	return time.Time{}, nil, 0, false
}

// euWeekdayReach bounds the words either side of a weekday alone that
// pastWeekday reads for its sentence.
const euWeekdayReach = 24

// euWeekdayPart are the parts of the day of one word after a weekday.
var euWeekdayPart = withBare(map[string][2]int{"abend": partEvening, "nachmittag": partAfternoon, "vormittag": partMorning, "morgen": partMorning,
	"früh": partMorning, "nacht": partNight, "soir": partEvening, "matin": partMorning, "sera": partEvening,
	"mattina": partMorning, "pomeriggio": partAfternoon, "notte": partNight, "avond": partEvening, "ochtend": partMorning,
	"middag": partAfternoon, "утром": partMorning, "днём": partAfternoon, "днем": partAfternoon, "вечером": partEvening,
	"ночью": partNight, "rano": partMorning, "wieczorem": partEvening}, true, nil)

// euWeekdayParts are the words that may stand with a weekday in a clause
// of its own ("Lunedì sera, cosa ...", "El lunes por la tarde, ...").
var euWeekdayParts = bareSet(stringSet(strings.Fields(`an um abend nachmittag vormittag früh nacht matin soir après midi
	por en tarde noche mattina pomeriggio sera notte à manhã noite ochtend middag avond в во утром днём днем
	вечером ночью w we rano wieczorem`)))

// euNotWeekdayBefore are words after a weekday that make it another word:
// Portuguese ordinals (a segunda vez, a quinta parte).
var euNotWeekdayBefore = bareSet(stringSet(strings.Fields("vez vezes mão parte série classe opção lugar geração edição temporada")))

// weekFollows reports whether this or last week follows at toks[j:],
// after the words that may join them ("Montag der letzten Woche").
func (l *euLang) weekFollows(toks []timeTok, words []string, j int, at time.Time) bool {
	for k := j; k < len(toks) && k <= j+2; k++ {
		if !euJoined(toks[k].gap, false) {
			return false
		}
		for _, e := range l.exprs {
			if e.week {
				if _, ok := l.match(e, toks, words, k, at); ok {
					return true
				}
			}
		}
		if !euWeekJoin[words[k]] {
			return false
		}
	}
	return false
}

// euOnDay may stand before a weekday after the week ("letzte Woche am
// Montag").
var euOnDay = stringSet(strings.Fields("am le el il no na op"))

// planned reports whether the sentence around toks[i] tells of a plan:
// one of the language's plan words, not after a word that makes it a
// time of the day.
func (l *euLang) planned(toks []timeTok, words []string, i int) bool {
	isEnd := func(r rune) bool { return strings.ContainsRune(".!?\n¿¡", r) }
	plan := func(k int) bool {
		if !l.plans[words[k]] || k == 0 {
			return l.plans[words[k]]
		}
		prev := words[k-1]
		_, weekday := l.weekdays[prev]
		// "über den Morgen", "Montag Morgen", "maandag morgen": the
		// morning, not tomorrow.
		return !l.notPlanAfter[prev] && !(words[k] == "morgen" && (euMorningNoun[prev] || weekday))
	}
	// Within euWeekdayReach words, as pastWeekday reads: a month rejected
	// (a habit) lets the next be tried, and a long sentence of them read
	// itself whole for each (64 KiB of "jedes Jahr Anfang Mai ": 0.6 s).
	for k := i - 1; k >= 0 && i-k <= euWeekdayReach && !strings.ContainsFunc(toks[k+1].gap, isEnd); k-- {
		if plan(k) {
			return true
		}
	}
	for k := i + 1; k < len(toks) && k-i <= euWeekdayReach && !strings.ContainsFunc(toks[k].gap, isEnd); k++ {
		if plan(k) {
			return true
		}
	}
	return false
}

// euMorningNoun are the words before German and Dutch "morgen" that make
// it the morning, not tomorrow: articles and their like.
var euMorningNoun = stringSet(strings.Fields("den der dem einen jeden diesen de het elke iedere"))

// frenchHier reports whether a message with "hier" reads as French: it
// holds a French word and none of German or Dutch, where "hier" is "here".
func frenchHier(words []string) bool {
	french := false
	for _, w := range words {
		if euGermanDutchWords[w] {
			return false
		}
		french = french || euFrenchWords[w]
	}
	return french
}

var (
	euFrenchWords = bareSet(stringSet(strings.Fields(`je j tu nous vous qu que quoi est c ai as avons avez ont été dit et
		parlé discuté raconté fait les des d l une avec dans ça moi toi mon ma mes ton ta tes soir matin
		après midi où quand qui quel quelle était étais avais avait sommes suis`)))
	euGermanDutchWords = stringSet(strings.Fields(`ich ik wir wij habe hab heb hebben bin ben ist sind das het wat
		und niet nicht war waren zijn mir mij`))
)

// euRestLang is the language of the rest of a timed message (timeRest),
// whose grammar and talk are not searched within the range, and the rest's
// words (folded): the one of read, the language that read the expression,
// unless another's words are more of the rest ("il 3 novembre", which
// French reads too: "Cosa ti ho raccontato il 3 novembre?" is Italian).
// An expression English read ("in september", "am 3. November", "in
// 2024") has a European language's rest when at least two of the rest's
// words are that language's and more than are English stop words ("Wat zei
// ik in september?").
func euRestLang(rest string, read *euLang) (*euLang, []string) {
	if len(rest) > euSample {
		n := euSample
		for n > 0 && !utf8.RuneStart(rest[n]) {
			n--
		}
		rest = rest[:n]
	}
	toks := timeTokens(rest)
	words := make([]string, len(toks))
	var counts [16]int // per language of euAll
	english := 0
	for i, t := range toks {
		w := euFold(t.word)
		words[i] = w
		for mask, k := euWordLangs[w], 0; mask != 0; mask, k = mask>>1, k+1 {
			counts[k] += int(mask & 1)
		}
		if stopWords[w] || euEnglishShort[w] {
			english++
		}
	}
	best, bestN := read, max(english, 1)
	if read != nil {
		bestN = counts[slices.Index(euAll, read)]
	}
	for k, l := range euAll {
		if counts[k] > bestN {
			best, bestN = l, counts[k]
		}
	}
	return best, words
}

// euSample bounds the text euRestLang reads: the start of a message tells
// its language (64 KiB of French took 10.8 ms whole).
const euSample = 4096

// euWordLangs are, for each grammar, talk or asking word, the languages of
// euAll (bit k for euAll[k]) that hold it: one lookup a word.
var euWordLangs = func() map[string]uint16 {
	out := map[string]uint16{}
	for k, l := range euAll {
		for _, set := range []map[string]bool{l.grammar, l.talk, l.asking} {
			for w := range set {
				out[w] |= 1 << k
			}
		}
	}
	return out
}()

// withoutEuropeanGrammar drops from ks, a message's keywords, the grammar
// words of the European language the message is written in (euRestLang:
// at least two of its words, more than English stop words), which English
// stop words do not know: "Qu'est-ce que tu sais de mon vélo ?" from a
// user who never set a language searches "sais vélo", not also "est que
// tu mon", which matched every French item (a walk: 5 unrelated items
// injected). A message in another language, English included, keeps ks.
func withoutEuropeanGrammar(message string, ks []string) []string {
	return withoutGrammar(europeanGrammar(message), ks)
}

// withoutGrammar drops grammar's words (europeanGrammar's) from ks.
func withoutGrammar(grammar map[string]bool, ks []string) []string {
	if grammar == nil || len(ks) == 0 {
		return ks
	}
	return slices.DeleteFunc(slices.Clone(ks), func(k string) bool { return grammar[k] })
}

// europeanGrammar is the grammar words and words of talk ("gesagt",
// "dit", "conté", as English "said" is a stop word) of the European
// language message is written in (euRestLang), nil for another: read once
// a request, for its keywords and again for their recap (languageRecap).
func europeanGrammar(message string) map[string]bool {
	if l, _ := euRestLang(message, nil); l != nil {
		return l.unsearched
	}
	return nil
}

// euEnglishShort are the English words of two letters or fewer that ask
// (stopWords holds none of them).
var euEnglishShort = stringSet(strings.Fields("i a an in on at to of my me we us is it do be or if as by so up am"))
