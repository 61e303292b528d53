package enricher

import (
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// TimeExpr is a time expression found in a message: the half-open range
// [Since, Until) of creation times it means, and where it is in the message.
type TimeExpr struct {
	// Since is the range's first instant, Until the first instant after it.
	// Since is zero for a range open at its start ("before May 3rd"), as
	// store.SearchQuery reads it.
	Since, Until time.Time
	// Start and End are the byte offsets of the expression's words in the
	// message ([Start, End)).
	Start, End int
	// lang is the code of europeanTime's language that read it; "" for
	// English and CJK.
	lang string
}

// ParseTime finds the first time expression of message and resolves it
// against at (a zero at means now, in UTC). Calendar days, weeks (starting
// on Monday), months and years are those of at's location (its offset, for
// a request's RFC 3339 time). Words are matched case-insensitively, as whole
// words. The English expressions understood, N being a number in digits
// (1..999) or words ("a", "an", "[a] couple [of]", "one" to "twenty", the
// tens to "ninety", and tens and a unit: "twenty one", "twenty-one"):
//
//   - "today", "earlier today": at's day; "yesterday", "the day before
//     yesterday": the day(s) before; "yesterday morning|afternoon|evening":
//     that part of yesterday.
//   - "this morning" [00:00, 12:00), "this afternoon" [12:00, 18:00), "this
//     evening" and "tonight" [18:00, 24:00) of at's day; "last night"
//     [18:00 yesterday, 06:00 today).
//   - "this|last week|month|year|weekend": the calendar unit containing at,
//     or the one before ("last weekend": the Saturday and Sunday before at's
//     week).
//   - "the|this past weekend": the last weekend that ended before at's day,
//     the same as "last weekend" (on a Saturday or a Sunday, the one a week
//     before; on a Monday, the one that just ended). Not "over the
//     weekend": as often a plan or a habit ("what should I do over the
//     weekend?", "I hike over the weekend") as a past weekend.
//   - "earlier this week|month|year": from the unit's start to the start of
//     at's day (at's day itself when it is the unit's first).
//   - "N days|weeks|months|years ago": the calendar unit N units before at's
//     ("two years ago" in 2026 is the year 2024); "a few|several days|
//     weeks|months|years ago": the units 2 to 7 days, 2 to 4 weeks, 2 to 6
//     months or 2 to 5 years before at's.
//   - "N hours|minutes ago", "a few hours|minutes ago" (2 to 7): back from
//     at itself, from twice the number to half of it ("two hours ago" is 4
//     to 1 hours back, "an hour ago" 2 hours to 30 minutes): a round
//     figure, and a turn's time is when it ended.
//   - "the last|past N days|weeks|months|years", "the past week|month|year":
//     from N units before at's day to the end of at's day; "the last|past
//     N hours", "the past hour": from N hours before at to the end of at's
//     day; "the past|last few|several days|...": as far back as "a few
//     ... ago" reaches. Not when "of" follows ("the last hour of the
//     party"), nor "the last week" or "[the] last few weeks" before
//     "before", "after", "in", "at" or "on" (the end of something else).
//   - "on <weekday>": the most recent such day, at's day included; "last
//     <weekday>": the most recent before at's day; either followed by
//     "morning", "afternoon", "evening" (as for yesterday) or "night" (18:00
//     to 06:00 the next day): that part of it, a week earlier when at's day
//     is that weekday and the part has not begun at at.
//   - "since <expression>", the expression any other here (the preposition
//     of a weekday, a date, a month, a year or Christmas left out: "since
//     Monday", "since May", "since last week", "since yesterday", "since
//     Christmas"): from its start to the end of at's day. Only a space or a
//     tab between ("since, may I ask" is no range), and "may" capitalised or
//     with its year.
//   - "[on] 2026-11-18", "2026/11/18": that day (year first, 1970 up to
//     at's year). Dates written with the day and month in numbers only
//     ("11/18", "18.11.2026") are not read: the order of day and month
//     differs between countries.
//   - "in|during <month>", "in|during <month> <year>", "<Month> <year>": the
//     most recent such month not after at's (or that year's); "last
//     <month>": the most recent before at's month.
//   - "on 3 March", "3rd of March", "March 3", "on the 3rd of March", with
//     an optional year ("March 3, 2024"): that day, the most recent not
//     after at's day when no year is given.
//   - "[the] week|month|year|weekend before last": the unit two before
//     at's (matchBeforeLast).
//   - "[the] first|second|third|fourth|last week of <month>", "early|mid|
//     late <month>", "mid-<month>", with a year as for a month: that part of
//     the month (matchPartOfMonth). "last week|month of" anything else is
//     no range ("the last week of the trip"), not at's last week.
//   - "in|during <year>": that year, 1970 up to at's year.
//   - "last Christmas" (before at's day), "at|on|over Christmas" (at's day
//     included), "Christmas Eve" after the same words: that day.
//   - A weekday followed by the week that says which ("on Monday last
//     week", "on Tuesday of last week", "on Friday two weeks ago"): that
//     week's day; a month, a date or Christmas followed by the year ("in
//     May two years ago"): that year's (qualified).
//   - The year of a month, a date or Christmas is a year 1970 up to at's or
//     "[of] last|this year" after a space or ", " ("in March last year",
//     "at Christmas 2024"). One out of that range, or "next year", makes
//     the expression no range rather than another year's.
//
// Near misses are refused: a month name alone needs a preposition before it
// or a capital letter and a number after it ("may I ask", "March on!"); an
// expression joined by a hyphen to a word ("a week-long trip") is not one;
// and neither is one whose common words are capitalised in the middle of a
// sentence, which names a title ("I watched Last Week Tonight"), unless the
// message has no lower-case letter at all; a month or a weekday with 's
// names someone or something ("in May's garden"), and so does a word
// joined by a dot ("Monday.com"); a number word or digits that continue a
// number ("a hundred and one", "1,500", "1.5") are not its own number.
//
// An expression X right after "before", "after", "until", "till", "til",
// "prior to" or "between", and after "from" when "to Y"
// follows, is the range directed reads, never X's own: "before May 3rd"
// is everything to the end of May 3rd, "the week before August 3" the
// week to the end of August 3, "between May 3rd and May 10th" both ends.
// One the direction cannot read is no range: not X after "ahead of", nor
// any other after "between" (the next is the range's other end); nor one
// after "since" that "since" does not read, nor one after "later" that
// reaches past at ("later this week", "later today": still to come). It
// reports false when message holds no expression.
//
// Chinese, Japanese and Korean expressions are read too, for every user
// (cjkTime, timecjk.go: 昨日, 上周, 지난달, 三天前, 2년 전, 去年の5月, ...),
// and German, French, Spanish, Italian, Portuguese, Dutch, Russian and
// Polish ones (europeanTime, timeeu.go: letzte Woche, il y a trois jours,
// el lunes pasado, ...); the first in the message, of any kind, is the one
// returned.
func ParseTime(message string, at time.Time) (TimeExpr, bool) {
	if at.IsZero() {
		at = time.Now().UTC()
	}
	toks := timeTokens(message)
	e, ok := englishTime(message, toks, at)
	if c, cok := cjkTime(message, at); cok && (!ok || c.Start < e.Start) {
		e, ok = c, true
	}
	if c, cok := europeanTime(toks, at); cok && (!ok || c.Start < e.Start) {
		e, ok = c, true
	}
	if ok && !e.Since.IsZero() && !e.Since.Before(at) {
		// A range that starts at or after at holds no memory yet: "what am
		// I doing this weekend?" on a Friday, "tonight" at noon ask about
		// a plan, told before, which the message's words find ("weekend");
		// read as a range, they found nothing. As "tomorrow" is not read.
		return TimeExpr{}, false
	}
	return e, ok
}

// englishTime is ParseTime's English expressions; toks are message's words
// (timeTokens).
func englishTime(message string, toks []timeTok, at time.Time) (TimeExpr, bool) {
	anyLower := strings.IndexFunc(message, unicode.IsLower) >= 0
	next := 0 // the first word past an expression refused for the word before it
	for i := range toks {
		if i < next {
			continue
		}
		e, n, ok := exprAt(message, toks, i, at, anyLower)
		if !ok {
			continue
		}
		if notOwnTime(toks, i) {
			// "my last week at the old job", "half a year ago", "three or
			// four days ago": another span than the words read.
			next = i + n
			continue
		}
		if dateFollows(message, toks, i, n, at, anyLower) {
			// "on Tuesday, November 3rd": November 3rd.
			continue
		}
		q, qn, ok := qualified(message, toks, i, n, e, at, anyLower)
		if toks[i].word == "since" && n >= 2 && named(toks[i+1:i+n]) {
			// "since Monday last week", "since May two years ago": from
			// that week's Monday, that year's May, to the end of at's day.
			sub := TimeExpr{Since: e.Since, Until: day(e.Since, 1), Start: toks[i+1].start, End: e.End}
			if s, sn, sok := qualified(message, toks, i+1, n-1, sub, at, anyLower); sn != n-1 {
				q, qn, ok = TimeExpr{Since: s.Since, Until: e.Until, Start: e.Start, End: s.End}, sn+1, sok
			}
		}
		if _, isDay := weekdays[toks[i].word]; isDay && !bareWeekday(message, toks, i, qn, at, anyLower) {
			continue
		}
		if !ok {
			// "on Friday this week" asked on Wednesday: still to come.
			return TimeExpr{}, false
		}
		e, n = q, qn
		if w, _ := turnedBy(toks, i); w == "" && n == 2 && wordsAre(toks[i:], "this", "weekend") && e.Since.After(at) && toldAsPast(toks, i, n) {
			// "what did we do this weekend?" asked on a Monday: the one
			// just past, not the one to come.
			e.Since, e.Until = e.Since.AddDate(0, 0, -7), e.Until.AddDate(0, 0, -7)
		}
		if w, wi := turnedBy(toks, i); w != "" && (w != "later" || e.Until.After(at)) {
			if r, ok := directed(message, toks, w, wi, i, n, e, at, anyLower); ok {
				return r, true
			}
			if w == "between" {
				// "between May 3rd and May 10th" whose other end is not
				// read, or comes first: no range rather than one end's.
				return TimeExpr{}, false
			}
			// Not its words either: "before the last 3 days" is
			// not "last 3 days".
			next = i + n
			continue
		}
		if i > 0 && toks[i-1].word == "from" && blank(toks[i].gap) {
			// "from May 3rd to May 10th": both ends; the first alone when
			// no second end is read ("from May 3rd to Anna").
			if r, ok, read := span(message, toks, i-1, i, n, e, at, anyLower, fromEnds); read {
				return r, ok
			}
		}
		if cl, at := clause(toks, i, n); named(toks[i:i+n]) && futureTalk(cl, at, n, anyLower) {
			// "what am I doing on Friday?", "what should I pack in May?":
			// the one to come, not the last one, which is what a named
			// day or month without a year reads.
			return TimeExpr{}, false
		}
		if relative(toks[i:i+n]) && datedLater(message, toks, i+n, at, anyLower) {
			// "last weekend, before April 10, 2023": the words measure
			// from that date, not from at.
			return TimeExpr{}, false
		}
		if i >= 2 && toks[i-1].word == "of" && toks[i-2].word == "week" && day(e.Since, 1).Equal(e.Until) && blank(toks[i].gap) && blank(toks[i-1].gap) {
			// "the week of March 2nd": that day's week.
			first := i - 2
			if first > 0 && toks[first-1].word == "the" && blank(toks[first].gap) {
				first--
			}
			if w, _ := turnedBy(toks, first); w != "" || (first > 0 && toks[first-1].word == "from") || spanFollows(message, toks, i+n, at, anyLower) {
				// "since the week of March 2nd", "the week of March 2nd
				// to March 10th": a direction or a span this does not
				// read (a review: the week alone).
				return TimeExpr{}, false
			}
			since := unitStart(e.Since, unitWeek)
			return TimeExpr{Since: since, Until: day(since, 7), Start: toks[first].start, End: e.End}, true
		}
		return e, true
	}
	return TimeExpr{}, false
}

// notBeforeBare are words after which a weekday without "on" or "last" is
// not the last such day: a determiner or a quantifier ("the Monday
// meeting", "every Friday"), a direction or a span ("before Monday", "from
// Monday"; a weekday there is read with "on"), or a preposition that makes
// it a thing ("of Monday", "for Friday", "thinking about Friday").
var notBeforeBare = map[string]bool{"the": true, "a": true, "an": true, "my": true, "your": true, "his": true,
	"her": true, "our": true, "their": true, "its": true, "every": true, "each": true, "next": true, "this": true,
	"coming": true, "before": true, "after": true, "until": true, "till": true, "til": true, "from": true,
	"between": true, "and": true, "or": true, "to": true, "through": true, "of": true, "by": true, "for": true,
	"since": true, "than": true, "prior": true, "about": true,
	// "that Friday", "one Monday", "the same Sunday": a day told of
	// elsewhere, not the last one; "on", "last": their expression was
	// refused, the weekday alone is not read either; "vs": a comparison.
	"that": true, "which": true, "one": true, "same": true, "another": true, "any": true, "some": true,
	"on": true, "last": true, "vs": true}

// dayNames before a weekday make it a holiday's or a place's name, in
// lower case too ("what did I buy black friday?", "lunch at ruby
// tuesday"): bareWeekday's capital test does not see them there.
var dayNames = map[string]bool{"black": true, "cyber": true, "good": true, "easter": true, "palm": true,
	"ash": true, "fat": true, "holy": true, "maundy": true, "shrove": true, "super": true, "giving": true,
	"ruby": true, "travel": true, "blue": true, "manic": true, "whit": true}

// plannedWords between the word of the past and a bare weekday (or "this
// weekend") make the day a plan told of in the past, not the day it was
// told ("what did I say I'd do Friday?", "I told him I'd call Friday", "I
// was thinking of organizing my closet this weekend"): "'d" is the word
// "d" after an apostrophe.
var plannedWords = map[string]bool{"would": true, "could": true, "should": true, "might": true, "will": true,
	"can": true, "ll": true, "d": true, "to": true, "going": true, "gonna": true, "plan": true, "plans": true,
	"planned": true, "planning": true, "due": true, "want": true, "wanted": true, "decide": true, "decided": true,
	"supposed": true, "scheduled": true, "thinking": true, "hoping": true, "hope": true, "for": true,
	"about": true, "later": true, "upcoming": true, "next": true, "tomorrow": true}

// toldAsPast reports whether a word of the past comes before toks[i:i+n]
// in its clause, with none of plannedWords between them (which would make
// the time a plan told of in the past).
func toldAsPast(toks []timeTok, i, n int) bool {
	cl, at := clause(toks, i, n)
	for j := at - 1; j >= 0; j-- {
		switch w := cl[j].word; {
		case pastWords[w]:
			return true
		case plannedWords[w]:
			return false
		}
	}
	return false
}

// bareWeekday reports whether a weekday written without "on" or "last"
// (toks[i:i+n], read as "on <weekday>") is a time asked about: it ends its
// clause (or a comma, or its part of day does), a word of the past comes
// before it in the clause ("what did I say Monday?", "we met Friday"), and
// the word before it is neither one of notBeforeBare nor a capitalised
// name ("Black Friday", "Cyber Monday"). Otherwise it names a thing ("the
// Monday standup") or a habit or a plan ("see you Monday").
func bareWeekday(message string, toks []timeTok, i, n int, at time.Time, anyLower bool) bool {
	if i == 0 {
		return false
	}
	prev := toks[i-1]
	if notBeforeBare[prev.word] || dayNames[prev.word] || (prev.capital && !sentenceStart(message, prev.start) && prev.word != "i") {
		return false
	}
	if j := i + n; j < len(toks) {
		if !strings.ContainsAny(toks[j].gap, ",.;:!?\n") {
			return false
		}
		if strings.TrimSpace(toks[j].gap) == "," {
			// "what did I eat Tuesday, November 3rd?", "Sunday, last
			// week": the weekday names the day the expression after it
			// says, not the last one.
			if _, _, ok := exprAt(message, toks, j, at, anyLower); ok {
				return false
			}
		}
	}
	return toldAsPast(toks, i, n)
}

// dateFollows reports whether the weekday expression toks[i:i+n] ("on
// Tuesday", "last Tuesday") is followed by ", " and a date or a month
// ("on Tuesday, November 3rd"): the weekday is that date's, and the date
// is read, not the last such weekday.
func dateFollows(message string, toks []timeTok, i, n int, at time.Time, anyLower bool) bool {
	if slices.ContainsFunc(toks[i:i+n], func(t timeTok) bool { _, ok := weekdays[t.word]; return !ok && t.word != "on" && t.word != "last" }) {
		return false
	}
	j := i + n
	if j >= len(toks) || strings.TrimSpace(toks[j].gap) != "," {
		return false
	}
	_, m, ok := exprAt(message, toks, j, at, anyLower)
	return ok && (hasMonth(toks[j:j+m]) || strings.ContainsAny(message[toks[j].start:toks[j+m-1].end], "-/"))
}

// qualified is the expression toks[i:i+n] (e), a day or month named
// without a year (read as the last one), with the week or year that
// follows it saying which: "on Monday last week", "on Tuesday of last
// week", "on Monday two weeks ago" (that week's Monday), "in May two years
// ago", "on Christmas two years ago" (that year's). Read alone, the name
// was the last one and the qualifier's words were searched for. It
// returns e and n as they are when no such qualifier follows, and ok
// false when the qualified day has not begun at at ("on Friday this
// week" asked on Wednesday: a plan, which the last Friday is not either).
//
// A week says which weekday, not which date or Christmas ("on Christmas
// last week" asked on January 5th is not New Year's Day); a year says
// which month, date or Christmas, and of a weekday only the year ("on
// Friday a year ago": that year, not last Friday's date a year before,
// another weekday). A qualifier followed by a verb is the subject of
// another clause ("I saw her on Monday last week was busy").
func qualified(message string, toks []timeTok, i, n int, e TimeExpr, at time.Time, anyLower bool) (TimeExpr, int, bool) {
	expr := toks[i : i+n]
	christmas := slices.ContainsFunc(expr, func(t timeTok) bool { return t.word == "christmas" })
	if !named(expr) && !(christmas && !hasYear(expr)) {
		return e, n, true
	}
	j := i + n
	if j < len(toks) && toks[j].word == "of" && blank(toks[j].gap) {
		j++
	}
	if j >= len(toks) || !blank(toks[j].gap) {
		return e, n, true
	}
	q, m, ok := exprAt(message, toks, j, at, anyLower)
	if !ok || !relative(toks[j:j+m]) {
		return e, n, true
	}
	if k := j + m; k < len(toks) && blank(toks[k].gap) && clauseVerbs[toks[k].word] {
		return e, n, true
	}
	weekday := !christmas && !hasMonth(expr) && slices.ContainsFunc(expr, func(t timeTok) bool { _, ok := weekdays[t.word]; return ok })
	shift := func(years, days int) (TimeExpr, int, bool) {
		r := TimeExpr{Since: e.Since.AddDate(years, 0, days), Until: e.Until.AddDate(years, 0, days), Start: e.Start, End: q.End}
		return r, j + m - i, !r.Since.After(at)
	}
	isWeek := q.Since.Equal(unitStart(q.Since, unitWeek)) && q.Until.Equal(q.Since.AddDate(0, 0, 7))
	isYear := q.Since.Equal(unitStart(q.Since, unitYear)) && q.Until.Equal(q.Since.AddDate(1, 0, 0))
	switch {
	case isWeek && weekday:
		// The same weekday in q's week (weeks start on Monday).
		d0 := day(e.Since, 0)
		target := day(q.Since, (int(d0.Weekday())+6)%7)
		return shift(0, int(math.Round(target.Sub(d0).Hours()/24)))
	case isWeek:
		// A date or Christmas says the day; the week around it is loose
		// talk ("what did I get on Christmas last week?" asked on January
		// 5th): the day, the week's words not searched for.
		return TimeExpr{Since: e.Since, Until: e.Until, Start: e.Start, End: q.End}, j + m - i, true
	case isYear && weekday:
		// Which of that year's weekdays is not said: the year.
		return TimeExpr{Since: q.Since, Until: q.Until, Start: e.Start, End: q.End}, j + m - i, true
	case isYear && e.Since.Year() == e.Until.Add(-time.Nanosecond).Year():
		if r, m, ok := shift(q.Since.Year()-e.Since.Year(), 0); r.Since.Day() == e.Since.Day() {
			return r, m, ok
		}
		// February 29th in a year without one: as it was read.
	}
	return e, n, true
}

// clauseVerbs after a week or year make it the subject of another clause,
// not a name's qualifier: "on Monday last week was busy".
var clauseVerbs = map[string]bool{"was": true, "were": true, "is": true, "has": true, "had": true,
	"will": true, "would": true, "felt": true, "seemed": true, "went": true, "got": true}

// possessives before "last" make it someone's last span, not the one
// before at's: "my last week at the old job", "our last weekend in Paris".
// Not "her", as often an object ("what did I tell her last week?").
var possessives = map[string]bool{"my": true, "your": true, "our": true, "his": true, "their": true, "its": true}

// notOwnTime reports whether the expression at toks[i] is part of a span
// it does not read: after a possessive ("my last week at the old job"),
// after "half" ("half a year ago" is not a year ago), or the second number
// of a span of numbers ("three or four days ago", "two to three weeks
// ago": one end alone would leave out the other).
func notOwnTime(toks []timeTok, i int) bool {
	if durationTail(toks, i) {
		return true
	}
	if i == 0 || !blank(toks[i].gap) {
		return false
	}
	prev := toks[i-1].word
	switch {
	case possessives[prev] && toks[i].word == "last":
		return true
	case prev == "the" && toks[i].word == "last" && i+1 < len(toks) && isUnit(toks[i+1].word):
		// What "the last week" reads starts at "the" (matchRolling,
		// matchPartOfMonth); refused there ("the last week before the
		// launch"), "last week" alone is not it either.
		return true
	case prev == "half":
		return true
	case (prev == "or" || prev == "to" || prev == "and") && i >= 2 && blank(toks[i-1].gap) && numeral(toks[i-2].word) && numeral(toks[i].word):
		return true
	}
	return false
}

// durationTail reports whether toks[i] continues a duration of several
// units: "30 minutes ago" in "an hour and 30 minutes ago" (or "an hour, 30
// minutes ago", "2 hours 30 minutes ago"), "2 hours ago" in "3 days and 2
// hours ago": read alone, the last unit is another time (minutes back for
// 90 minutes, today for three days back).
func durationTail(toks []timeTok, i int) bool {
	if i == 0 || !(numeral(toks[i].word) || toks[i].word == "a" || toks[i].word == "an") {
		// "I slept 8 hours, yesterday ...": not a number of units.
		return false
	}
	j, gap := i-1, strings.TrimSpace(toks[i].gap)
	if toks[j].word == "and" && gap == "" && j > 0 {
		j, gap = j-1, strings.TrimSpace(toks[j].gap)
	}
	if gap != "" && gap != "," {
		return false
	}
	_, clock := clockUnits[toks[j].word]
	return isUnit(toks[j].word) || clock
}

// isUnit reports whether w is a unit of time ParseTime reads.
func isUnit(w string) bool {
	_, ok := units[w]
	return ok
}

// numeral reports whether w is a number, in words or digits.
func numeral(w string) bool {
	_, ok := digits(w)
	return ok || numberWord(w)
}

// named reports whether an expression's words name a weekday or a month
// without a year or a word that says which one ("on Friday", "in May",
// "mid May", "the first week of April"): the last such day or month is
// read, which a question about plans does not mean.
func named(toks []timeTok) bool {
	if hasYear(toks) {
		return false
	}
	nameIt := false
	for _, t := range toks {
		switch t.word {
		case "last", "this", "past", "ago", "before", "after", "since", "previous":
			return false
		}
		if _, ok := months[t.word]; ok {
			nameIt = true
		}
		if _, ok := weekdays[t.word]; ok {
			nameIt = true
		}
	}
	return nameIt
}

// Words that tell a clause's time (futureTalk): pastWords one about what
// was; weakFutureWords one about what is to come, unless a word of the
// past governs them ("what did you plan in May?").
var (
	pastWords = map[string]bool{"did": true, "was": true, "were": true, "had": true, "said": true, "told": true,
		"went": true, "saw": true, "met": true, "ate": true, "bought": true, "took": true, "came": true,
		"gave": true, "thought": true, "wrote": true, "spent": true}
	weakFutureWords = map[string]bool{"plan": true, "plans": true, "planning": true, "upcoming": true, "tomorrow": true}
	// determiners before "will" make it the noun ("my will").
	determiners = map[string]bool{"my": true, "your": true, "his": true, "her": true, "their": true, "our": true, "the": true, "a": true}
	// notNext after "next" make it a place or an order, not a time to come.
	notNext = map[string]bool{"to": true, "step": true, "steps": true, "day": true, "door": true}
	// abbreviations whose dot ends no clause ("Dr. Jones").
	abbreviations = map[string]bool{"mr": true, "mrs": true, "ms": true, "dr": true, "st": true, "prof": true,
		"jr": true, "sr": true, "vs": true, "etc": true, "e": true, "g": true}
)

// spanEnds after an expression join it to a second end.
var spanEnds = map[string]bool{"to": true, "until": true, "till": true, "through": true, "and": true}

// spanFollows reports whether toks[j] joins a second expression to the
// one before it ("the week of March 2nd to March 10th"): a span word, then
// an expression.
func spanFollows(message string, toks []timeTok, j int, at time.Time, anyLower bool) bool {
	if j+1 >= len(toks) || !spanEnds[toks[j].word] {
		return false
	}
	_, _, ok := exprAt(message, toks, j+1, at, anyLower)
	return ok
}

// clause is the words of the clause holding toks[i:i+n] (from after the
// last sentence mark, . ? ! or ;, before it to the first after it; not
// the dot of an abbreviation), and the expression's index in it.
func clause(toks []timeTok, i, n int) ([]timeTok, int) {
	ends := func(j int) bool {
		return strings.ContainsAny(toks[j].gap, "?!;") ||
			(strings.Contains(toks[j].gap, ".") && !abbreviations[toks[j-1].word])
	}
	from := i
	for from > 0 && !ends(from) {
		from--
	}
	to := i + n
	for to < len(toks) && !ends(to) {
		to++
	}
	return toks[from:to], i - from
}

// futureTalk reports whether a clause (cl, its expression at cl[at:at+n])
// speaks of what is to come. The nearest word that tells, before the
// expression, else after it, decides: a word of the past ("did", "was",
// "said", ...), or a future ("will", not capitalised inside a clause of a
// message with lower case, a name, nor after "my", "the", ...; "'ll",
// "won't", "shall", "gonna", "going to", "should I / we", "am I / are we /
// are you" and a verb in -ing). With neither, "plan", "upcoming",
// "tomorrow" or "next" (not "next to", "next step", ...) anywhere in the
// clause do. A question about the past taken for one about what is to
// come loses its range, which is safe; the reverse would filter out what
// it asks for.
func futureTalk(cl []timeTok, at, n int, anyLower bool) bool {
	tells := func(j int) int { // 1 future, -1 past, 0 neither
		t := cl[j]
		next := func(k int) string {
			if j+k < len(cl) {
				return cl[j+k].word
			}
			return ""
		}
		switch w := t.word; {
		case pastWords[w]:
			return -1
		case w == "will":
			if (j > 0 && determiners[cl[j-1].word]) || (t.capital && j > 0 && anyLower) {
				return 0 // "my will", "Will" (someone)
			}
			return 1
		case w == "shall", w == "gonna":
			return 1
		case (w == "ll" || (w == "t" && j > 0 && cl[j-1].word == "won")) && (t.gap == "'" || t.gap == "\u2019"):
			return 1 // "I'll", "won't": split at the apostrophe
		case w == "going" && next(1) == "to":
			return 1
		case w == "should" && (next(1) == "i" || next(1) == "we"):
			return 1
		case (w == "am" || w == "are") && (next(1) == "i" || next(1) == "we" || next(1) == "you") && strings.HasSuffix(next(2), "ing"):
			return 1
		}
		return 0
	}
	for j := at - 1; j >= 0; j-- {
		if k := tells(j); k != 0 {
			return k > 0
		}
	}
	for j := at + n; j < len(cl); j++ {
		if k := tells(j); k != 0 {
			return k > 0
		}
	}
	for j, t := range cl {
		if weakFutureWords[t.word] || (t.word == "next" && (j+1 >= len(cl) || !notNext[cl[j+1].word])) {
			return true
		}
	}
	return false
}

// relative reports whether an expression's words measure from at alone:
// no month and no year of its own ("last weekend", "two days ago").
func relative(toks []timeTok) bool {
	if hasMonth(toks) {
		return false
	}
	for _, t := range toks {
		if isYear(t.word) {
			return false
		}
	}
	return true
}

// datedLater reports whether the message holds, after toks[from:], an
// expression with a year in digits ("as mentioned on November 6, 2023"):
// a relative expression before it measures from that date, which at is
// not. Not one without a year ("yesterday, about my trip in May": a
// review), which names what was talked about as often.
func datedLater(message string, toks []timeTok, from int, at time.Time, anyLower bool) bool {
	for j := from; j < len(toks); j++ {
		if _, n, ok := exprAt(message, toks, j, at, anyLower); ok {
			if slices.ContainsFunc(toks[j:j+n], func(t timeTok) bool { return isYear(t.word) }) {
				return true
			}
			j += n - 1
		}
	}
	return false
}

// exprAt reads the expression starting at toks[i], if any: the first
// matcher's that is not a near miss, and the words it used.
func exprAt(message string, toks []timeTok, i int, at time.Time, anyLower bool) (TimeExpr, int, bool) {
	if i >= len(toks) || !mayStart(toks[i].word) || midNumber(toks, i) {
		return TimeExpr{}, 0, false
	}
	for _, m := range timeMatchers {
		n, since, until, ok := m(toks[i:], at)
		if !ok || !until.After(since) {
			continue
		}
		e := TimeExpr{Since: since, Until: until, Start: toks[i].start, End: toks[i+n-1].end}
		if !acceptable(message, toks, i, i+n, e, anyLower) {
			continue
		}
		return e, n, true
	}
	return TimeExpr{}, 0, false
}

// directed is the range of the expression e (toks[i:i+n]) turned by the
// word w (toks[wi:i]; see turnedBy), and the words before w that measure
// from it ("two weeks before", "the Sunday before"). People ask about what
// happened before a day on which they talked about it ("what did John do
// the week before August 3?", told on August 3), so a range before X
// includes X:
//
//   - "before|prior to|until|till|til X": open at the start, to the end
//     of X; not when X reaches at's day (it would keep everything), nor
//     when X is a month or a date without a year whose day this year is
//     still to come ("until May 10th" asked on May 5th: this year's, not
//     last year's).
//   - "N units before X", "the <unit> before X" (also "prior to"): from N
//     units before X's start to X's end; "the <weekday> before X": from
//     the last such day before X to X's end.
//   - "after X": from X's start to the end of at's day, as "since", when
//     X ended before at's day (not "after today", "after this week");
//     "N units after X", "the <unit> after X": from X's start to N units
//     after its end; "the <weekday> after X": to the end of the first such
//     day after X.
//   - "between X and Y": from X's start to Y's end (span).
//
// It reports false for the others ("ahead of", "since", "later"), for a
// unit whose number is not read ("a few days before X", "day before
// yesterday"), and for a range that is not after its start.
func directed(message string, toks []timeTok, w string, wi, i, n int, e TimeExpr, at time.Time, anyLower bool) (TimeExpr, bool) {
	if w == "between" {
		r, ok, _ := span(message, toks, wi, i, n, e, at, anyLower, betweenEnds)
		return r, ok
	}
	before := w == "before" || w == "prior to"
	switch {
	case before, w == "until", w == "till", w == "til":
	case w == "after":
	default:
		return TimeExpr{}, false
	}
	if yetToCome(toks[i:i+n], e, at) {
		// "until May 10th", "after June" asked in May: this year's is
		// meant, still to come, not last year's the matcher read.
		return TimeExpr{}, false
	}
	r := TimeExpr{Until: e.Until, Start: toks[wi].start, End: e.End}
	if w == "after" {
		if e.Until.After(day(at, 0)) {
			// "after today", "after this week": still to come.
			return TimeExpr{}, false
		}
		r.Since, r.Until = e.Since, day(at, 1)
	}
	startTok := wi
	if before || w == "after" {
		first, measured, ok := measure(toks, wi, e, !before)
		if !ok {
			return TimeExpr{}, false
		}
		if first < wi {
			startTok = first
			r.Start = toks[first].start
			if before {
				r.Since = measured
			} else {
				r.Until = measured
			}
		}
	}
	if r.Since.IsZero() && r.Until.After(day(at, 0)) {
		// "before today", "until next Christmas": all there is.
		return TimeExpr{}, false
	}
	if !r.Until.After(r.Since) || !acceptable(message, toks, startTok, i+n, r, anyLower) {
		return TimeExpr{}, false
	}
	return r, true
}

// yetToCome reports whether e, read from toks, is a month or a date
// without a year whose occurrence in at's year is after at: the matchers
// read the most recent one not after at (last year's), right for "in
// June" but not for the end of a range ("until June", "between May 3rd
// and June 5th" asked in May).
func yetToCome(toks []timeTok, e TimeExpr, at time.Time) bool {
	if hasYear(toks) || !hasMonth(toks) || e.Since.Year() == at.Year() {
		return false
	}
	return e.Since.AddDate(1, 0, 0).After(at)
}

// measure reads the measure before the direction word toks[wi]: "N units"
// or "the <unit>" (N units before e's start, or after its end when after),
// or "the <weekday>" (the last such day before e, or the end of the first
// after it). first is the measure's first word (wi when there is none); ok
// is false when a unit comes without a number that can be read ("a few
// days before", "day before yesterday"): no range rather than another.
func measure(toks []timeTok, wi int, e TimeExpr, after bool) (first int, t time.Time, ok bool) {
	if wi == 0 || !blank(toks[wi].gap) {
		return wi, time.Time{}, true
	}
	w := toks[wi-1].word
	if wd, isDay := weekdays[w]; isDay {
		if wi < 2 || toks[wi-2].word != "the" || !blank(toks[wi-1].gap) {
			return wi, time.Time{}, false
		}
		if after {
			last := day(e.Until.Add(-time.Nanosecond), 0)
			return wi - 2, day(last, 1+(int(wd)-int(last.Weekday())+6)%7+1), true
		}
		return wi - 2, day(e.Since, -(1 + (int(e.Since.Weekday())-int(wd)+6)%7)), true
	}
	u, isUnit := units[w]
	if !isUnit {
		if periodWords[w] || numberWord(w) || (wi >= 2 && toks[wi-2].word == "the" && blank(toks[wi-1].gap)) {
			// "the weekend before", "the night before", "a day or two
			// before": a measure not read; no range rather than X's.
			return wi, time.Time{}, false
		}
		return wi, time.Time{}, true
	}
	k := -1
	num := 0
	if wi >= 2 && toks[wi-2].word == "the" && !strings.HasSuffix(w, "s") && blank(toks[wi-1].gap) {
		k, num = wi-2, 1
	} else {
		// The longest number that ends right before the unit: "two", "a
		// couple of", "twenty one".
		for j := max(0, wi-4); j <= wi-2; j++ {
			if c, used, ok := count(toks[j : wi-1]); ok && used == wi-1-j && !midNumber(toks, j) && blank(toks[wi-1].gap) {
				k, num = j, c
				break
			}
		}
	}
	if k < 0 {
		return wi, time.Time{}, false
	}
	if after {
		return k, addUnitsClamped(e.Until, u, num), true
	}
	return k, addUnitsClamped(e.Since, u, -num), true
}

// periodWords are spans of time measure does not read: before a direction
// word they measure from X ("the weekend after May 3rd"), so X's range
// alone would be another.
var periodWords = map[string]bool{
	"weekend": true, "weekends": true, "night": true, "nights": true, "evening": true, "morning": true,
	"afternoon": true, "hour": true, "hours": true, "minute": true, "minutes": true, "fortnight": true,
	"season": true, "summer": true, "winter": true, "spring": true, "autumn": true, "fall": true,
	"while": true, "moment": true, "decade": true, "decades": true,
}

// addUnitsClamped is t moved by n units, a month's day kept in the month
// (a month before March 31 is February's last day, not March 3).
func addUnitsClamped(t time.Time, u timeUnit, n int) time.Time {
	r := addUnits(t, u, n)
	if (u == unitMonth || u == unitYear) && r.Day() != t.Day() {
		r = day(r, -r.Day())
	}
	return r
}

// betweenEnds and fromEnds are the words between the two ends of a range:
// "between X and Y", "from X to|until|till|til|through Y".
var (
	betweenEnds = map[string]bool{"and": true}
	fromEnds    = map[string]bool{"to": true, "until": true, "till": true, "til": true, "through": true}
)

// span reads the range "between X and Y" or "from X to Y" whose first end
// X is e (toks[i:i+n]) and whose first word is toks[wi]: from X's start to
// Y's end. A month or a date X without a year is the most recent not after
// Y, in Y's year or, for a later month, the year before ("between August 11
// and August 15 2023" is 2023's August 11). read is false when no joining
// word and second end follow; ok is false when Y comes before X.
func span(message string, toks []timeTok, wi, i, n int, e TimeExpr, at time.Time, anyLower bool, ends map[string]bool) (r TimeExpr, ok, read bool) {
	j := i + n
	if j+1 >= len(toks) || !ends[toks[j].word] || !blank(toks[j].gap) || !blank(toks[j+1].gap) {
		return TimeExpr{}, false, false
	}
	y, yn, ok := exprAt(message, toks, j+1, at, anyLower)
	if !ok {
		return TimeExpr{}, false, false
	}
	xYearless := !hasYear(toks[i:i+n]) && hasMonth(toks[i:i+n])
	yYearless := !hasYear(toks[j+1:j+1+yn]) && hasMonth(toks[j+1:j+1+yn])
	switch {
	case xYearless && !yYearless:
		// In Y's year, or the year before when the range crosses a new
		// year ("between December 20 and January 5, 2025").
		if x, xn, ok := exprAt(message, toks, i, y.Until.Add(-time.Nanosecond), anyLower); ok && xn == n {
			e = x
		}
	case yYearless:
		// The first Y from X on: "between May 3rd and May 10th" asked on
		// May 5th is this May's, "between December 20 and January 5" the
		// January after X's December.
		if y2, n2, ok := exprAt(message, toks, j+1, e.Since.AddDate(1, 0, -1), anyLower); ok && n2 == yn {
			y = y2
		}
	}
	if y.Since.Before(e.Since) || (xYearless && yYearless && y.Until.Sub(e.Since) > 183*24*time.Hour) {
		// Y before X, or two ends without a year read as most of a year
		// apart ("between May 10th and May 3rd"): no range.
		return TimeExpr{}, false, true
	}
	return TimeExpr{Since: e.Since, Until: y.Until, Start: toks[wi].start, End: y.End}, true, true
}

// hasYear reports whether toks say a year ("2024", "last year");
// hasMonth whether they name a month.
func hasYear(toks []timeTok) bool {
	for _, t := range toks {
		if isYear(t.word) || t.word == "year" {
			return true
		}
	}
	return false
}

func hasMonth(toks []timeTok) bool {
	for _, t := range toks {
		if _, ok := months[t.word]; ok {
			return true
		}
	}
	return false
}

// turnWords change the meaning of the expression right after them: "before
// May 3rd" and "after May 3rd" are not May 3rd, and "later this week" is
// the part of the week still to come. ParseTime does not read such an
// expression, a wrong range being worse than none; "since" reads its own
// (matchSince), and one it cannot read ("since this weekend", not begun)
// is not read alone either. "later" refuses only an expression reaching past at ("later
// last week" is last week).
//
// Not "by" nor "up to": far more often a verb's ("she came by yesterday",
// "what was I up to last week?") than a bound, and read as one they gave
// those questions everything before them (a review).
var turnWords = map[string]bool{
	"before": true, "after": true, "until": true, "till": true, "til": true, "between": true,
	"later": true, "since": true,
}

// turnedBy is the turn word (or "prior to", "ahead of") right
// before toks[i], with only spaces or tabs between, or "", and the index of
// its first word.
func turnedBy(toks []timeTok, i int) (string, int) {
	if i == 0 || !blank(toks[i].gap) {
		return "", i
	}
	w := toks[i-1].word
	if turnWords[w] {
		return w, i - 1
	}
	if i >= 2 && blank(toks[i-1].gap) {
		switch pw := toks[i-2].word; {
		case w == "to" && pw == "prior", w == "of" && pw == "ahead":
			return pw + " " + w, i - 2
		}
	}
	return "", i
}

// blank reports whether s is one or more spaces or tabs.
func blank(s string) bool {
	return s != "" && strings.Trim(s, " \t") == ""
}

// bigNumbers are the number words that only start a number ParseTime does
// not read ("a hundred and one").
var bigNumbers = map[string]bool{"hundred": true, "thousand": true, "million": true}

// midNumber reports whether toks[i] is a number that continues the one
// before it: "one" in "a hundred and one days ago" or "twenty one" (when
// count could not read it), "500" in "1,500 days": read alone, it would be
// another number.
func midNumber(toks []timeTok, i int) bool {
	if i == 0 {
		return false
	}
	w, p, gap := toks[i].word, toks[i-1].word, toks[i].gap
	if _, ok := digits(w); ok {
		_, prevDigits := digits(p)
		return prevDigits && gap == ","
	}
	if !numberWord(w) || (!blank(gap) && gap != "-") {
		return false
	}
	return numberWord(p) || bigNumbers[p] || (p == "and" && i >= 2 && bigNumbers[toks[i-2].word])
}

// numberWord reports whether w is a number's word other than "a" and "an".
func numberWord(w string) bool {
	_, ok := numberWords[w]
	return ok && w != "a" && w != "an"
}

// startWords are the words other than numbers, months and weekdays an
// expression can start with: most words are skipped without trying the
// matchers.
var startWords = map[string]bool{
	"the": true, "today": true, "earlier": true, "yesterday": true, "tonight": true, "this": true,
	"last": true, "past": true, "on": true, "in": true, "during": true, "at": true, "over": true,
	"since": true, "couple": true, "first": true, "second": true, "third": true, "fourth": true,
	"early": true, "mid": true, "late": true, "week": true, "month": true, "year": true, "weekend": true,
	"several": true,
}

// mayStart reports whether an expression may start with w.
func mayStart(w string) bool {
	if startWords[w] || (w[0] >= '0' && w[0] <= '9') {
		return true
	}
	_, n := numberWords[w]
	_, m := months[w]
	_, d := weekdays[w]
	return n || m || d
}

// timeTok is one word of a message: lower-cased, with its byte offsets and
// whether it starts with a capital letter.
type timeTok struct {
	word       string
	start, end int
	capital    bool
	// before is the byte before the word (0 at the message's start): what
	// joins the numbers of a date ("2026-11-18").
	before byte
	// gap is the text between the word before and this one ("" for the
	// first).
	gap string
}

// timeTokens splits s into words as Keywords does (wordSpans).
func timeTokens(s string) []timeTok {
	out := make([]timeTok, 0, len(s)/6+1)
	prevEnd := 0
	wordSpans(s, func(start, end int) bool {
		first, _ := utf8.DecodeRuneInString(s[start:])
		var before byte
		if start > 0 {
			before = s[start-1]
		}
		var gap string
		if len(out) > 0 {
			gap = s[prevEnd:start]
		}
		out = append(out, timeTok{word: strings.ToLower(s[start:end]), start: start, end: end, capital: unicode.IsUpper(first), before: before, gap: gap})
		prevEnd = end
		return true
	})
	return out
}

// acceptable refuses the near misses ParseTime documents: e is read from
// all[from:to], the message's words.
func acceptable(message string, all []timeTok, from, to int, e TimeExpr, anyLower bool) bool {
	toks := all[from:to]
	if (e.Start > 0 && message[e.Start-1] == '-') || (e.End < len(message) && message[e.End] == '-') {
		return false
	}
	// A dot between words joins a name or a number: "Monday.com",
	// "today.txt", "1.5 years ago".
	if (e.Start > 1 && message[e.Start-1] == '.' && wordBefore(message[:e.Start-1])) ||
		(e.End+1 < len(message) && message[e.End] == '.' && wordAfter(message[e.End+1:])) {
		return false
	}
	// A month or a weekday with 's is someone's or something's name: "in
	// May's garden", "June's notebook".
	if last := toks[len(toks)-1].word; properTimeWord(last) && last != "christmas" && last != "eve" {
		if rest := message[e.End:]; strings.HasPrefix(rest, "'s") || strings.HasPrefix(rest, "\u2019s") {
			return false
		}
	}
	if !anyLower || shouted(message, all, from, to) {
		return true
	}
	for i, t := range toks {
		if !t.capital || properTimeWord(t.word) {
			continue
		}
		if i == 0 && sentenceStart(message, t.start) {
			continue
		}
		return false
	}
	return true
}

// shouted reports whether an expression's words, all[from:to], are
// written in capitals for emphasis ("what did we talk about YESTERDAY?"),
// not as a title: no word in lower case, and no capitalised word right
// before or after it ("I watched LAST WEEK TONIGHT"), but "I" ("what did
// we say LAST WEEK I forgot"). The words around are the message's, not
// read again: every expression tried would read the whole message (a
// 64 KiB message of "TODAY TODAY ..." took 13 s).
func shouted(message string, all []timeTok, from, to int) bool {
	letters := false
	for _, t := range all[from:to] {
		w := message[t.start:t.end]
		if strings.IndexFunc(w, unicode.IsLower) >= 0 {
			return false
		}
		letters = letters || strings.IndexFunc(w, unicode.IsLetter) >= 0
	}
	if !letters {
		return false
	}
	title := func(t timeTok) bool { return t.capital && t.word != "i" }
	if from > 0 && title(all[from-1]) && blank(all[from].gap) && !sentenceStart(message, all[from-1].start) {
		return false
	}
	if to < len(all) && title(all[to]) && blank(all[to].gap) {
		return false
	}
	return true
}

// wordBefore and wordAfter report whether a letter or a digit ends or
// starts s.
func wordBefore(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

func wordAfter(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// sentenceStart reports whether the word at offset begins a sentence: only
// space, quotes or brackets between it and the message's start or a ".",
// "!", "?" or newline.
func sentenceStart(message string, offset int) bool {
	for i := offset - 1; i >= 0; i-- {
		switch message[i] {
		case ' ', '\t', '"', '\'', '(', '[':
			continue
		case '.', '!', '?', '\n', ':':
			return true
		}
		return false
	}
	return true
}

// properTimeWord reports whether a word is written with a capital anyway.
func properTimeWord(w string) bool {
	_, month := months[w]
	_, day := weekdays[w]
	return month || day || w == "christmas" || w == "eve"
}

var months = map[string]time.Month{
	"january": time.January, "february": time.February, "march": time.March, "april": time.April,
	"may": time.May, "june": time.June, "july": time.July, "august": time.August, "september": time.September,
	"october": time.October, "november": time.November, "december": time.December,
	"jan": time.January, "feb": time.February, "mar": time.March, "apr": time.April, "jun": time.June,
	"jul": time.July, "aug": time.August, "sep": time.September, "sept": time.September, "oct": time.October,
	"nov": time.November, "dec": time.December,
}

var weekdays = map[string]time.Weekday{
	"monday": time.Monday, "tuesday": time.Tuesday, "wednesday": time.Wednesday, "thursday": time.Thursday,
	"friday": time.Friday, "saturday": time.Saturday, "sunday": time.Sunday,
}

var numberWords = map[string]int{
	"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
	"nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
	"sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
	"sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
}

// timeUnit is a calendar unit of relative expressions.
type timeUnit int

const (
	unitDay timeUnit = iota
	unitWeek
	unitMonth
	unitYear
)

var units = map[string]timeUnit{
	"day": unitDay, "days": unitDay, "week": unitWeek, "weeks": unitWeek,
	"month": unitMonth, "months": unitMonth, "year": unitYear, "years": unitYear,
}

// timeMatcher tries one form of expression at the start of toks: the
// number of words it used and the range.
type timeMatcher func(toks []timeTok, at time.Time) (n int, since, until time.Time, ok bool)

// timeMatchers are tried in order at each word; longer forms come first.
var timeMatchers = []timeMatcher{
	matchSince, matchDayBeforeYesterday, matchEarlierThis, matchDayWords, matchPartOfDay, matchUnitsAgo,
	matchWeekend, matchBeforeLast, matchPartOfMonth, matchRolling, matchThisLast, matchWeekday, matchISODate, matchDate, matchMonth, matchYear,
	matchChristmas,
}

// sinceMatchers are the expressions "since" may start, each with the
// preposition it takes elsewhere and that "since" stands for ("since
// Monday" is "on Monday"'s day on): a range from their start.
// "may" read as a month through the "in" that "since" stands for must be
// capitalised or have its year: "in may" is a month, but "since may I
// ask" is not (capitalOrYear); "since march" is March.
var sinceMatchers = []struct {
	prep          string
	matcher       timeMatcher
	capitalOrYear bool
}{
	{"", matchDayBeforeYesterday, false}, {"", matchBeforeLast, false}, {"", matchPartOfMonth, false}, {"", matchDayWords, false}, {"", matchPartOfDay, false}, {"", matchUnitsAgo, false},
	{"", matchThisLast, false}, {"", matchWeekday, false}, {"", matchISODate, false}, {"", matchDate, false}, {"", matchMonth, false},
	{"", matchChristmas, false}, {"", matchWeekend, false}, {"", matchEarlierThis, false}, {"", matchRolling, false},
	{"on", matchWeekday, false}, {"on", matchDate, false}, {"in", matchMonth, true}, {"in", matchYear, false}, {"at", matchChristmas, false},
}

// sinceReach is the most words after "since" its expressions read
// ("the day before yesterday" is 4): each try reads a copy of at most
// these, so a message made of "since" costs linear time.
const sinceReach = 8

// day is the midnight starting t's day in t's location, shifted by n days.
func day(t time.Time, n int) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day()+n, 0, 0, 0, 0, t.Location())
}

// words reports whether toks starts with ws.
func wordsAre(toks []timeTok, ws ...string) bool {
	if len(toks) < len(ws) {
		return false
	}
	for i, w := range ws {
		if toks[i].word != w {
			return false
		}
	}
	return true
}

// count reads a number at the start of toks: the number and words used.
// Tens and a unit are one number, joined by a space or a hyphen ("twenty
// one", "twenty-one"); "couple" may go without "a" or "of" ("the last
// couple of weeks", "a couple days ago").
func count(toks []timeTok) (int, int, bool) {
	if len(toks) == 0 {
		return 0, 0, false
	}
	if i := len(toks) - len(skipWord(toks, "a")); len(toks) > i && toks[i].word == "couple" {
		if len(toks) > i+1 && toks[i+1].word == "of" {
			return 2, i + 2, true
		}
		return 2, i + 1, true
	}
	if n, ok := numberWords[toks[0].word]; ok {
		if n >= 20 && n%10 == 0 && len(toks) > 1 && toks[1].start == toks[0].end+1 && (toks[1].before == ' ' || toks[1].before == '-') {
			if u := numberWords[toks[1].word]; u <= 9 && numberWord(toks[1].word) {
				return n + u, 2, true
			}
		}
		return n, 1, true
	}
	if len(toks[0].word) <= 3 {
		if n, ok := digits(toks[0].word); ok && n >= 1 {
			return n, 1, true
		}
	}
	return 0, 0, false
}

// skipWord is toks without its first word when that is w.
func skipWord(toks []timeTok, w string) []timeTok {
	if len(toks) > 0 && toks[0].word == w {
		return toks[1:]
	}
	return toks
}

// unitStart is the start of the calendar unit containing t.
func unitStart(t time.Time, u timeUnit) time.Time {
	switch u {
	case unitWeek:
		return day(t, -(int(t.Weekday())+6)%7)
	case unitMonth:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, t.Location())
	case unitYear:
		return time.Date(t.Year(), time.January, 1, 0, 0, 0, 0, t.Location())
	}
	return day(t, 0)
}

// addUnits moves a unit start by n units.
func addUnits(t time.Time, u timeUnit, n int) time.Time {
	switch u {
	case unitWeek:
		return t.AddDate(0, 0, 7*n)
	case unitMonth:
		return t.AddDate(0, n, 0)
	case unitYear:
		return t.AddDate(n, 0, 0)
	}
	return t.AddDate(0, 0, n)
}

func matchDayBeforeYesterday(toks []timeTok, at time.Time) (int, time.Time, time.Time, bool) {
	if wordsAre(toks, "the", "day", "before", "yesterday") {
		return 4, day(at, -2), day(at, -1), true
	}
	return 0, time.Time{}, time.Time{}, false
}

func matchDayWords(toks []timeTok, at time.Time) (int, time.Time, time.Time, bool) {
	switch {
	case wordsAre(toks, "earlier", "today"):
		return 2, day(at, 0), day(at, 1), true
	case wordsAre(toks, "today"):
		return 1, day(at, 0), day(at, 1), true
	case wordsAre(toks, "yesterday"):
		if len(toks) > 1 {
			if from, to, ok := partOfDay(toks[1].word); ok {
				d := day(at, -1)
				return 2, d.Add(from), d.Add(to), true
			}
		}
		return 1, day(at, -1), day(at, 0), true
	}
	return 0, time.Time{}, time.Time{}, false
}

// partOfDay is the span of a part of a day, from midnight.
func partOfDay(w string) (time.Duration, time.Duration, bool) {
	switch w {
	case "morning":
		return 0, 12 * time.Hour, true
	case "afternoon":
		return 12 * time.Hour, 18 * time.Hour, true
	case "evening":
		return 18 * time.Hour, 24 * time.Hour, true
	}
	return 0, 0, false
}

func matchPartOfDay(toks []timeTok, at time.Time) (int, time.Time, time.Time, bool) {
	d := day(at, 0)
	switch {
	case wordsAre(toks, "tonight"):
		return 1, d.Add(18 * time.Hour), day(at, 1), true
	case wordsAre(toks, "last", "night"):
		return 2, day(at, -1).Add(18 * time.Hour), d.Add(6 * time.Hour), true
	case len(toks) >= 2 && toks[0].word == "this":
		if from, to, ok := partOfDay(toks[1].word); ok {
			return 2, d.Add(from), d.Add(to), true
		}
	}
	return 0, time.Time{}, time.Time{}, false
}

// fewUnits is how far back "a few" units reach: from 2 units back to this
// many (a few days: 2..7 days back).
var fewUnits = map[timeUnit]int{unitDay: 7, unitWeek: 4, unitMonth: 6, unitYear: 5}

// clockUnits are the units "ago" reads back from at itself, not from a
// calendar unit's start: "two hours ago", "ten minutes ago".
var clockUnits = map[string]time.Duration{"hour": time.Hour, "hours": time.Hour, "minute": time.Minute, "minutes": time.Minute}

// clockAgo is the range of lo to hi clock units ago (one number: lo ==
// hi): from twice hi to half lo back from at. A time told in hours or
// minutes is a round figure ("two hours ago" for one 80 minutes or 3
// hours back), and the turn's time is when it ended, a little after it
// was said.
func clockAgo(at time.Time, unit time.Duration, lo, hi int) (time.Time, time.Time) {
	return at.Add(-2 * time.Duration(hi) * unit), at.Add(-time.Duration(lo) * unit / 2)
}

func matchUnitsAgo(toks []timeTok, at time.Time) (int, time.Time, time.Time, bool) {
	// "a few days ago", "several days ago": few is the unit's index.
	few := 0
	switch {
	case wordsAre(toks, "a", "few"):
		few = 2
	case wordsAre(toks, "several"):
		few = 1
	}
	if few > 0 {
		if len(toks) < few+2 || toks[few+1].word != "ago" || !strings.HasSuffix(toks[few].word, "s") {
			return 0, time.Time{}, time.Time{}, false
		}
		if unit, ok := clockUnits[toks[few].word]; ok {
			// "a few hours ago": 2 to 7 of them, as a few days.
			since, until := clockAgo(at, unit, 2, fewUnits[unitDay])
			return few + 2, since, until, true
		}
		u, ok := units[toks[few].word]
		if !ok {
			return 0, time.Time{}, time.Time{}, false
		}
		start := unitStart(at, u)
		return few + 2, addUnits(start, u, -fewUnits[u]), addUnits(start, u, -1), true
	}
	n, used, ok := count(toks)
	if !ok || len(toks) < used+2 || toks[used+1].word != "ago" {
		return 0, time.Time{}, time.Time{}, false
	}
	if unit, ok := clockUnits[toks[used].word]; ok {
		since, until := clockAgo(at, unit, n, n)
		return used + 2, since, until, true
	}
	u, ok := units[toks[used].word]
	if !ok {
		return 0, time.Time{}, time.Time{}, false
	}
	since := addUnits(unitStart(at, u), u, -n)
	return used + 2, since, addUnits(since, u, 1), true
}

func matchRolling(toks []timeTok, at time.Time) (int, time.Time, time.Time, bool) {
	i := 0
	if wordsAre(toks, "the") {
		i = 1
	}
	if len(toks) < i+2 || (toks[i].word != "last" && toks[i].word != "past") {
		return 0, time.Time{}, time.Time{}, false
	}
	i++
	n, used, ok := count(toks[i:])
	theLast := false
	if (toks[i].word == "few" || toks[i].word == "several") && len(toks) > i+1 && strings.HasSuffix(toks[i+1].word, "s") {
		// "the past few days", "the last several weeks": as many units
		// back as "a few days ago" reaches.
		if u, isUnit := units[toks[i+1].word]; isUnit {
			n, used, ok = fewUnits[u], 1, true
			// "the last few days before the move", "the last few weeks
			// at my old job": the end of something else, as "the last
			// week" before them.
			if toks[i-1].word == "last" && len(toks) > i+2 && lastOfWords[toks[i+2].word] && blank(toks[i+2].gap) {
				return 0, time.Time{}, time.Time{}, false
			}
		}
	}
	if !ok {
		// "the past week", "in the last week": one unit back, rolling;
		// "last week" is calendar.
		theLast = i == 2 && toks[1].word == "last"
		if toks[i-1].word != "past" && !theLast {
			return 0, time.Time{}, time.Time{}, false
		}
		n, used = 1, 0
	}
	if len(toks) < i+used+1 {
		return 0, time.Time{}, time.Time{}, false
	}
	if theLast && len(toks) > i+1 && lastOfWords[toks[i+1].word] && blank(toks[i+1].gap) {
		// "the last week before the launch", "the last month in Spain":
		// the end of something else.
		return 0, time.Time{}, time.Time{}, false
	}
	if len(toks) > i+used+1 && toks[i+used+1].word == "of" {
		// "the last hour of the party", "the past two weeks of the trip":
		// part of something, not a time back from now.
		return 0, time.Time{}, time.Time{}, false
	}
	end := day(at, 1)
	if w := toks[i+used].word; w == "hour" || w == "hours" {
		// Hours roll from at itself: "the last 24 hours" at 09:00 reaches
		// back to yesterday 09:00.
		return i + used + 1, at.Add(-time.Duration(n) * time.Hour), end, true
	}
	u, ok := units[toks[i+used].word]
	if !ok {
		return 0, time.Time{}, time.Time{}, false
	}
	// Clamped: "the past month" on March 31 reaches back to February's
	// last day, not to March 3 (AddDate's overflow of February 31).
	return i + used + 1, addUnitsClamped(day(at, 0), u, -n), end, true
}

// lastOfWords after "the last <unit>" make it the end of something else
// ("the last week before the launch"), not a span back from at.
var lastOfWords = map[string]bool{"before": true, "after": true, "in": true, "at": true, "on": true, "of": true}

// matchWeekend reads "the|this past weekend".
func matchWeekend(toks []timeTok, at time.Time) (int, time.Time, time.Time, bool) {
	week := unitStart(at, unitWeek)
	switch {
	case wordsAre(toks, "the", "past", "weekend"), wordsAre(toks, "this", "past", "weekend"):
		// The last weekend that ended before at's day: the previous week's,
		// on a Sunday too (the current one has not ended).
		sat := day(week, -2)
		return 3, sat, day(sat, 2), true
	}
	return 0, time.Time{}, time.Time{}, false
}

// matchEarlierThis reads "earlier this week|month|year".
func matchEarlierThis(toks []timeTok, at time.Time) (int, time.Time, time.Time, bool) {
	if len(toks) < 3 || !wordsAre(toks, "earlier", "this") {
		return 0, time.Time{}, time.Time{}, false
	}
	u, ok := units[toks[2].word]
	if !ok || u == unitDay || strings.HasSuffix(toks[2].word, "s") {
		return 0, time.Time{}, time.Time{}, false
	}
	since, until := unitStart(at, u), day(at, 0)
	if !until.After(since) {
		// The unit's first day: all there is of it so far.
		until = day(at, 1)
	}
	return 3, since, until, true
}

// matchSince reads "since <expression>": from the expression's start to the
// end of at's day.
func matchSince(toks []timeTok, at time.Time) (int, time.Time, time.Time, bool) {
	if len(toks) < 2 || toks[0].word != "since" {
		return 0, time.Time{}, time.Time{}, false
	}
	// Only a space between: "since, may I ask", "since. May ..." and a
	// line break are two sentences' words.
	if toks[1].start != toks[0].end+1 || (toks[1].before != ' ' && toks[1].before != '\t') {
		return 0, time.Time{}, time.Time{}, false
	}
	rest, end := toks[1:min(len(toks), 1+sinceReach)], day(at, 1)
	var buf [1 + sinceReach]timeTok
	withPrep := append(buf[:0], timeTok{})
	withPrep = append(withPrep, rest...)
	for _, sm := range sinceMatchers {
		sub := rest
		if sm.capitalOrYear && rest[0].word == "may" && !rest[0].capital && !(len(rest) > 1 && isYear(rest[1].word)) {
			continue
		}
		if sm.prep != "" {
			withPrep[0] = timeTok{word: sm.prep}
			sub = withPrep
		}
		n, since, _, ok := sm.matcher(sub, at)
		if sm.prep != "" {
			n--
		}
		if ok && n > 0 && since.Before(end) {
			return 1 + n, since, end, true
		}
	}
	return 0, time.Time{}, time.Time{}, false
}

func matchThisLast(toks []timeTok, at time.Time) (int, time.Time, time.Time, bool) {
	if len(toks) < 2 || (toks[0].word != "this" && toks[0].word != "last") {
		return 0, time.Time{}, time.Time{}, false
	}
	back := 0
	if toks[0].word == "last" {
		back = -1
	}
	if toks[1].word == "weekend" {
		sat := day(unitStart(at, unitWeek), 5+7*back)
		return 2, sat, day(sat, 2), true
	}
	u, ok := units[toks[1].word]
	if !ok || u == unitDay || strings.HasSuffix(toks[1].word, "s") {
		return 0, time.Time{}, time.Time{}, false
	}
	if len(toks) > 2 && toks[2].word == "of" {
		// "the last week of April" (matchPartOfMonth), "the last month
		// of the trip": part of something else, not at's week or month.
		return 0, time.Time{}, time.Time{}, false
	}
	since := addUnits(unitStart(at, u), u, back)
	return 2, since, addUnits(since, u, 1), true
}

// matchBeforeLast reads "[the] week|month|year|weekend before last": the
// calendar unit two before at's (the weekend before last weekend). Not
// when a word of a time follows "last" ("the week before last Monday":
// the week before that Monday, which directed reads).
func matchBeforeLast(toks []timeTok, at time.Time) (int, time.Time, time.Time, bool) {
	i := 0
	if wordsAre(toks, "the") {
		i = 1
	}
	if len(toks) < i+3 || toks[i+1].word != "before" || toks[i+2].word != "last" {
		return 0, time.Time{}, time.Time{}, false
	}
	if len(toks) > i+3 && blank(toks[i+3].gap) {
		w := toks[i+3].word
		if _, unit := units[w]; unit || properTimeWord(w) || w == "weekend" || w == "night" || w == "christmas" {
			return 0, time.Time{}, time.Time{}, false
		}
	}
	n := i + 3
	if toks[i].word == "weekend" {
		sat := day(unitStart(at, unitWeek), 5-14)
		return n, sat, day(sat, 2), true
	}
	u, ok := units[toks[i].word]
	if !ok || u == unitDay || strings.HasSuffix(toks[i].word, "s") {
		return 0, time.Time{}, time.Time{}, false
	}
	since := addUnits(unitStart(at, u), u, -2)
	return n, since, addUnits(since, u, 1), true
}

// weekOrdinals are the weeks of a month matchPartOfMonth reads (-1: the
// last seven days).
var weekOrdinals = map[string]int{"first": 1, "second": 2, "third": 3, "fourth": 4, "last": -1}

// matchPartOfMonth reads part of a named month: "[the] first|second|third|
// fourth|last week of <month>" (its days 1-7, 8-14, 15-21, 22-28, or its
// last seven), "early|mid|late <month>" and "mid-<month>" (days 1-10,
// 11-20, 21 to the end), each with an optional year after the month as
// for a month ("late March 2025", "the last week of April last year");
// after "early", "mid" or "late" the month is capitalised or has its year.
// Without a year it is the most recent such part that has begun by at.
func matchPartOfMonth(toks []timeTok, at time.Time) (int, time.Time, time.Time, bool) {
	i := 0
	if wordsAre(toks, "the") {
		i = 1
	}
	var first, last int // days of the month; last 0: its end
	var week int
	switch {
	case len(toks) >= i+4 && toks[i+1].word == "week" && toks[i+2].word == "of" && weekOrdinals[toks[i].word] != 0 &&
		blank(toks[i+1].gap) && blank(toks[i+2].gap) && blank(toks[i+3].gap):
		week = weekOrdinals[toks[i].word]
		if week > 0 {
			first, last = 7*(week-1)+1, 7*week
		}
		i += 3
	case i == 0 && len(toks) >= 2 && (toks[0].word == "early" || toks[0].word == "mid" || toks[0].word == "late"):
		// Only a space or a hyphen between ("mid-May", "a late-May
		// trip"): "I'm late, May." and "I got there early. May said" are
		// a name after a clause.
		if !blank(toks[1].gap) && toks[1].gap != "-" {
			return 0, time.Time{}, time.Time{}, false
		}
		switch toks[0].word {
		case "early":
			first, last = 1, 10
		case "mid":
			first, last = 11, 20
		default:
			first = 21
		}
		i = 1
	default:
		return 0, time.Time{}, time.Time{}, false
	}
	// After "week of" a month name is one ("the first week of may");
	// after "early", "mid" or "late" only capitalised or with its year
	// ("I'll be late, may I leave?"), and not before a pronoun ("late May
	// I ask").
	m, ok := monthAt(toks[i:], week != 0 || (len(toks) > i+1 && isYear(toks[i+1].word)))
	if !ok {
		return 0, time.Time{}, time.Time{}, false
	}
	if len(toks) > i+1 && blank(toks[i+1].gap) {
		if _, day := dayOfMonth(toks[i+1]); day && !isYear(toks[i+1].word) {
			// "I was late May 3rd": a date follows, not part of May.
			return 0, time.Time{}, time.Time{}, false
		}
		switch toks[i+1].word {
		case "i", "we", "you", "he", "she", "they":
			return 0, time.Time{}, time.Time{}, false
		}
	}
	y, n, ok := yearAfter(toks[i+1:], at)
	if !ok {
		return 0, time.Time{}, time.Time{}, false
	}
	part := func(y int) (time.Time, time.Time) {
		start := time.Date(y, m, 1, 0, 0, 0, 0, at.Location())
		end := start.AddDate(0, 1, 0)
		switch {
		case week < 0:
			return end.AddDate(0, 0, -7), end
		case last > 0:
			return start.AddDate(0, 0, first-1), start.AddDate(0, 0, last)
		}
		return start.AddDate(0, 0, first-1), end
	}
	if n == 0 {
		y = at.Year()
		if since, _ := part(y); since.After(at) {
			y--
		}
	}
	since, until := part(y)
	return i + 1 + n, since, until, true
}

func matchWeekday(toks []timeTok, at time.Time) (int, time.Time, time.Time, bool) {
	// "on Monday", "last Monday", or "Monday" alone ("what did I say
	// Monday?": as "on Monday", where ParseTime takes it for one,
	// bareWeekday): i is the weekday's index.
	i := 0
	if len(toks) > 1 && (toks[0].word == "on" || toks[0].word == "last") {
		i = 1
	}
	if i >= len(toks) {
		return 0, time.Time{}, time.Time{}, false
	}
	wd, ok := weekdays[toks[i].word]
	if !ok {
		return 0, time.Time{}, time.Time{}, false
	}
	back := (int(at.Weekday()) - int(wd) + 7) % 7
	if back == 0 && toks[0].word == "last" {
		back = 7
	}
	if len(toks) > i+1 {
		night := toks[i+1].word == "night"
		from, to, ok := partOfDay(toks[i+1].word)
		if night {
			from, ok = 18*time.Hour, true
		}
		if ok {
			// The part of at's own day that has not begun yet ("on Monday
			// evening" asked on Monday morning) is last week's.
			if back == 0 && day(at, 0).Add(from).After(at) {
				back = 7
			}
			d := day(at, -back)
			if night {
				return i + 2, d.Add(from), day(d, 1).Add(6 * time.Hour), true
			}
			return i + 2, d.Add(from), d.Add(to), true
		}
	}
	d := day(at, -back)
	return i + 1, d, day(d, 1), true
}

// matchISODate reads "[on] 2026-11-18" and "2026/11/18": year, month and
// day joined by one "-" or "/" each.
func matchISODate(toks []timeTok, at time.Time) (int, time.Time, time.Time, bool) {
	i := 0
	if len(toks) > 0 && toks[0].word == "on" {
		i = 1
	}
	if len(toks) < i+3 {
		return 0, time.Time{}, time.Time{}, false
	}
	y, ok := yearAt(toks[i:], at)
	if !ok {
		return 0, time.Time{}, time.Time{}, false
	}
	sep := toks[i+1].before
	for k := i + 1; k <= i+2; k++ {
		if toks[k].before != sep || toks[k].start != toks[k-1].end+1 || len(toks[k].word) > 2 {
			return 0, time.Time{}, time.Time{}, false
		}
	}
	if sep != '-' && sep != '/' {
		return 0, time.Time{}, time.Time{}, false
	}
	m, ok := digits(toks[i+1].word)
	if !ok || m < 1 || m > 12 {
		return 0, time.Time{}, time.Time{}, false
	}
	d, ok := digits(toks[i+2].word)
	if !ok || d < 1 {
		return 0, time.Time{}, time.Time{}, false
	}
	since := time.Date(y, time.Month(m), d, 0, 0, 0, 0, at.Location())
	if since.Day() != d {
		return 0, time.Time{}, time.Time{}, false
	}
	return i + 3, since, day(since, 1), true
}

// monthAt reads a month name at toks[0]; a bare one (no preposition before,
// told by prep) must be capitalised.
func monthAt(toks []timeTok, prep bool) (time.Month, bool) {
	if len(toks) == 0 {
		return 0, false
	}
	m, ok := months[toks[0].word]
	if !ok || (!prep && !toks[0].capital) {
		return 0, false
	}
	return m, true
}

// isYear reports whether w is four digits.
func isYear(w string) bool {
	_, ok := digits(w)
	return ok && len(w) == 4
}

// digits reads a short run of ASCII digits (callers bound the length), without
// strconv's allocation for the words that are not numbers.
func digits(w string) (int, bool) {
	n := 0
	for i := 0; i < len(w); i++ {
		if w[i] < '0' || w[i] > '9' {
			return 0, false
		}
		n = n*10 + int(w[i]-'0')
	}
	return n, w != ""
}

// dayOfMonth reads "3", "3rd", "03".
func dayOfMonth(t timeTok) (int, bool) {
	w := t.word
	for _, suf := range []string{"st", "nd", "rd", "th"} {
		w, _ = strings.CutSuffix(w, suf)
	}
	if len(w) == 0 || len(w) > 2 {
		return 0, false
	}
	n, ok := digits(w)
	return n, ok && n >= 1 && n <= 31
}

// yearAt reads a year from 1970 up to at's year.
func yearAt(toks []timeTok, at time.Time) (int, bool) {
	if len(toks) == 0 || len(toks[0].word) != 4 {
		return 0, false
	}
	y, ok := digits(toks[0].word)
	return y, ok && y >= 1970 && y <= at.Year()
}

// yearAfter reads the year that may follow a month, a date or Christmas at
// the start of toks: a year from 1970 up to at's ("May 2024", "March 3,
// 2024"), or "[of] last|this year" after a space or ", " ("in March last
// year", "on 3 May of this year"; not "in March. Last year ..."). n is the
// words it used, 0 when none follows; ok is false when it cannot be read: a
// four-digit number out of that range or "next year", which would
// otherwise leave the expression read as another year's.
func yearAfter(toks []timeTok, at time.Time) (y, n int, ok bool) {
	if len(toks) > 0 && isYear(toks[0].word) {
		y, ok := yearAt(toks, at)
		return y, 1, ok
	}
	if len(toks) > 1 && toks[0].word == "of" && isYear(toks[1].word) && blank(toks[0].gap) && blank(toks[1].gap) {
		// "in May of 2024", "on May 3rd of 2024".
		y, ok := yearAt(toks[1:], at)
		return y, 2, ok
	}
	rest := skipWord(toks, "of")
	i := len(toks) - len(rest)
	if len(rest) < 2 || rest[1].word != "year" || (!blank(toks[0].gap) && toks[0].gap != ", ") ||
		(i > 0 && !blank(rest[0].gap)) || !blank(rest[1].gap) {
		return 0, 0, true
	}
	switch rest[0].word {
	case "last":
		return at.Year() - 1, i + 2, true
	case "this":
		return at.Year(), i + 2, true
	case "next":
		return 0, 0, false
	}
	return 0, 0, true
}

// matchDate reads "[on] [the] 3[rd] [of] March [year]" and "[on] March
// [the] 3[rd] [year]", the year as yearAfter reads it.
func matchDate(toks []timeTok, at time.Time) (int, time.Time, time.Time, bool) {
	i, prep := 0, false
	if len(toks) > 0 && toks[0].word == "on" {
		i, prep = 1, true
	}
	var (
		d  int
		m  time.Month
		ok bool
	)
	j := i
	if len(toks) > j && toks[j].word == "the" {
		j++
	}
	if len(toks) > j {
		d, ok = dayOfMonth(toks[j])
	}
	if ok {
		j++
		if len(toks) > j && toks[j].word == "of" {
			j++
		}
		// A day first needs no capital: "3 march" is not a near miss.
		m, ok = monthAt(toks[j:], true)
		j++
	} else {
		j = i
		if m, ok = monthAt(toks[j:], prep); !ok {
			return 0, time.Time{}, time.Time{}, false
		}
		j++
		if len(toks) > j && toks[j].word == "the" {
			j++
		}
		if len(toks) <= j {
			return 0, time.Time{}, time.Time{}, false
		}
		d, ok = dayOfMonth(toks[j])
		j++
	}
	if !ok {
		return 0, time.Time{}, time.Time{}, false
	}
	y, n, ok := yearAfter(toks[j:], at)
	if !ok {
		return 0, time.Time{}, time.Time{}, false
	}
	if n > 0 {
		since := time.Date(y, m, d, 0, 0, 0, 0, at.Location())
		if since.Day() != d {
			return 0, time.Time{}, time.Time{}, false
		}
		return j + n, since, day(since, 1), true
	}
	today := day(at, 0)
	for y := at.Year(); y > at.Year()-8; y-- {
		since := time.Date(y, m, d, 0, 0, 0, 0, at.Location())
		if since.Day() == d && !since.After(today) {
			return j, since, day(since, 1), true
		}
	}
	return 0, time.Time{}, time.Time{}, false
}

// matchMonth reads "in|during|last <month> [year]" and "<Month> <year>",
// the year as yearAfter reads it.
func matchMonth(toks []timeTok, at time.Time) (int, time.Time, time.Time, bool) {
	if len(toks) < 2 {
		return 0, time.Time{}, time.Time{}, false
	}
	first := toks[0].word
	if first == "last" || first == "in" || first == "during" {
		m, ok := monthAt(toks[1:], true)
		if !ok {
			return 0, time.Time{}, time.Time{}, false
		}
		y, n, ok := yearAfter(toks[2:], at)
		if !ok {
			return 0, time.Time{}, time.Time{}, false
		}
		if n > 0 {
			since := time.Date(y, m, 1, 0, 0, 0, 0, at.Location())
			return 2 + n, since, since.AddDate(0, 1, 0), true
		}
		y = at.Year()
		if m > at.Month() || (first == "last" && m == at.Month()) {
			y--
		}
		since := time.Date(y, m, 1, 0, 0, 0, 0, at.Location())
		return 2, since, since.AddDate(0, 1, 0), true
	}
	m, ok := monthAt(toks, false)
	if !ok {
		return 0, time.Time{}, time.Time{}, false
	}
	y, n, ok := yearAfter(toks[1:], at)
	if !ok || n == 0 {
		return 0, time.Time{}, time.Time{}, false
	}
	since := time.Date(y, m, 1, 0, 0, 0, 0, at.Location())
	return 1 + n, since, since.AddDate(0, 1, 0), true
}

func matchYear(toks []timeTok, at time.Time) (int, time.Time, time.Time, bool) {
	if len(toks) < 2 || (toks[0].word != "in" && toks[0].word != "during") {
		return 0, time.Time{}, time.Time{}, false
	}
	y, ok := yearAt(toks[1:], at)
	if !ok {
		return 0, time.Time{}, time.Time{}, false
	}
	since := time.Date(y, time.January, 1, 0, 0, 0, 0, at.Location())
	return 2, since, since.AddDate(1, 0, 0), true
}

func matchChristmas(toks []timeTok, at time.Time) (int, time.Time, time.Time, bool) {
	if len(toks) < 2 || toks[1].word != "christmas" {
		return 0, time.Time{}, time.Time{}, false
	}
	strict := false
	switch toks[0].word {
	case "last":
		strict = true
	case "at", "on", "over":
	default:
		return 0, time.Time{}, time.Time{}, false
	}
	n, d := 2, 25
	if len(toks) > 2 && toks[2].word == "eve" {
		n, d = 3, 24
	}
	y, used, ok := yearAfter(toks[n:], at)
	if !ok {
		return 0, time.Time{}, time.Time{}, false
	}
	if used > 0 {
		since := time.Date(y, time.December, d, 0, 0, 0, 0, at.Location())
		return n + used, since, day(since, 1), true
	}
	today := day(at, 0)
	since := time.Date(at.Year(), time.December, d, 0, 0, 0, 0, at.Location())
	if since.After(today) || (strict && since.Equal(today)) {
		since = since.AddDate(-1, 0, 0)
	}
	return n, since, day(since, 1), true
}

// talkWords are words a question about a time asks with but that say
// nothing to search for ("what did we talk about yesterday?"): once a time
// expression is found, they are dropped from the keywords with it.
var talkWords = map[string]bool{
	"talk": true, "talked": true, "talking": true, "discuss": true, "discussed": true, "discussing": true,
	"chat": true, "chatted": true, "chatting": true, "mention": true, "mentioned": true, "speak": true,
	"spoke": true, "spoken": true, "write": true, "wrote": true, "written": true, "happen": true,
	"happened": true, "talks": true, "conversation": true, "conversations": true,
	// Asking for a recollection ("remind me what I said yesterday", "give
	// me a recap of last week", "what topics came up?"): a walk found each
	// searched for, matching nothing in the range, and the fallback to all
	// time then bringing back an item that said "remind" months before.
	"remind": true, "reminded": true, "recap": true, "recaps": true, "summarize": true, "summarise": true,
	"summarized": true, "summarised": true, "summary": true, "share": true, "shared": true, "give": true,
	"topic": true, "topics": true, "came": true, "else": true, "important": true, "mind": true,
	"discussion": true, "discussions": true, "anything": true, "something": true,
}

// timeKeywords are the search keywords of a message once its time
// expression e is removed: Keywords of the rest, without stop words and
// talkWords. It is empty (never nil) when nothing else is asked: the
// message is about a time only.
func timeKeywords(message string, e TimeExpr) []string {
	out, _ := timeKeywordsOf(message, e)
	return out
}

// timeKeywordsOf is timeKeywords, and the set it capped when the cap cut
// it (keywords).
func timeKeywordsOf(message string, e TimeExpr) ([]string, *keywordSet) {
	ks, over, _ := timeRest(message, e)
	return ks, over
}

// timeRest is timeKeywordsOf, and whether the rest only greets, thanks or
// acknowledges (no keywords at all: "good morning, how are you today?"),
// which makes the time small talk, not a question about it.
func timeRest(message string, e TimeExpr) (asked []string, over *keywordSet, smallTalk bool) {
	return timeRestNamed(message, e, shortNames(message))
}

// timeRestNamed is timeRest given the message's short names (shortNames),
// which enrich has read already. They are the whole message's: without
// the expression, "Jo" of "Yesterday Jo called" would start its sentence.
func timeRestNamed(message string, e TimeExpr, named map[string]bool) (asked []string, over *keywordSet, smallTalk bool) {
	rest := message[:e.Start] + " " + message[e.End:]
	ks, over, _ := keywordsNamed(rest, named)
	// No keywords from words ("Yesterday?" leaves none at all): only
	// greeting words were there.
	asked = withoutGreeting(askedWords(ks, named))
	// A closing's "else" asks nothing ("thanks, nothing else for today!"),
	// but the other talkWords do: "topics discussed last week?", "came up
	// yesterday?" ask about the time in few words, as "what did we
	// discuss ...?" does. They are not searched for (asked), but they
	// make a question of the message.
	said := withoutGreeting(slices.DeleteFunc(slices.Clone(ks), func(k string) bool { return (IsStopWord(k) && !named[k]) || k == "else" }))
	if strings.ContainsFunc(rest, isCJK) {
		// The same for Chinese, Japanese and Korean: 何を話しましたか
		// asks about the time alone, 今日はありがとう thanks.
		marked := cjkMarked(rest, cjkTalkLists, cjkGreetLists)
		talk, greet := marked[0], marked[1]
		asked = slices.DeleteFunc(asked, func(k string) bool { return talk[k] })
		said = slices.DeleteFunc(said, func(k string) bool { return greet[k] })
	}
	asks := false
	if l, words := euRestLang(rest, euLangs[e.lang]); l != nil {
		// The same for the European languages: "Was habe ich letzte Woche
		// gesagt?" asks about the time alone, "Merci pour aujourd'hui"
		// thanks; "Guten Morgen!" greets.
		greeting := func(ks []string, i int) bool {
			return l.greetParts[ks[i]] && (i > 0 && l.greetParts[ks[i-1]] || i+1 < len(ks) && l.greetParts[ks[i+1]])
		}
		kept := asked[:0:0]
		for i, k := range asked {
			if !l.grammar[k] && !l.talk[k] && !l.greet[k] && !greeting(asked, i) {
				kept = append(kept, k)
			}
		}
		asked = kept
		said = slices.DeleteFunc(said, func(k string) bool { return l.grammar[k] || l.greet[k] || l.greetParts[k] })
		// The words themselves: keywords leaves out those that are
		// English stop words ("Was war letzten Dienstag?").
		asks = slices.ContainsFunc(words, func(w string) bool { return l.asking[w] })
	}
	return asked, over, len(said) == 0 && strings.ContainsFunc(rest, unicode.IsLetter) &&
		!asks && !asksOfTheUser(rest) && !asksTheTime(message, e) && !asksToRecall(rest)
}

// asksToRecall reports whether rest holds one of recallWords, which
// keywords leaves out.
func asksToRecall(rest string) bool {
	for w := range strings.FieldsFuncSeq(strings.ToLower(rest), func(r rune) bool { return !unicode.IsLetter(r) }) {
		if recallWords[w] {
			return true
		}
	}
	return false
}

// followWords may join a time asked about alone ("ok, and yesterday?",
// "thanks. then last week?").
var followWords = map[string]bool{"and": true, "or": true, "also": true, "then": true, "so": true, "but": true,
	"what": true,
	// and, or, also, then in German, French, Spanish, Italian,
	// Portuguese and Dutch: "Und gestern?", "¿Y ayer?", "En gisteren?".
	"und": true, "oder": true, "auch": true, "dann": true, "et": true, "ou": true, "aussi": true, "puis": true,
	"y": true, "o": true, "también": true, "e": true, "anche": true, "poi": true, "também": true, "en": true,
	"of": true, "ook": true, "dan": true}

// asksTheTime reports whether the clause holding e (from the last comma,
// sentence end or line break before it to the next after it) ends in a
// question mark and holds nothing but e and followWords: "ok, and
// yesterday?" asks about yesterday, though an acknowledgement is the rest
// of the message, while in "how are you today?" the time is part of a
// greeting.
func asksTheTime(message string, e TimeExpr) bool {
	isEnd := func(r rune) bool { return strings.ContainsRune(",.;:!?\n，。！？；：—–", r) }
	before := message[:e.Start]
	if i := strings.LastIndexFunc(before, isEnd); i >= 0 {
		_, n := utf8.DecodeRuneInString(before[i:])
		before = before[i+n:]
	}
	after := message[e.End:]
	end := strings.IndexFunc(after, isEnd)
	if end < 0 {
		return false
	}
	// The run of punctuation that ends it holds a question mark ("?",
	// "!?", "?!").
	run := after[end:]
	if i := strings.IndexFunc(run, func(r rune) bool { return !strings.ContainsRune("?!？！.", r) }); i >= 0 {
		run = run[:i]
	}
	if !strings.ContainsAny(run, "?？") {
		return false
	}
	for _, w := range strings.FieldsFunc(strings.ToLower(before+" "+after[:end]), func(r rune) bool { return !unicode.IsLetter(r) }) {
		if !followWords[w] {
			return false
		}
	}
	return true
}

// greetWords greet, thank or acknowledge and say nothing else, unlike
// the other phatic words ("great", "perfect", "sense"), which a question
// may be about.
var greetWords = map[string]bool{"hi": true, "hey": true, "hello": true, "thanks": true, "thank": true, "thx": true,
	"cheers": true, "bye": true, "goodbye": true, "okay": true, "yeah": true, "yep": true, "yup": true}

// withoutGreeting is ks without the words that greet or thank ("good
// morning! what did we talk about yesterday?" asks about yesterday, not
// about mornings; greetWords, and "good" before a part of the day): the rest of a timed message is searched within the
// time's range, where a greeting's words would only narrow it.
func withoutGreeting(ks []string) []string {
	good := goodPartOfDay(len(ks), func(i int) string { return ks[i] })
	out := ks[:0:0]
	for _, k := range ks {
		if !greetWords[k] && !(good && (k == "good" || partsOfDay[k])) {
			out = append(out, k)
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// askingWords ask about the user's past rather than greet: a question word
// other than "how" ("how are you?", "how was your day?"), the first person,
// "about". "Great, what did I do yesterday?" or "thanks! what about last
// week?" ask about the time, though the rest's words are all stop words
// beside an acknowledgement.
var askingWords = map[string]bool{"what": true, "what's": true, "whats": true, "which": true, "where": true, "who": true,
	"whom": true, "whose": true, "when": true, "why": true, "i": true, "me": true, "my": true, "mine": true, "we": true,
	"us": true, "our": true, "about": true, "remind": true, "remember": true, "anything": true, "something": true,
	"recap": true, "summary": true, "summarize": true, "summarise": true}

// asksOfTheUser reports whether the rest of a timed message holds one of
// the askingWords, or of cjkAskingWords.
func asksOfTheUser(rest string) bool {
	if strings.ContainsFunc(rest, isCJK) && slices.ContainsFunc(cjkAskingWords, func(w string) bool { return strings.Contains(rest, w) }) {
		return true
	}
	for _, w := range strings.FieldsFunc(strings.ToLower(rest), func(r rune) bool { return !unicode.IsLetter(r) && r != '\'' }) {
		if askingWords[strings.Trim(w, "'")] {
			return true
		}
	}
	return false
}

// askedWords are ks without stop words and talkWords (never nil); a
// short word of named (shortNames of the text ks are from) is no stop
// word.
func askedWords(ks []string, named map[string]bool) []string {
	out := []string{}
	for _, k := range ks {
		if (!IsStopWord(k) || named[k]) && !talkWords[k] {
			out = append(out, k)
		}
	}
	return out
}
