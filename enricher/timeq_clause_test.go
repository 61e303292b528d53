package enricher

import (
	"strings"
	"testing"
	"time"
)

// Realistic chat questions asked on Wednesday 2026-11-18 (a review's): a
// question about what is to come gets no range (the last such day or
// month would exclude what it asks for), an ordinary question about the
// past keeps its range. The nearest word that tells a time decides ("Will
// I see Anna on Friday?" is to come; "what did I say in May, and what
// will I do in June" is May).
func TestParseTimePastAndToCome(t *testing.T) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC)
	checkParseTime(t, at, []parseCase{
		// "her" is an object pronoun as often as a possessive.
		{"what did I tell her last week?", "2026-11-09", "2026-11-16", "last week"},
		{"I called her last Friday, what did she say?", "2026-11-13", "2026-11-14", "last Friday"},
		// Not plans: "next to", "next steps", a name; a word of the past
		// nearer than "going to".
		{"what did I do next to the lake in May?", "2026-05-01", "2026-06-01", "in May"},
		{"what were the next steps we agreed on Monday?", "2026-11-16", "2026-11-17", "on Monday"},
		{"what did Will say on Friday?", "2026-11-13", "2026-11-14", "on Friday"},
		{"what did I say in May about going to Spain?", "2026-05-01", "2026-06-01", "in May"},
		// A comma ends "the last week": what follows is not its end.
		{"in the last week, at home, what did I cook?", "2026-11-11", "2026-11-19", "the last week"},
		// A span of numbers after "between": one end is not the span.
		{"between 2 and 3 weeks ago", "", "", ""},

		// The past: ranges kept.
		{"what did I tell her last week?", "2026-11-09", "2026-11-16", "last week"},
		{"What did we talk about on Monday?", "2026-11-16", "2026-11-17", "on Monday"},
		{"what did I eat last Friday", "2026-11-13", "2026-11-14", "last Friday"},
		{"What did I say in May about going to Spain?", "2026-05-01", "2026-06-01", "in May"},
		{"what did you plan in May?", "2026-05-01", "2026-06-01", "in May"},
		{"Which books did I mention in the last week, besides Dune?", "2026-11-11", "2026-11-19", "the last week"},
		{"what did we discuss in the last week, and why?", "2026-11-11", "2026-11-19", "the last week"},
		{"what did I do the last 3 days", "2026-11-15", "2026-11-19", "the last 3 days"},
		{"who did I meet two weeks ago?", "2026-11-02", "2026-11-09", "two weeks ago"},
		{"what happened between 2 and 3 weeks ago", "", "", ""},
		{"what was I reading in March?", "2026-03-01", "2026-04-01", "in March"},
		{"what did we decide yesterday about the trip in May?", "2026-11-17", "2026-11-18", "yesterday"},
		{"what did I do the week of March 2nd?", "2026-03-02", "2026-03-09", "the week of March 2nd"},
		{"what did I do the week of March 2nd and how did it go?", "2026-03-02", "2026-03-09", "the week of March 2nd"},
		{"what did I tell Anna the week of March 2nd to do?", "2026-03-02", "2026-03-09", "the week of March 2nd"},
		{"what did I say last month?", "2026-10-01", "2026-11-01", "last month"},
		{"what did I buy in 2025?", "2025-01-01", "2026-01-01", "in 2025"},
		{"what did I say on March 3, 2024?", "2024-03-03", "2024-03-04", "on March 3, 2024"},
		{"Did I go running last weekend?", "2026-11-14", "2026-11-16", "last weekend"},
		{"what did I write this morning", "2026-11-18", "2026-11-18 12:00", "this morning"},
		{"where was I on Saturday?", "2026-11-14", "2026-11-15", "on Saturday"},
		{"What did we talk about in October? I will need it.", "2026-10-01", "2026-11-01", "in October"},
		{"How was the party on Saturday? Will is asking.", "2026-11-14", "2026-11-15", "on Saturday"},
		{"what did the last week at work look like", "", "", ""},
		{"what did I do in the last week, at work", "2026-11-11", "2026-11-19", "the last week"},
		// What is to come: no range.
		{"what am I doing on Friday?", "", "", ""},
		{"Will I see Anna on Friday?", "", "", ""},
		{"Will we have time on Saturday?", "", "", ""},
		{"WHAT WILL I DO ON FRIDAY", "", "", ""},
		{"Will the office be closed on Friday?", "", "", ""},
		{"Will I get paid on Friday?", "", "", ""},
		{"Should I get the car washed on Saturday?", "", "", ""},
		{"I'm going to Lisbon on Friday, any restaurant tips?", "", "", ""},
		{"I'm going to the dentist on Friday, remind me to floss", "", "", ""},
		{"Is the meeting next week on Monday or Tuesday?", "", "", ""},
		{"What will Dr. Jones say on Monday?", "", "", ""},
		{"what should I pack in December?", "", "", ""},
		{"what will I need in December?", "", "", ""},
		{"we'll be in Rome in December, what's good to see", "", "", ""},
		{"I'm excited, what are we doing on Saturday", "", "", ""},
		{"what are my plans for Sunday", "", "", ""},
		{"what's on tomorrow and on Friday", "", "", ""},
		{"I won't forget: what happens on Friday", "", "", ""},
	})
}

// Odd inputs around clause and expression boundaries must not panic.
func TestParseTimeClauseEdgesDoNotPanic(t *testing.T) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC)
	exprs := []string{"on Friday", "the last week", "the week of March 2nd", "in May", "last week",
		"the last 3 days", "2 and 3 weeks ago", "since the week of March 2nd", "between May 3rd and", "will", "going to", "'ll", "the last", "the week of", "week of May 3"}
	around := []string{"", " ", ".", "?", " .", ". ", "!?", ";", ",", " , ", "-", "'", "\u2019", "\t", "\n", " and", " to", " before", " . . ", "...", " Will", " going to", " the", " in"}
	n := 0
	for _, e := range exprs {
		for _, a := range around {
			for _, b := range around {
				for _, m := range []string{a + e + b, a + e + b + e, e + a + b, a + b + e, strings.ToUpper(a + e + b)} {
					n++
					func() {
						defer func() {
							if r := recover(); r != nil {
								t.Errorf("ParseTime(%q) panicked: %v", m, r)
							}
						}()
						ParseTime(m, at)
					}()
				}
			}
		}
	}
	for _, m := range []string{"", " ", ".", "?!", "the", "last", "the last", "week of", "of", "will", "Will", "going", "going to", "to", "'", "'ll", "won't", "the last week", "the last week ", "the last week.", "the last week before", "the last week,", "the week of May 3", "the week of May 3 to", "since the week of May 3"} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("ParseTime(%q) panicked: %v", m, r)
				}
			}()
			ParseTime(m, at)
		}()
	}
	t.Logf("%d messages", n)
}
