package enricher_test

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// A Wednesday: last week is 9..16 November, yesterday 17 November.
var timeAt = time.Date(2026, time.November, 18, 15, 30, 0, 0, time.UTC)

// seedThreeDates gives alice an item two weeks ago, one last week and one
// yesterday; the first two are about the kitchen.
func seedThreeDates(t *testing.T, st *store.Store) {
	insertContext(t, st,
		store.ContextWrite{UserID: "alice", Question: "Which tiles for the kitchen?", Answer: "White ones.", CreatedAt: time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC), EventID: "two-weeks-ago"},
		store.ContextWrite{UserID: "alice", Question: "Which paint for the kitchen?", Answer: "Pale blue.", CreatedAt: time.Date(2026, 11, 11, 9, 0, 0, 0, time.UTC), EventID: "last-week"},
		store.ContextWrite{UserID: "alice", Question: "Where is the garden party?", Answer: "At Tom's.", CreatedAt: time.Date(2026, 11, 17, 9, 0, 0, 0, time.UTC), EventID: "yesterday"},
	)
}

func eventIDs(items []events.ContextItem) []string {
	out := []string{}
	for _, c := range items {
		out = append(out, c.EventID)
	}
	return out
}

func TestEnrichTimeExpressions(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	seedThreeDates(t, st)
	zero := 0.0
	tests := []struct {
		name      string
		msg       string
		threshold *float64
		want      []string
		keywords  []string
	}{
		// A time alone: the range's items, newest first, score 1.
		{"time only", "What did I say last week?", nil, []string{"last-week"}, []string{}},
		{"talk about", "what did we talk about yesterday?", nil, []string{"yesterday"}, []string{}},
		// Keywords within the range: the older kitchen item is left out.
		{"keywords in range", "what about the kitchen last week", &zero, []string{"last-week"}, []string{"kitchen"}},
		// Nothing in the range: the search without the range, with the
		// keywords less the time words (they said when, not what).
		{"fallback", "what about the kitchen yesterday", &zero, []string{"last-week", "two-weeks-ago"}, []string{"kitchen"}},
		// A time alone whose range is empty: nothing.
		{"time only, empty range", "what did I say in May", &zero, []string{}, []string{}},
		// No expression: as before.
		{"no time", "what about the kitchen", &zero, []string{"last-week", "two-weeks-ago"}, []string{"kitchen"}},
		// Small talk, with or without a time word: nothing searched
		// (before: yesterday's items for "good", "evening", or the items
		// holding "other" and "one").
		{"greeting with a time", "Good evening! How was your day yesterday?", &zero, []string{}, []string{}},
		{"stop words only", "and what about the other one?", &zero, []string{}, []string{}},
		// An acknowledgement before a question about a time: the time is
		// read (before: nothing, the rest's words being stop words).
		{"thanks, then a time question", "Great, what did I do yesterday?", nil, []string{"yesterday"}, []string{}},
		{"thanks, what about a time", "thanks! what about yesterday?", nil, []string{"yesterday"}, []string{}},
		// A time asked about alone after an acknowledgement (before: small
		// talk, nothing).
		{"ok, and a time", "ok, and yesterday?", nil, []string{"yesterday"}, []string{}},
		{"thanks, a time", "Thanks! Last week?", nil, []string{"last-week"}, []string{}},
		{"a dash, then a time", "thanks — and yesterday?", nil, []string{"yesterday"}, []string{}},
		{"a time, then ?!", "ok, and yesterday!?", nil, []string{"yesterday"}, []string{}},
		{"a time in a greeting's question", "thanks, and you today?", &zero, []string{}, []string{}},
		// A greeting before it: its words are not searched within the day
		// (before: "good", "morning" found nothing of yesterday).
		{"greeting, then a time question", "good morning! what did we talk about yesterday?", nil, []string{"yesterday"}, []string{}},
		// Asking for a recollection: the range's items (before: "remind",
		// "recap", "anything" searched, nothing in the range, and the
		// fallback brought back any item saying them).
		{"remind me", "remind me what I said yesterday", nil, []string{"yesterday"}, []string{}},
		{"a recap", "give me a recap of last week", nil, []string{"last-week"}, []string{}},
		{"greeting, then anything", "good morning! anything from yesterday?", nil, []string{"yesterday"}, []string{}},
		// A closing that names a time asks nothing.
		{"a closing", "thanks, nothing else from yesterday!", &zero, []string{}, []string{}},
		// Few words, all of talk: a question still ("topics discussed
		// ...?" was taken for small talk, and got nothing).
		{"talk words alone", "topics discussed yesterday?", nil, []string{"yesterday"}, []string{}},
	}
	for _, tt := range tests {
		r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: tt.msg, At: timeAt, Threshold: tt.threshold})
		if r.Degraded {
			t.Fatalf("%s: degraded: %s", tt.name, r.Reason)
		}
		if got := eventIDs(r.Context); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %q found %q, want %q", tt.name, tt.msg, got, tt.want)
		}
		if !slices.Equal(r.Keywords, tt.keywords) {
			t.Errorf("%s: keywords %q, want %q", tt.name, r.Keywords, tt.keywords)
		}
	}
	// A time-only message's items score 1 and are newest first.
	r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: "what happened this month", At: timeAt})
	if got := eventIDs(r.Context); !slices.Equal(got, []string{"yesterday", "last-week", "two-weeks-ago"}) {
		t.Errorf("this month: %q, want newest first", got)
	}
	for _, c := range r.Context {
		if c.Score != 1 {
			t.Errorf("time-only item %s scored %v, want 1", c.EventID, c.Score)
		}
	}
	// Hours ago, back from at itself: bob's turn of 13:40 is "two hours
	// ago" at 15:30, the one of 15:20 and this morning's are not.
	insertContext(t, st,
		store.ContextWrite{UserID: "bob", Question: "A quick soup?", Answer: "Miso.", CreatedAt: timeAt.Add(-110 * time.Minute), EventID: "two-hours-ago"},
		store.ContextWrite{UserID: "bob", Question: "And a bread?", Answer: "Focaccia.", CreatedAt: timeAt.Add(-10 * time.Minute), EventID: "just-now"},
		store.ContextWrite{UserID: "bob", Question: "Coffee?", Answer: "Black.", CreatedAt: timeAt.Add(-8 * time.Hour), EventID: "this-morning"},
	)
	r = enrich(t, h, events.EnrichRequest{UserID: "bob", Message: "what did I ask two hours ago?", At: timeAt})
	if got := eventIDs(r.Context); !slices.Equal(got, []string{"two-hours-ago"}) || len(r.Keywords) != 0 {
		t.Errorf("two hours ago: %q (keywords %q), want the turn of 13:40 alone", got, r.Keywords)
	}
}

// TestEnrichTimeOnlyCoversTheRange: a question about a day alone gets turns
// from across the day, not its last ones: before, "what did we talk about
// yesterday?" after a day of a dozen turns got the five newest, from its
// last hour, the goodbye first.
func TestEnrichTimeOnlyCoversTheRange(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	day := time.Date(2026, 11, 17, 8, 0, 0, 0, time.UTC) // yesterday at timeAt
	topics := []string{"the plumber's quote", "a birthday gift for Rui", "the train to Porto", "my knee pain", "the garden fence",
		"a cheap flight to Rome", "the tax form", "a new running shoe", "the school play", "a pasta recipe", "the car's tyres"}
	var ws []store.ContextWrite
	for i, topic := range topics {
		ws = append(ws, store.ContextWrite{UserID: "carla", Question: "Can you help with " + topic + "?", Answer: "Sure: here is what I would check first about " + topic + ", then the options.",
			CreatedAt: day.Add(time.Duration(i) * time.Hour), EventID: "t" + strconv.Itoa(i)})
	}
	ws = append(ws, store.ContextWrite{UserID: "carla", Question: "Thanks, bye!", Answer: "Bye, have a good evening!",
		CreatedAt: day.Add(12 * time.Hour), EventID: "goodbye"})
	insertContext(t, st, ws...)
	r := enrich(t, h, events.EnrichRequest{UserID: "carla", Message: "what did we talk about yesterday?", At: timeAt})
	got := eventIDs(r.Context)
	if len(got) != events.DefaultMaxResults {
		t.Fatalf("%d items %q, want %d", len(got), got, events.DefaultMaxResults)
	}
	if slices.Contains(got, "goodbye") {
		t.Errorf("items %q hold the day's goodbye", got)
	}
	first, last := r.Context[len(r.Context)-1].CreatedAt, r.Context[0].CreatedAt
	if first.Hour() >= 11 || last.Hour() < 16 {
		t.Errorf("items %q run from %s to %s: not across the day (08:00 to 20:00)", got, first.Format("15:04"), last.Format("15:04"))
	}
	for i := 1; i < len(r.Context); i++ {
		if !r.Context[i].CreatedAt.Before(r.Context[i-1].CreatedAt) {
			t.Errorf("items %q are not newest first", got)
		}
	}
}

// kayakTrips is user's n short turns about kayaking ("small0" the newest,
// an hour apart before timeAt) and one long trip log ("big", a minute
// before timeAt) that says "kayaking" most and does not fit the default
// token budget.
func kayakTrips(user string, n int) []store.ContextWrite {
	var ws []store.ContextWrite
	for i := range n {
		ws = append(ws, store.ContextWrite{UserID: user, Question: "Where should I go kayaking, trip " + strconv.Itoa(i) + "?", Answer: "Try the river.",
			CreatedAt: timeAt.Add(-time.Duration(i+1) * time.Hour), EventID: "small" + strconv.Itoa(i)})
	}
	return append(ws, store.ContextWrite{UserID: user, Question: "kayaking kayaking kayaking: my whole trip log",
		Answer: strings.Repeat("We paddled along the coast and camped. ", 280), CreatedAt: timeAt.Add(-time.Minute), EventID: "big"})
}

// TestEnrichOversizedItemLeavesItsPlace: an item too large for the budget
// leaves its place among max_results to the next: a walk's user with one
// long turn about kayaking among seven short ones got two items of three.
func TestEnrichOversizedItemLeavesItsPlace(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	insertContext(t, st, kayakTrips("dana", 7)...)
	for _, n := range []int{0, 2, 4} {
		req := events.EnrichRequest{UserID: "dana", Message: "kayaking", At: timeAt}
		want := events.DefaultMaxResults
		if n > 0 {
			req.MaxResults, want = &n, n
		}
		r := enrich(t, h, req)
		got := eventIDs(r.Context)
		if len(got) != want || slices.Contains(got, "big") {
			t.Errorf("max_results %d: items %q, want %d small ones (the big one does not fit %d tokens)", n, got, want, r.Tokens)
		}
	}
	// A user with more candidates than come with their texts (40): the
	// reserves' texts are read only for the request whose budget drops
	// the big one.
	insertContext(t, st, kayakTrips("erik", 40)...)
	zero := 0.0 // a word all 41 hold scores low
	r := enrich(t, h, events.EnrichRequest{UserID: "erik", Message: "kayaking", At: timeAt, Threshold: &zero})
	if got := eventIDs(r.Context); len(got) != events.DefaultMaxResults || slices.Contains(got, "big") {
		t.Errorf("40 candidates: items %q, want %d small ones", got, events.DefaultMaxResults)
	}
	for _, c := range r.Context {
		if c.Question == "" || c.Answer == "" {
			t.Errorf("40 candidates: item %s injected without its text", c.EventID)
		}
	}
	// With room for it, the big one ranks first.
	budget := 20000
	r = enrich(t, h, events.EnrichRequest{UserID: "dana", Message: "kayaking", At: timeAt, MaxTokens: &budget})
	if got := eventIDs(r.Context); len(got) != events.DefaultMaxResults || got[0] != "big" {
		t.Errorf("max_tokens %d: items %q, want the big one first of %d", budget, got, events.DefaultMaxResults)
	}
}

// TestEnrichPlanForATimeToCome: "what am I doing this weekend?" asked on a
// Friday found nothing: the weekend to come was read as a range, which
// holds no memory yet. A range yet to come is no range, and the message's
// words find the plan told on Tuesday.
func TestEnrichPlanForATimeToCome(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	friday := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	insertContext(t, st,
		store.ContextWrite{UserID: "lena", Question: "I'm hiking in the Harz with Tom this weekend, any tips?", Answer: "Take layers and check the trail map.",
			CreatedAt: friday.AddDate(0, 0, -3), EventID: "plan"},
		store.ContextWrite{UserID: "lena", Question: "What should I cook for dinner?", Answer: "A risotto.", CreatedAt: friday.Add(-time.Hour), EventID: "other"},
	)
	r := enrich(t, h, events.EnrichRequest{UserID: "lena", Message: "what am I doing this weekend?", At: friday})
	if got := eventIDs(r.Context); !slices.Equal(got, []string{"plan"}) {
		t.Errorf("items %q (keywords %q), want the plan", got, r.Keywords)
	}
}

func TestSearchSinceUntil(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	seedThreeDates(t, st)
	day := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }
	tests := []struct {
		since, until time.Time
		want         []string
	}{
		{time.Time{}, time.Time{}, []string{"last-week", "two-weeks-ago"}},
		{day(9), day(16), []string{"last-week"}},
		{day(9), time.Time{}, []string{"last-week"}},
		{time.Time{}, day(11), []string{"two-weeks-ago"}},
		{day(12), day(20), []string{}},
	}
	for _, tt := range tests {
		r, err := h.client.Search(ctxT(t), events.SearchRequest{UserID: "alice", Query: "kitchen", Since: tt.since, Until: tt.until})
		if err != nil {
			t.Fatal(err)
		}
		if got := eventIDs(r.Results); !slices.Equal(got, tt.want) {
			t.Errorf("search since %v until %v: %q, want %q", tt.since, tt.until, got, tt.want)
		}
	}
	bad := []struct{ body, want string }{
		{`{"user_id":"u","query":"x","since":"2026-11-10T00:00:00Z","until":"2026-11-09T00:00:00Z"}`, "since 2026-11-10T00:00:00Z is not before until"},
		{`{"user_id":"u","query":"x","since":"2026-11-10T00:00:00Z","until":"2026-11-10T00:00:00Z"}`, "is not before until"},
		{`{"user_id":"u","query":"x","since":"0001-01-02T00:00:00Z"}`, "since: year 1"},
		{`{"user_id":"u","query":"x","until":"1969-12-31T00:00:00Z"}`, "until: year 1969"},
		{`{"user_id":"u","query":"x","until":"last week"}`, "until: must be RFC 3339"},
		{`{"user_id":"u","query":"x","since":"2026-02-30T00:00:00Z"}`, "since: must be RFC 3339"},
		{`{"user_id":"u","query":"x","since":"2026-11-10T00:00:00Z","Until":"2026-11-11"}`, "until: must be RFC 3339"},
		// Go's zero time, what a serialiser without omitzero sends for an
		// unset bound, is year 1, not an open bound.
		{`{"user_id":"u","query":"x","until":"0001-01-01T00:00:00Z"}`, "until: year 1 (UTC) is out of range"},
		{`{"user_id":"u","query":"x","since":"0001-01-01T00:00:00Z"}`, "since: year 1 (UTC) is out of range"},
		{`{"user_id":"u","query":"x","since":"0001-01-01T00:00:00Z","until":"2026-11-10T00:00:00Z"}`, "since: year 1 (UTC) is out of range"},
		// RFC 3339 offsets' hours are 00..23.
		{`{"user_id":"u","query":"x","since":"2026-11-10T00:00:00+24:00"}`, "since: UTC offset +24:00 is out of range"},
		{`{"user_id":"u","query":"x","until":"2026-11-10T00:00:00-24:00"}`, "until: UTC offset -24:00 is out of range"},
		// And their minutes 00..59.
		{`{"user_id":"u","query":"x","since":"2026-11-10T00:00:00+01:60"}`, "since: UTC offset +01:60 is out of range (RFC 3339 minutes are 00..59)"},
	}
	for _, b := range bad {
		code, desc := errorCode(t, h.raw(t, h.prefix+".search.u", []byte(b.body)))
		if code != 400 || !strings.Contains(desc, b.want) {
			t.Errorf("search %s: %d %q, want 400 containing %q", b.body, code, desc, b.want)
		}
	}
	// null is absent, an open bound; the largest offsets RFC 3339 allows
	// are accepted.
	for _, body := range []string{
		`{"user_id":"alice","query":"kitchen","since":null,"until":null}`,
		`{"user_id":"alice","query":"kitchen","since":"2026-11-01T00:00:00+23:59","until":"2026-11-20T00:00:00-23:59"}`,
	} {
		msg := h.raw(t, h.prefix+".search."+events.UserToken("alice"), []byte(body))
		if code, desc := errorCode(t, msg); code != 0 {
			t.Fatalf("search %s: %d %s", body, code, desc)
		}
		var r events.SearchReply
		if err := json.Unmarshal(msg.Data, &r); err != nil {
			t.Fatal(err)
		}
		if got := eventIDs(r.Results); !slices.Equal(got, []string{"last-week", "two-weeks-ago"}) {
			t.Errorf("search %s: %q, want both kitchen items", body, got)
		}
	}
}

// TestEnrichZeroAt: an enrich at Go's zero time is refused like any year out
// of range, as are +24:00 offsets; an absent or null at means now, and the
// Go client sends none when At is left unset (omitzero).
func TestEnrichZeroAt(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	subject := h.prefix + ".enrich." + events.UserToken("u")
	for _, b := range []struct{ body, want string }{
		{`{"user_id":"u","message":"what did I say today?","at":"0001-01-01T00:00:00Z"}`, "at: year 1 (UTC) is out of range"},
		{`{"user_id":"u","message":"x","at":"2026-11-29T12:00:00+24:00"}`, "at: UTC offset +24:00 is out of range"},
		{`{"user_id":"u","message":"x","at":"2026-11-29T12:00:00-24:30"}`, "at: UTC offset -24:30 is out of range"},
		{`{"user_id":"u","message":"x","at":"2026-11-29T12:00:00-05:60"}`, "at: UTC offset -05:60 is out of range"},
		// Another JSON type than a string names the format, not Go's method.
		{`{"user_id":"u","message":"x","at":5}`, "at: must be RFC 3339"},
		{`{"user_id":"u","message":"x","at":{"s":1}}`, "at: must be RFC 3339"},
		// The bad field is named (before: "times (at, since, until) must be").
		{`{"user_id":"u","message":"x","at":"yesterday"}`, "at: must be RFC 3339"},
		{`{"user_id":"u","message":"x","at":""}`, "at: must be RFC 3339"},
	} {
		code, desc := errorCode(t, h.raw(t, subject, []byte(b.body)))
		if code != 400 || !strings.Contains(desc, b.want) {
			t.Errorf("enrich %s: %d %q, want 400 containing %q", b.body, code, desc, b.want)
		}
	}
	for _, body := range []string{
		`{"user_id":"u","message":"x","at":null}`,
		`{"user_id":"u","message":"x"}`,
		`{"user_id":"u","message":"x","at":"2026-11-29T12:00:00+14:00"}`,
	} {
		if code, desc := errorCode(t, h.raw(t, subject, []byte(body))); code != 0 {
			t.Errorf("enrich %s: %d %q, want a reply", body, code, desc)
		}
	}
	body, err := json.Marshal(events.EnrichRequest{UserID: "u", Message: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(body), `"at"`) {
		t.Errorf("an unset At is sent: %s", body)
	}
	if r := enrich(t, h, events.EnrichRequest{UserID: "u", Message: "what did I say today?"}); r.Degraded {
		t.Errorf("enrich without at: degraded: %s", r.Reason)
	}
}

// TestEnrichEmptyRangeSkipsTimeWords: when the message's range holds
// nothing, the words that named the range are not searched for: an item
// that only says "today" or "this week" at another time is not injected as
// the answer to a question about today, while the other words of the
// message still find their match. Facts come whatever the items.
func TestEnrichEmptyRangeSkipsTimeWords(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	insertContext(t, st,
		store.ContextWrite{UserID: "carol", Question: "I ran my first half marathon today!", Answer: "Congratulations, that is a big milestone.", CreatedAt: time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC), EventID: "marathon"},
		store.ContextWrite{UserID: "carol", Question: "I started cello lessons this week.", Answer: "Enjoy the first scales.", CreatedAt: time.Date(2026, 5, 12, 9, 0, 0, 0, time.UTC), EventID: "cello"},
		store.ContextWrite{UserID: "carol", Question: "Which paint for the kitchen?", Answer: "Pale blue.", CreatedAt: time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC), EventID: "kitchen"},
	)
	upsertFacts(t, st, store.FactWrite{UserID: "carol", Key: "city", Value: "Lyon"})
	// A Sunday: nothing was said today or this week (from Monday 23).
	at := time.Date(2026, time.November, 29, 12, 0, 0, 0, time.UTC)
	zero := 0.0
	tests := []struct {
		msg      string
		want     []string
		keywords []string
	}{
		{"what did I say today?", []string{}, []string{}},
		{"what did I say this week?", []string{}, []string{}},
		{"what about the kitchen today?", []string{"kitchen"}, []string{"kitchen"}},
		{"which cello lessons did I mention the past weekend?", []string{"cello"}, []string{"cello", "lessons"}},
		// The range holds an item: it is the answer, as before.
		{"what did I say about paint in November?", []string{"kitchen"}, []string{"paint"}},
	}
	for _, tt := range tests {
		r := enrich(t, h, events.EnrichRequest{UserID: "carol", Message: tt.msg, At: at, Threshold: &zero})
		if r.Degraded {
			t.Fatalf("%q: degraded: %s", tt.msg, r.Reason)
		}
		if got := eventIDs(r.Context); !slices.Equal(got, tt.want) {
			t.Errorf("%q found %q, want %q", tt.msg, got, tt.want)
		}
		if !slices.Equal(r.Keywords, tt.keywords) {
			t.Errorf("%q: keywords %q, want %q", tt.msg, r.Keywords, tt.keywords)
		}
		if len(r.Facts) != 1 || r.Facts[0].Value != "Lyon" {
			t.Errorf("%q: facts %+v, want the city", tt.msg, r.Facts)
		}
	}
}

// TestEnrichCJKTimeExpressions: a question about a time in Japanese,
// Chinese or Korean reads the range's items, for a user of the default
// language (before: 昨日, 上周, 어제 and the question's grammar were
// searched as keywords across all time, so "what did we talk about
// yesterday?" found nothing of yesterday's, which did not say 昨日).
func TestEnrichCJKTimeExpressions(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	insertContext(t, st,
		store.ContextWrite{UserID: "yuki", Question: "台所のタイルは何色がいい？", Answer: "白がいいです。", CreatedAt: nov(3), EventID: "ja-two-weeks-ago"},
		store.ContextWrite{UserID: "yuki", Question: "台所のペンキは？", Answer: "薄い青です。", CreatedAt: nov(11), EventID: "ja-last-week"},
		store.ContextWrite{UserID: "yuki", Question: "庭のパーティーはどこ？", Answer: "トムの家で。", CreatedAt: nov(17), EventID: "ja-yesterday"},
		store.ContextWrite{UserID: "wei", Question: "北京的火车票买了吗？", Answer: "买了，周五出发。", CreatedAt: nov(11), EventID: "zh-last-week"},
		store.ContextWrite{UserID: "wei", Question: "推荐一家咖啡馆", Answer: "去三里屯那家。", CreatedAt: nov(17), EventID: "zh-yesterday"},
		store.ContextWrite{UserID: "minji", Question: "부산 여행 일정 짜줘", Answer: "첫날은 해운대.", CreatedAt: nov(11), EventID: "ko-last-week"},
		store.ContextWrite{UserID: "minji", Question: "저녁 메뉴 추천해줘", Answer: "김치찌개 어때요?", CreatedAt: nov(17), EventID: "ko-yesterday"},
	)
	checkTimedEnrich(t, h, []timedEnrichCase{
		{"yuki", "昨日何を話しましたか？", []string{"ja-yesterday"}, []string{}},
		{"yuki", "先週は何について話した？", []string{"ja-last-week"}, []string{}},
		{"yuki", "先週、台所について何を言いましたか？", []string{"ja-last-week"}, []string{"台所"}},
		// Nothing of the kitchen yesterday: every time's kitchen items.
		{"yuki", "昨日、台所について何を言いましたか？", []string{"ja-last-week", "ja-two-weeks-ago"}, []string{"台所"}},
		{"yuki", "今日はありがとう", []string{}, []string{}},
		{"wei", "我昨天说了什么？", []string{"zh-yesterday"}, []string{}},
		{"wei", "上周我们聊了什么？", []string{"zh-last-week"}, []string{}},
		{"minji", "어제 무슨 이야기를 했지?", []string{"ko-yesterday"}, []string{}},
		{"minji", "지난주에 뭐라고 했어?", []string{"ko-last-week"}, []string{}},
		// Talk words that stayed searched (말한, 啥): the range search
		// found nothing, and the fallback searched all time for them.
		{"minji", "일주일 전에 말한 거", []string{"ko-last-week"}, []string{}},
		{"wei", "昨天聊了啥", []string{"zh-yesterday"}, []string{}},
	})
}

// TestEnrichEuropeanTimeExpressions: German, French and Spanish questions
// about a time, from a user whose language is set (German) and from users
// who never set one (French, Spanish: English, whose stop words do not
// know their grammar), over real Postgres and NATS. Before, "Was habe ich
// letzte Woche gesagt?" searched "letzte", "woche" and "gesagt" across all
// time and found nothing of last week's.
func TestEnrichEuropeanTimeExpressions(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	if _, err := st.SetLanguage(ctxT(t), "anna", "de", "german"); err != nil {
		t.Fatal(err)
	}
	insertContext(t, st,
		store.ContextWrite{UserID: "anna", Question: "Welche Fliesen passen in die Küche?", Answer: "Weiße Fliesen.", CreatedAt: nov(3), EventID: "de-two-weeks-ago"},
		store.ContextWrite{UserID: "anna", Question: "Welche Farbe für die Küche?", Answer: "Ein helles Blau.", CreatedAt: nov(11), EventID: "de-last-week"},
		store.ContextWrite{UserID: "anna", Question: "Wo ist die Gartenparty?", Answer: "Bei Tom.", CreatedAt: nov(17), EventID: "de-yesterday"},
		store.ContextWrite{UserID: "luc", Question: "Un bon restaurant à Lyon ?", Answer: "Essaie le bouchon près de la gare.", CreatedAt: nov(11), EventID: "fr-last-week"},
		store.ContextWrite{UserID: "luc", Question: "Comment réparer mon vélo ?", Answer: "Change la chambre à air.", CreatedAt: nov(17), EventID: "fr-yesterday"},
		store.ContextWrite{UserID: "sofia", Question: "¿Qué libro me recomiendas?", Answer: "Cien años de soledad.", CreatedAt: nov(11), EventID: "es-last-week"},
		store.ContextWrite{UserID: "sofia", Question: "Receta de gazpacho", Answer: "Tomate, pepino y pimiento.", CreatedAt: nov(17), EventID: "es-yesterday"},
	)
	checkTimedEnrich(t, h, []timedEnrichCase{
		{"anna", "Was habe ich gestern gesagt?", []string{"de-yesterday"}, []string{}},
		{"anna", "Worüber haben wir letzte Woche gesprochen?", []string{"de-last-week"}, []string{}},
		{"anna", "Was habe ich letzte Woche über die Küche gesagt?", []string{"de-last-week"}, []string{"küche"}},
		{"anna", "vor zwei Wochen", []string{"de-two-weeks-ago"}, []string{}},
		{"anna", "Danke für heute!", []string{}, []string{}},
		{"luc", "Qu'est-ce que j'ai dit hier ?", []string{"fr-yesterday"}, []string{}},
		{"luc", "De quoi avons-nous parlé la semaine dernière ?", []string{"fr-last-week"}, []string{}},
		{"sofia", "¿Qué dije ayer?", []string{"es-yesterday"}, []string{}},
		{"sofia", "¿De qué hablamos la semana pasada?", []string{"es-last-week"}, []string{}},
		// The beginning and the middle of a month (days 1-10, 11-20).
		{"anna", "Was habe ich Anfang November gesagt?", []string{"de-two-weeks-ago"}, []string{}},
		{"luc", "De quoi avons-nous parlé à la mi-novembre ?", []string{"fr-yesterday", "fr-last-week"}, []string{}},
	})
}

// TestEnrichEuropeanGrammarIsNotSearched: a French user who never set a
// language (English stop words) asks about one thing; with the default
// threshold, only the item about it is injected. Before, "est", "que",
// "tu" and "mon" were searched too, and every French item holding them
// came along (a walk: 5 unrelated items, scores 0.40-0.62).
func TestEnrichEuropeanGrammarIsNotSearched(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	insertContext(t, st,
		store.ContextWrite{UserID: "camille", Question: "Mon vélo fait un bruit bizarre, qu'est-ce que c'est ?", Answer: "C'est sûrement la chaîne.", CreatedAt: nov(3), EventID: "velo"},
		store.ContextWrite{UserID: "camille", Question: "Qu'est-ce que tu penses de mon CV ?", Answer: "Il est clair et bien organisé.", CreatedAt: nov(5), EventID: "cv"},
		store.ContextWrite{UserID: "camille", Question: "Est-ce que tu connais une bonne recette de crêpes ?", Answer: "Oui, mon astuce est la bière.", CreatedAt: nov(7), EventID: "crepes"},
		store.ContextWrite{UserID: "camille", Question: "Qu'est-ce que je dois lire ?", Answer: "Tu pourrais lire mon roman préféré.", CreatedAt: nov(9), EventID: "lire"},
	)
	r := enrich(t, h, events.EnrichRequest{UserID: "camille", Message: "Qu'est-ce que tu sais de mon vélo ?", At: timeAt})
	if r.Degraded {
		t.Fatalf("degraded: %s", r.Reason)
	}
	if got := eventIDs(r.Context); !slices.Equal(got, []string{"velo"}) {
		t.Errorf("found %q (keywords %q), want only [velo]", got, r.Keywords)
	}
	if slices.ContainsFunc(r.Keywords, func(k string) bool { return k == "est" || k == "que" || k == "mon" }) {
		t.Errorf("keywords %q hold French grammar", r.Keywords)
	}
	// search too (before: all four, each holding est, que or mon); a
	// query of grammar alone is searched by its words.
	for query, want := range map[string][]string{
		"Qu'est-ce que tu sais de mon vélo ?": {"velo"},
		"qu'est-ce que c'est":                 {"velo", "lire", "crepes", "cv"},
	} {
		res, err := h.client.Search(ctxT(t), events.SearchRequest{UserID: "camille", Query: query})
		if err != nil {
			t.Fatal(err)
		}
		if got := eventIDs(res.Results); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
			t.Errorf("search %q: %q, want %q", query, got, want)
		}
	}
}

// timedEnrichCase is an enrich of msg by user: the context items it finds
// (in order, or in any order when there are several with anyOrder), and
// keywords, of which the reply's must hold one (none when empty).
type timedEnrichCase struct {
	user, msg string
	want      []string
	keywords  []string
}

// checkTimedEnrich runs each case at timeAt with threshold 0. Several
// items wanted are compared in any order.
func checkTimedEnrich(t *testing.T, h *harness, cases []timedEnrichCase) {
	t.Helper()
	zero := 0.0
	for _, tt := range cases {
		r := enrich(t, h, events.EnrichRequest{UserID: tt.user, Message: tt.msg, At: timeAt, Threshold: &zero})
		if r.Degraded {
			t.Fatalf("%q: degraded: %s", tt.msg, r.Reason)
		}
		got, want := eventIDs(r.Context), tt.want
		if len(want) > 1 {
			got, want = slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s %q found %q, want %q", tt.user, tt.msg, got, want)
		}
		kw := slices.DeleteFunc(slices.Clone(r.Keywords), func(k string) bool { return !slices.Contains(tt.keywords, k) })
		if len(tt.keywords) == 0 && len(r.Keywords) != 0 || len(tt.keywords) > 0 && len(kw) == 0 {
			t.Errorf("%s %q: keywords %q, want %q among them", tt.user, tt.msg, r.Keywords, tt.keywords)
		}
	}
}

// nov is 09:00 UTC on day d of November 2026, the month of timeAt.
func nov(d int) time.Time { return time.Date(2026, 11, d, 9, 0, 0, 0, time.UTC) }

// TestEnrichTimeQuestionFindsWhatWasToldAfter: a question about a day is
// answered by the turn that told of it the next day, and a turn of that
// day holding only the name asked about does not outrank it (a time walk
// on LoCoMo: "What movie did Joanna watch on 1 May, 2022?", told on 2 May;
// the range ended on 1 May, and its items were ranked by the range's own
// word frequencies, so "joanna" looked rare there).
func TestEnrichTimeQuestionFindsWhatWasToldAfter(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	day := func(d, h int) time.Time { return time.Date(2022, time.May, d, h, 0, 0, 0, time.UTC) }
	var seed []store.ContextWrite
	// Joanna is named all month, mostly without a movie.
	for d := 3; d <= 20; d++ {
		seed = append(seed, store.ContextWrite{UserID: "nate", Question: "Joanna says hi", Answer: "Say hi back to Joanna.", CreatedAt: day(d, 9), EventID: "hi-" + strconv.Itoa(d)})
	}
	seed = append(seed,
		store.ContextWrite{UserID: "nate", Question: "Joanna called me this morning", Answer: "How is she?", CreatedAt: day(1, 9), EventID: "called"},
		store.ContextWrite{UserID: "nate", Question: "Joanna watched a movie yesterday: Little Women", Answer: "Did she like it?", CreatedAt: day(2, 18), EventID: "told"},
	)
	insertContext(t, st, seed...)
	zero := 0.0
	r := enrich(t, h, events.EnrichRequest{UserID: "nate", Message: "What movie did Joanna watch on 1 May, 2022?", At: day(25, 12), Threshold: &zero})
	if got := eventIDs(r.Context); len(got) == 0 || got[0] != "told" {
		t.Errorf("the movie of 1 May, told on 2 May: found %q, want \"told\" first", got)
	}
	// Told in a range of its own, the answer is found in the range alone.
	r = enrich(t, h, events.EnrichRequest{UserID: "nate", Message: "What did Joanna do on 1 May, 2022?", At: day(25, 12), Threshold: &zero})
	if got := eventIDs(r.Context); len(got) == 0 || got[0] != "called" {
		t.Errorf("what Joanna did on 1 May: found %q, want \"called\" first", got)
	}
}

// TestEnrichTimeQuestionAtTheDefaultThreshold: a question about yesterday
// whose word the memory often says, at the default threshold, gets
// yesterday's item (a review: scored against the whole memory it fell under
// the threshold, and the search without the range answered with October's).
func TestEnrichTimeQuestionAtTheDefaultThreshold(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	day := func(m time.Month, d, h int) time.Time { return time.Date(2026, m, d, h, 0, 0, 0, time.UTC) }
	var seed []store.ContextWrite
	for d := 1; d <= 20; d++ {
		seed = append(seed, store.ContextWrite{UserID: "kim", Question: "Pizza night with the kids, pizza again " + strconv.Itoa(d), Answer: "Sounds fun " + strconv.Itoa(d), CreatedAt: day(time.October, d, 19), EventID: "old-" + strconv.Itoa(d)})
	}
	for d := 1; d <= 10; d++ {
		seed = append(seed, store.ContextWrite{UserID: "kim", Question: "Went running by the river " + strconv.Itoa(d), Answer: "Nice pace " + strconv.Itoa(d), CreatedAt: day(time.September, d, 8), EventID: "run-" + strconv.Itoa(d)})
	}
	seed = append(seed, store.ContextWrite{UserID: "kim", Question: "I had a mushroom pizza for dinner", Answer: "Yum.", CreatedAt: day(time.November, 20, 19), EventID: "yday"})
	insertContext(t, st, seed...)
	r := enrich(t, h, events.EnrichRequest{UserID: "kim", Message: "what pizza did I have yesterday?", At: day(time.November, 21, 9)})
	got := eventIDs(r.Context)
	if len(got) == 0 || got[0] != "yday" {
		t.Errorf("yesterday's pizza: found %q (keywords %q), want \"yday\" first", got, r.Keywords)
	}
}
