package enricher

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	// A Wednesday afternoon; the week started on Monday 16 November.
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC)
	d := func(s string) time.Time {
		v, err := time.Parse("2006-01-02 15:04", s)
		if err != nil {
			v, err = time.Parse("2006-01-02", s)
		}
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		msg          string
		since, until string // "" since: no expression
		expr         string // the words found
	}{
		{"what did I say yesterday?", "2026-11-17", "2026-11-18", "yesterday"},
		{"Yesterday I said something", "2026-11-17", "2026-11-18", "Yesterday"},
		{"what did we talk about today", "2026-11-18", "2026-11-19", "today"},
		{"you told me earlier today", "2026-11-18", "2026-11-19", "earlier today"},
		{"the day before yesterday we met", "2026-11-16", "2026-11-17", "the day before yesterday"},
		{"yesterday morning I ran", "2026-11-17", "2026-11-17 12:00", "yesterday morning"},
		{"yesterday evening", "2026-11-17 18:00", "2026-11-18", "yesterday evening"},
		{"this morning I had coffee", "2026-11-18", "2026-11-18 12:00", "this morning"},
		{"what did I eat this afternoon", "2026-11-18 12:00", "2026-11-18 18:00", "this afternoon"},
		{"plans for tonight", "2026-11-18 18:00", "2026-11-19", "tonight"},
		{"what did I dream last night", "2026-11-17 18:00", "2026-11-18 06:00", "last night"},
		{"What did I say last week?", "2026-11-09", "2026-11-16", "last week"},
		{"this week's plans", "2026-11-16", "2026-11-23", "this week"},
		{"last month", "2026-10-01", "2026-11-01", "last month"},
		{"this month", "2026-11-01", "2026-12-01", "this month"},
		{"books I read last year", "2025-01-01", "2026-01-01", "last year"},
		{"this year", "2026-01-01", "2027-01-01", "this year"},
		{"last weekend we hiked", "2026-11-14", "2026-11-16", "last weekend"},
		{"this weekend", "2026-11-21", "2026-11-23", "this weekend"},
		{"two years ago I moved", "2024-01-01", "2025-01-01", "two years ago"},
		{"3 days ago", "2026-11-15", "2026-11-16", "3 days ago"},
		{"a week ago", "2026-11-09", "2026-11-16", "a week ago"},
		{"a couple of months ago", "2026-09-01", "2026-10-01", "a couple of months ago"},
		{"twelve months ago", "2025-11-01", "2025-12-01", "twelve months ago"},
		{"in the last 3 days", "2026-11-15", "2026-11-19", "the last 3 days"},
		{"over the past two weeks", "2026-11-04", "2026-11-19", "the past two weeks"},
		{"the past month", "2026-10-18", "2026-11-19", "the past month"},
		{"on Monday", "2026-11-16", "2026-11-17", "on Monday"},
		{"on Wednesday", "2026-11-18", "2026-11-19", "on Wednesday"},
		{"last Wednesday", "2026-11-11", "2026-11-12", "last Wednesday"},
		{"last friday", "2026-11-13", "2026-11-14", "last friday"},
		{"what did I say in May", "2026-05-01", "2026-06-01", "in May"},
		{"in december", "2025-12-01", "2026-01-01", "in december"},
		{"in November", "2026-11-01", "2026-12-01", "in November"},
		{"last November", "2025-11-01", "2025-12-01", "last November"},
		{"during March 2024", "2024-03-01", "2024-04-01", "during March 2024"},
		{"back in June 2025", "2025-06-01", "2025-07-01", "in June 2025"},
		{"on 3 March", "2026-03-03", "2026-03-04", "on 3 March"},
		{"on the 3rd of March", "2026-03-03", "2026-03-04", "on the 3rd of March"},
		{"on March 3", "2026-03-03", "2026-03-04", "on March 3"},
		{"March 3, 2024", "2024-03-03", "2024-03-04", "March 3, 2024"},
		{"on 25 December", "2025-12-25", "2025-12-26", "on 25 December"},
		{"on 18 November", "2026-11-18", "2026-11-19", "on 18 November"},
		{"on 29 February", "2024-02-29", "2024-03-01", "on 29 February"},
		{"in 2024", "2024-01-01", "2025-01-01", "in 2024"},
		{"last Christmas", "2025-12-25", "2025-12-26", "last Christmas"},
		{"at Christmas Eve", "2025-12-24", "2025-12-25", "at Christmas Eve"},
		{"WHAT DID I SAY LAST WEEK", "2026-11-09", "2026-11-16", "LAST WEEK"},
		{"I watched Last Week Tonight last week", "2026-11-09", "2026-11-16", "last week"},
		// Near misses.
		{"I watched Last Week Tonight", "", "", ""},
		{"a week-long trip", "", "", ""},
		{"the last week-long trip", "", "", ""},
		{"may I ask something", "", "", ""},
		{"May I ask something", "", "", ""},
		{"March on!", "", "", ""},
		{"I may 2 things", "", "", ""},
		{"in 2030", "", "", ""},
		{"in 1200 years", "", "", ""},
		{"on 31 February", "", "", ""},
		{"weekly review", "", "", ""},
		{"my yesterday-themed playlist", "", "", ""},
		{"the week was long", "", "", ""},
		{"at 3 pm", "", "", ""},
		{"last weeks", "", "", ""},
		{"days ago", "", "", ""},
		{"in the yesterdays", "", "", ""},
		{"the Christmas tree", "", "", ""},
		{"", "", "", ""},
	}
	for _, c := range cases {
		e, ok := ParseTime(c.msg, at)
		if c.since == "" {
			if ok {
				t.Errorf("ParseTime(%q) = %v..%v %q, want no expression", c.msg, e.Since, e.Until, c.msg[e.Start:e.End])
			}
			continue
		}
		if !ok {
			t.Errorf("ParseTime(%q) found nothing, want %s..%s", c.msg, c.since, c.until)
			continue
		}
		if !e.Since.Equal(d(c.since)) || !e.Until.Equal(d(c.until)) || c.msg[e.Start:e.End] != c.expr {
			t.Errorf("ParseTime(%q) = [%v, %v) %q, want [%s, %s) %q", c.msg, e.Since, e.Until, c.msg[e.Start:e.End], c.since, c.until, c.expr)
		}
	}
}

// TestParseTimeZone: days are those of at's offset, not UTC's.
func TestParseTimeZone(t *testing.T) {
	tokyo := time.FixedZone("+09:00", 9*3600)
	at := time.Date(2026, time.November, 18, 1, 0, 0, 0, tokyo) // 17 November 16:00 UTC
	e, ok := ParseTime("yesterday", at)
	want := time.Date(2026, time.November, 17, 0, 0, 0, 0, tokyo)
	if !ok || !e.Since.Equal(want) || !e.Until.Equal(want.AddDate(0, 0, 1)) {
		t.Errorf("yesterday at %v = [%v, %v), want [%v, +1 day)", at, e.Since, e.Until, want)
	}
}

func TestTimeKeywords(t *testing.T) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC)
	cases := []struct {
		msg  string
		want []string
	}{
		{"what did I say last week?", []string{}},
		{"what did we talk about yesterday?", []string{}},
		{"what happened in May", []string{}},
		{"what did I say about the dentist last week", []string{"dentist"}},
		{"which week-long trip did I mention last week", []string{"week", "long", "trip"}},
		{"my sister's wedding two years ago", []string{"sister", "wedding"}},
	}
	for _, c := range cases {
		e, ok := ParseTime(c.msg, at)
		if !ok {
			t.Errorf("%q: no expression", c.msg)
			continue
		}
		if got := timeKeywords(c.msg, e); !slices.Equal(got, c.want) {
			t.Errorf("timeKeywords(%q) = %q, want %q", c.msg, got, c.want)
		}
	}
}

// BenchmarkParseTime: a typical message with an expression, and the
// largest message enrich accepts with none (every word is tried).
func BenchmarkParseTime(b *testing.B) {
	at := time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC)
	long := strings.Repeat("nothing about any time here at all ", 65536/35)
	for _, m := range []struct{ name, msg string }{
		{"short", "what did I say about the dentist last week?"},
		{"64KiB-none", long},
	} {
		b.Run(m.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ParseTime(m.msg, at)
			}
		})
	}
}

// FuzzParseTime: ParseTime splits words as Keywords does, and any message
// and at give either nothing or a non-empty range and offsets inside the
// message; removing them never panics.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"what did I say last week?", "on the 3rd of March, 2024", "a couple of days ago",
		"the last 999 years", "in May 1970", "\xff last \xfe week", "Last Week Tonight", "on 31 February", "3"} {
		f.Add(s, int64(1795016000))
	}
	f.Fuzz(func(t *testing.T, msg string, unix int64) {
		at := time.Unix(unix%(250000*86400*365), 0).UTC()
		if y := at.Year(); y < 1970 || y > 9999 {
			return
		}
		var got []string
		for _, tok := range timeTokens(msg) {
			got = append(got, tok.word)
		}
		if want := Words(msg); len(got)+len(want) > 0 && !slices.Equal(got, want) {
			t.Fatalf("timeTokens(%q) = %q, Words = %q", msg, got, want)
		}
		e, ok := ParseTime(msg, at)
		if !ok {
			return
		}
		if e.Start < 0 || e.End > len(msg) || e.Start >= e.End || !e.Since.Before(e.Until) {
			t.Fatalf("ParseTime(%q, %v) = %+v", msg, at, e)
		}
		_ = timeKeywords(msg, e)
	})
}
