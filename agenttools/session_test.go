package agenttools_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/agenttools"
)

// TestIdleHTTPSessionsEnd: a session its client never closes (a crashed
// agent, a script that does not DELETE it) is closed once idle for
// Config.SessionTimeout, so it does not hold a goroutine and memory until
// the process ends; its id is then 404.
func TestIdleHTTPSessionsEnd(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	url := serveHTTPConfig(t, agenttools.Config{Client: startEnricher(t), Keys: keys{"alice-key": "alice"},
		SessionTimeout: timeout, Logger: slog.New(slog.DiscardHandler)})
	// post also says when the request was sent and its answer read: the
	// server's idle time between two requests is at most the time from
	// sending the first to reading the second's answer.
	post := func(sid, body string) (resp *http.Response, sent, read time.Time) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer alice-key")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		sent = time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		resp.Body.Close()
		return resp, sent, time.Now()
	}
	// live opens a session and uses it. A 404 after requests that left it
	// idle for less than the timeout is the failure; one after a stall of
	// the machine between two of them (a second: a loaded CI machine
	// running this package with -race had them) proves nothing, and live
	// says to try again.
	live := func() (string, bool) {
		resp, sentInit, _ := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		sid := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != http.StatusOK || sid == "" {
			t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
		}
		_, sentNote, readNote := post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		resp, _, readList := post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		if resp.StatusCode == http.StatusOK {
			return sid, true
		}
		if resp.StatusCode == http.StatusNotFound && (readNote.Sub(sentInit) >= timeout || readList.Sub(sentNote) >= timeout) {
			t.Logf("the session was idle up to %v between requests (the machine stalled): trying again",
				max(readNote.Sub(sentInit), readList.Sub(sentNote)).Round(time.Millisecond))
			return "", false
		}
		t.Fatalf("tools/list on a live session: %d", resp.StatusCode)
		return "", false
	}
	sid, ok := live()
	for attempt := 2; !ok; attempt++ {
		if attempt > 5 {
			t.Fatal("no session stayed live from one request to the next: each time, the machine stalled for longer than the timeout between two of them")
		}
		sid, ok = live()
	}
	time.Sleep(4 * timeout) // idle past the timeout: the behaviour under test, no synchronisation
	if resp, _, _ := post(sid, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("tools/list on a session idle past SessionTimeout: %d, want 404 (the session was never closed)", resp.StatusCode)
	}
}

// TestSearchSaysWhenTruncated: when memoryd leaves lower-ranked results out
// of a search reply to fit the NATS payload limit, search_memory says so
// (truncated), so that an agent knows to ask again with a lower limit
// rather than take the few results for all there are.
func TestSearchSaysWhenTruncated(t *testing.T) {
	t.Parallel()
	s := mustConnect(t, startHTTP(t), "alice-key")
	for i := range 12 {
		var out struct{ Stored bool }
		call(t, s, "store_memory", map[string]any{"question": fmt.Sprintf("project alpha report number %d", i),
			"answer": strings.Repeat(fmt.Sprintf("alpha report details %d ", i), 9000)}, &out)
	}
	var out struct {
		Results   []struct{ ID int64 }
		Truncated bool
	}
	call(t, s, "search_memory", map[string]any{"query": "project alpha report", "limit": 12}, &out)
	if len(out.Results) == 12 || !out.Truncated {
		t.Fatalf("search of 12 items of ~200 KB: %d results, truncated %v; want fewer than 12 and truncated", len(out.Results), out.Truncated)
	}
}

// TestResultsStayWithinTheirBudget: search_memory and list_memories hold
// at most MaxResultBytes of memories' text (an audit's list of 200 real
// chat turns was 776 KB, about 190,000 tokens, in one tool result); the
// search says truncated, the list's next_cursor goes on after the last
// memory it kept, so paging still lists every memory once.
func TestResultsStayWithinTheirBudget(t *testing.T) {
	t.Parallel()
	s := mustConnect(t, startHTTP(t), "alice-key")
	const n, size = 30, 5000
	for i := range n {
		var out struct{ Stored bool }
		call(t, s, "store_memory", map[string]any{"question": fmt.Sprintf("garden plan part %d", i),
			"answer": strings.Repeat(fmt.Sprintf("tomatoes beans %03d ", i), size/19)}, &out)
	}
	var found struct {
		Results []struct {
			Question, Answer string
		}
		Truncated bool
	}
	call(t, s, "search_memory", map[string]any{"query": "garden plan", "limit": n}, &found)
	text := 0
	for _, r := range found.Results {
		text += len(r.Question) + len(r.Answer)
	}
	if text > agenttools.DefaultMaxResultBytes || len(found.Results) == 0 || !found.Truncated {
		t.Errorf("search of %d memories of %d bytes: %d results, %d bytes, truncated %v; want at most %d bytes and truncated",
			n, size, len(found.Results), text, found.Truncated, agenttools.DefaultMaxResultBytes)
	}
	seen := map[string]int{}
	cursor, pages := "", 0
	for {
		var page struct {
			Memories []struct {
				Question, Answer string
			}
			NextCursor string `json:"next_cursor"`
		}
		args := map[string]any{"limit": n}
		if cursor != "" {
			args["cursor"] = cursor
		}
		call(t, s, "list_memories", args, &page)
		pages++
		text := 0
		for _, m := range page.Memories {
			seen[m.Question]++
			text += len(m.Question) + len(m.Answer)
		}
		if text > agenttools.DefaultMaxResultBytes {
			t.Errorf("page %d holds %d bytes", pages, text)
		}
		if cursor = page.NextCursor; cursor == "" || pages > n {
			break
		}
	}
	if len(seen) != n || pages < 2 {
		t.Errorf("paging listed %d of %d memories in %d pages", len(seen), n, pages)
	}
	for q, k := range seen {
		if k != 1 {
			t.Errorf("%q listed %d times", q, k)
		}
	}
}

// TestSearchMemorySinceUntil: search_memory narrows to a time range, as the
// service's search does; a date is its whole day in UTC (models write
// "2026-11-30" for the end of November); a time that is neither is named.
func TestSearchMemorySinceUntil(t *testing.T) {
	t.Parallel()
	s := mustConnect(t, startHTTP(t), "alice-key")
	var stored struct{ Stored bool }
	call(t, s, "store_memory", map[string]any{"question": "which bulbs for the tulips?", "answer": "Darwin hybrids"}, &stored)
	// The dates are the memory's own day: the clock read before the store,
	// a store just past midnight UTC fell on the day after "today".
	var all struct {
		Results []struct {
			CreatedAt string `json:"created_at"`
		}
	}
	call(t, s, "search_memory", map[string]any{"query": "tulips"}, &all)
	if len(all.Results) != 1 {
		t.Fatalf("search_memory tulips: %d results, want 1", len(all.Results))
	}
	created, err := time.Parse(time.RFC3339, all.Results[0].CreatedAt)
	if err != nil {
		t.Fatal(err)
	}
	day := func(d int) string { return created.UTC().AddDate(0, 0, d).Format(time.DateOnly) }
	for _, tc := range []struct {
		args map[string]any
		want int
	}{
		{map[string]any{"query": "tulips"}, 1},
		{map[string]any{"query": "tulips", "since": "2020-01-01T00:00:00Z"}, 1},
		{map[string]any{"query": "tulips", "until": "2020-01-01T00:00:00Z"}, 0},
		{map[string]any{"query": "tulips", "since": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, 0},
		{map[string]any{"query": "tulips", "since": day(0), "until": day(0)}, 1},
		{map[string]any{"query": "tulips", "until": day(-1)}, 0},
		{map[string]any{"query": "tulips", "since": day(1)}, 0},
		{map[string]any{"query": "tulips", "since": "2020-01-01T00:00:00"}, 1},
	} {
		var out struct{ Results []struct{ ID int64 } }
		call(t, s, "search_memory", tc.args, &out)
		if len(out.Results) != tc.want {
			t.Errorf("search_memory %v: %d results, want %d", tc.args, len(out.Results), tc.want)
		}
	}
	if msg := toolError(t, s, "search_memory", map[string]any{"query": "tulips", "since": "last week"}); !strings.Contains(msg, `since "last week" is not an RFC 3339 time`) || !strings.Contains(msg, "nor a date") {
		t.Errorf("since of words: %q", msg)
	}
	// A range that holds nothing is refused in the words the model wrote:
	// the service named until "2023-05-01" as 2023-05-02T00:00:00Z, the
	// next day's start (an MCP walk: since 2023-05-02, until 2023-05-01
	// read "since 2023-05-02T00:00:00Z is not before until
	// 2023-05-02T00:00:00Z").
	for _, tc := range [][2]string{{day(1), day(0)}, {"2023-06-01", "2023-05-01"}, {"2023-05-01T00:00:00Z", "2023-05-01T00:00:00Z"}} {
		msg := toolError(t, s, "search_memory", map[string]any{"query": "tulips", "since": tc[0], "until": tc[1]})
		if want := fmt.Sprintf("since %q is not before until %q", tc[0], tc[1]); !strings.Contains(msg, want) {
			t.Errorf("since %s, until %s: %q, want it to say %q", tc[0], tc[1], msg, want)
		}
	}
}

// TestFactToolsNameTheKnownKeys: an agent's spelling of a key is the key
// extraction keeps current: "City" is location and "Favorite Color"
// favorite_color, in set_fact, get_fact and clear_fact (an audit's
// set_fact city=Porto stood beside the extracted location=Lisbon, and
// enrich injected both); a fact an earlier memoryd stored as written is
// still found and cleared by that spelling.
func TestFactToolsNameTheKnownKeys(t *testing.T) {
	t.Parallel()
	client := startEnricher(t)
	s := mustConnect(t, serveHTTP(t, client, keys{"alice-key": "alice"}), "alice-key")
	var f struct{ Key, Value string }
	call(t, s, "set_fact", map[string]any{"key": "City", "value": "Porto"}, &f)
	if f.Key != "location" {
		t.Errorf("set_fact City stored %q, want location", f.Key)
	}
	call(t, s, "set_fact", map[string]any{"key": " Favorite  Color ", "value": "green"}, &f)
	call(t, s, "get_fact", map[string]any{"key": "favorite_color"}, &f)
	if f.Value != "green" {
		t.Errorf("get_fact favorite_color: %+v", f)
	}
	call(t, s, "get_fact", map[string]any{"key": "current city"}, &f)
	if f.Key != "location" || f.Value != "Porto" {
		t.Errorf("get_fact 'current city': %+v, want location=Porto", f)
	}
	// The extractors' spelling of a key (review: "dateOfBirth" was stored
	// as dateofbirth, beside the extracted birthday).
	call(t, s, "set_fact", map[string]any{"key": "dateOfBirth", "value": "1990-04-02"}, &f)
	if f.Key != "birthday" {
		t.Errorf("set_fact dateOfBirth stored %q, want birthday", f.Key)
	}
	call(t, s, "get_fact", map[string]any{"key": "favorite.color"}, &f)
	if f.Value != "green" {
		t.Errorf("get_fact favorite.color: %+v", f)
	}
	var facts struct{ Facts []struct{ Key string } }
	call(t, s, "list_facts", map[string]any{}, &facts)
	if len(facts.Facts) != 3 {
		t.Errorf("facts %+v, want location, favorite_color and birthday", facts.Facts)
	}
	// An alias of a list key names the whole list: refused, so that
	// clear_fact "Cat" does not delete the dog too (review).
	call(t, s, "set_fact", map[string]any{"key": "pets", "value": "Rex (dog), Tom (cat)"}, &f)
	if msg := toolError(t, s, "clear_fact", map[string]any{"key": "Cat"}); !strings.Contains(msg, `"Cat" names the list pets`) {
		t.Errorf("clear_fact Cat: %q", msg)
	}
	if msg := toolError(t, s, "set_fact", map[string]any{"key": "daughter", "value": "Mia"}); !strings.Contains(msg, `"daughter" names the list children`) {
		t.Errorf("set_fact daughter: %q", msg)
	}
	call(t, s, "get_fact", map[string]any{"key": "pets"}, &f)
	if f.Value != "Rex (dog), Tom (cat)" {
		t.Errorf("pets after refused calls: %+v", f)
	}
	var cleared0 struct{ Deleted bool }
	call(t, s, "clear_fact", map[string]any{"key": "pets"}, &cleared0)
	call(t, s, "clear_fact", map[string]any{"key": "dateOfBirth"}, &cleared0)
	// Set as written, as an earlier memoryd's set_fact did.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.SetFact(ctx, "alice", "Shoe Size", "42"); err != nil {
		t.Fatal(err)
	}
	call(t, s, "get_fact", map[string]any{"key": "Shoe Size"}, &f)
	if f.Value != "42" {
		t.Errorf("get_fact of a key stored as written: %+v", f)
	}
	var cleared struct{ Deleted bool }
	for _, key := range []string{"CITY", "Shoe Size"} {
		call(t, s, "clear_fact", map[string]any{"key": key}, &cleared)
		if !cleared.Deleted {
			t.Errorf("clear_fact %q deleted nothing", key)
		}
	}
	call(t, s, "list_facts", map[string]any{}, &facts)
	if len(facts.Facts) != 1 || facts.Facts[0].Key != "favorite_color" {
		t.Errorf("after clearing CITY and Shoe Size: %+v", facts.Facts)
	}
}

// TestSetFactTakesANumberOrABoolean: a number or a boolean is stored as
// written ({"key": "age", "value": 34} is what models send: an MCP walk
// saw it refused as not a string); an object is still refused, naming
// what value takes.
func TestSetFactTakesANumberOrABoolean(t *testing.T) {
	t.Parallel()
	s := mustConnect(t, startHTTP(t), "alice-key")
	for _, tc := range []struct {
		key   string
		value any
		want  string
	}{
		{"age", 34, "34"},
		{"height_m", 1.75, "1.75"},
		{"has_car", true, "true"},
	} {
		var f fact
		call(t, s, "set_fact", map[string]any{"key": tc.key, "value": tc.value}, &f)
		got := fact{}
		call(t, s, "get_fact", map[string]any{"key": tc.key}, &got)
		if f.Value != tc.want || got.Value != tc.want {
			t.Errorf("set_fact %s=%v: set %q, get %q, want %q", tc.key, tc.value, f.Value, got.Value, tc.want)
		}
	}
	if msg := toolError(t, s, "set_fact", map[string]any{"key": "age", "value": map[string]any{"years": 34}}); !strings.Contains(msg, "value") {
		t.Errorf("set_fact with an object: %q, want it to name value", msg)
	}
}
