package enricher

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
)

// The benchmarks of fitting an oversized reply to the payload limit, as
// publish (list pages, search) and enrich (its token budget) do: replies
// near and over a megabyte of real-looking conversation text. Each
// reports encodes/op, the bytes the JSON encoder wrote per reply, in
// replies (1 is the reply encoded once).
//
// The turns are synthetic (benchTurnsSynthetic) and, when the LongMemEval
// dev set is at $MEMEVAL_DATA (default /work/shared/data; see its README,
// never copied into the repository), real: the /longmemeval variants,
// skipped without it.

// benchCorpora runs f on each corpus of turn texts.
func benchCorpora(b *testing.B, f func(b *testing.B, turns []string)) {
	b.Run("synthetic", func(b *testing.B) { f(b, benchTurnsSynthetic()) })
	b.Run("longmemeval", func(b *testing.B) {
		turns := benchTurnsLongMemEval(b)
		if len(turns) == 0 {
			b.Skip("no longmemeval-s-dev.json.gz in $MEMEVAL_DATA (default /work/shared/data)")
		}
		f(b, turns)
	})
}

var benchWordsFit = strings.Fields(`the a we you I it that this with for on at from about which would could should really
	think maybe recipe garden trip Lisbon train budget week weekend morning schedule doctor appointment sister birthday
	kitchen paint colour blue green office project deadline meeting coffee bakery sourdough flour water salt oven
	temperature minutes hours cello lesson practice scales music piano football match tickets hotel booking flight
	café naïve résumé Zürich São Paulo — “quoted” ‘single’ 🙂 👍 東京 北京 日本語 한국어 Привет`)

// benchTurnsSynthetic is 400 turn texts of 200 B to 12 KB: sentences,
// Markdown lists, quotes, code with <, > and &, tabs, multi-byte text and
// the odd control character, as assistants write.
var benchTurnsSynthetic = sync.OnceValue(func() []string {
	r := rand.New(rand.NewPCG(16, 4))
	turns := make([]string, 400)
	for i := range turns {
		var sb strings.Builder
		n := 200 + r.IntN(12000)
		for sb.Len() < n {
			switch r.IntN(12) {
			case 0:
				sb.WriteString("\n\n- ")
			case 1:
				sb.WriteString("\n```go\nif a < b && c > d {\n\treturn \"x\"\n}\n```\n")
			case 2:
				sb.WriteString(` "as they say" `)
			case 3:
				sb.WriteString(" see <https://example.com/a?b=1&c=2> ")
			case 4:
				if r.IntN(20) == 0 {
					sb.WriteString("\x01\x1b[0m")
				}
			}
			for range 3 + r.IntN(12) {
				sb.WriteString(benchWordsFit[r.IntN(len(benchWordsFit))])
				sb.WriteByte(' ')
			}
			sb.WriteString(". ")
		}
		turns[i] = sb.String()
	}
	return turns
})

var benchLongMemEval struct {
	once  sync.Once
	turns []string
}

// benchTurnsLongMemEval is the turn texts of the LongMemEval dev set's
// conversations, none when the file is not there.
func benchTurnsLongMemEval(b *testing.B) []string {
	benchLongMemEval.once.Do(func() {
		dir := os.Getenv("MEMEVAL_DATA")
		if dir == "" {
			dir = "/work/shared/data"
		}
		f, err := os.Open(filepath.Join(dir, "longmemeval-s-dev.json.gz"))
		if err != nil {
			return
		}
		defer f.Close()
		z, err := gzip.NewReader(f)
		if err != nil {
			b.Fatal(err)
		}
		var set []struct {
			Sessions [][]struct {
				Content string `json:"content"`
			} `json:"haystack_sessions"`
		}
		if err := json.NewDecoder(z).Decode(&set); err != nil {
			b.Fatal(err)
		}
		for _, q := range set {
			for _, s := range q.Sessions {
				for _, t := range s {
					if len(t.Content) > 0 {
						benchLongMemEval.turns = append(benchLongMemEval.turns, t.Content)
					}
				}
			}
		}
	})
	return benchLongMemEval.turns
}

// longText is the turns from the i-th on, joined by newlines until n
// bytes, cut to n: long notes, long answers.
func longText(turns []string, i, n int) string {
	var sb strings.Builder
	for ; sb.Len() < n; i++ {
		sb.WriteString(turns[i%len(turns)])
		sb.WriteByte('\n')
	}
	return cutTo(sb.String(), n)
}

// cutTo is s cut to at most n bytes, on a rune boundary.
func cutTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n]
}

var benchT0 = time.Date(2025, 3, 14, 9, 26, 53, 589793000, time.UTC)

// benchHistory is a facts.history page of 100 changes (the most a page
// asks for) of a fact whose values are long turns, each cut to the 8 KiB
// a fact's value may take: about 1.3 MB.
func benchHistory(turns []string) historyPage {
	var changes []events.FactChange
	prev := (*string)(nil)
	for i := range events.MaxHistoryResults {
		v := longText(turns, i*7, events.MaxFactValueBytes-200+i)
		changes = append(changes, events.FactChange{ID: int64(90000 - i), Op: "set", OldValue: prev, NewValue: &v,
			EventID: fmt.Sprintf("01JQ%022d", i), ConversationID: "conv-4f1c", SourceAt: benchT0.Add(-time.Duration(i) * time.Hour),
			ChangedAt: benchT0.Add(-time.Duration(i)*time.Hour + time.Second)})
		prev = &v
	}
	return historyPage{events.FactHistoryReply{Key: "current_project_notes", Changes: changes, NextBefore: 89900}}
}

// benchFacts is a facts.list page read of a user with several thousand
// long facts: maxListFacts+1 of them, values turns cut to 300 B..8 KiB.
func benchFacts(turns []string) readAhead[events.Fact] {
	facts := make([]events.Fact, maxListFacts+1)
	for i := range facts {
		facts[i] = events.Fact{Key: fmt.Sprintf("note_%04d", i), Value: longText(turns, i, 300+(i*977)%(events.MaxFactValueBytes-300)),
			UpdatedAt: benchT0, SourceAt: benchT0.Add(-time.Duration(i) * time.Minute), EventID: fmt.Sprintf("01JQ%022d", i), ConversationID: "conv-4f1c"}
	}
	return factsPage(facts, maxListFacts)
}

// benchItems is n context items whose question and answer are
// consecutive turns, the answer at most maxAnswer bytes.
func benchItems(turns []string, n, maxAnswer int) []events.ContextItem {
	items := make([]events.ContextItem, n)
	for i := range items {
		items[i] = events.ContextItem{ID: int64(1000 + i), Question: cutTo(turns[(2*i)%len(turns)], 2000),
			Answer:    longText(turns, 2*i+1, maxAnswer/2+(i*7919)%(maxAnswer/2)),
			CreatedAt: benchT0.Add(-time.Duration(i) * time.Hour), EventID: fmt.Sprintf("01JQ%022d", i), ConversationID: "conv-4f1c"}
	}
	return items
}

// countingFitter counts the replies, shells and items f is asked for,
// each of which fit encodes.
type countingFitter struct {
	fitter
	kept, shells, items []int
}

func (c *countingFitter) keep(n int) any {
	c.kept = append(c.kept, n)
	return c.fitter.keep(n)
}

func (c *countingFitter) shell(n int) any {
	c.shells = append(c.shells, n)
	return c.fitter.shell(n)
}

func (c *countingFitter) item(i int) any {
	c.items = append(c.items, i)
	return c.fitter.item(i)
}

// fitEncodes is how many replies' worth of bytes publish encodes to send
// v, a fitter over limit, cut: its first encoding, whole, and fit's.
func fitEncodes(tb testing.TB, v fitter, limit int) float64 {
	var buf bytes.Buffer
	if err := encodeReply(&buf, v); err != nil {
		tb.Fatal(err)
	}
	written := buf.Len()
	c := &countingFitter{fitter: v}
	if !(&Service{}).fit(&buf, c, limit, false) {
		tb.Fatal("does not fit")
	}
	sent := buf.Len()
	for _, n := range c.kept {
		written += replyLen(v.keep(n))
	}
	for _, n := range c.shells {
		written += replyLen(v.shell(n))
	}
	for _, i := range c.items {
		written += replyLen(v.item(i))
	}
	tb.Logf("%d bytes cut to %d: %d replies, %d shells, %d items encoded", replyLen(v), sent, len(c.kept), len(c.shells), len(c.items))
	return float64(written) / float64(sent)
}

// benchPublishFit is publish's encoding of v: encoded whole, and over
// limit, cut to fit.
func benchPublishFit(b *testing.B, v fitter, limit int) {
	encodes := fitEncodes(b, v, limit)
	s := &Service{logger: slog.New(slog.DiscardHandler)}
	buf := new(bytes.Buffer)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := encodeReply(buf, v); err != nil {
			b.Fatal(err)
		}
		if buf.Len() > limit && !s.fit(buf, v, limit, false) {
			b.Fatal("does not fit")
		}
	}
	b.ReportMetric(encodes, "encodes/op")
	b.SetBytes(int64(buf.Len()))
}

// BenchmarkFitHistory: a facts.history page of 1.3 MB cut to 1 MiB.
func BenchmarkFitHistory(b *testing.B) {
	benchCorpora(b, func(b *testing.B, turns []string) { benchPublishFit(b, benchHistory(turns), defaultMaxPayload) })
}

// BenchmarkFitFactsList: a facts.list page of 1000 long facts (several
// MB) cut to 1 MiB.
func BenchmarkFitFactsList(b *testing.B) {
	benchCorpora(b, func(b *testing.B, turns []string) { benchPublishFit(b, benchFacts(turns), defaultMaxPayload) })
}

// BenchmarkFitContextList: a context.list page of 200 long turns.
func BenchmarkFitContextList(b *testing.B) {
	benchCorpora(b, func(b *testing.B, turns []string) {
		benchPublishFit(b, contextPage(benchItems(turns, 201, 24<<10), 200), defaultMaxPayload)
	})
}

// BenchmarkFitEnrich: an enrich reply with max_tokens 100000 over 50 long
// memories and 60 facts (about 800 KB), lowered to fit a max_payload of
// 512 KiB and sent (encoded once more); builds/op is how many times the
// reply was built.
func BenchmarkFitEnrich(b *testing.B) {
	benchCorpora(b, func(b *testing.B, turns []string) {
		items := benchItems(turns, events.MaxMaxResults, 64<<10)
		var facts []events.Fact
		for i := range 60 {
			facts = append(facts, events.Fact{Key: fmt.Sprintf("note_%02d", i), Value: cutTo(turns[(i*11)%len(turns)], 1500),
				UpdatedAt: benchT0, SourceAt: benchT0, EventID: fmt.Sprintf("01JQ%022d", i)})
		}
		s := &Service{logger: slog.New(slog.DiscardHandler)}
		// One request's cache, warm from its first build (outside the
		// loop, as outside fitBudget).
		builds, cache := 0, cleanCache{}
		build := func(maxTokens int) events.EnrichReply {
			builds++
			r := events.EnrichReply{UserID: "alice", Keywords: []string{"project", "recipe"}, TookMS: 12.5}
			r.Facts, r.Context, _, r.Injection, r.Tokens = injectCached(cache, time.UTC, "markdown", maxTokens, events.MaxMaxResults, facts, items, nil)
			return r
		}
		limit := 512<<10 - enrichHeadroom
		first := build(events.MaxMaxTokens)
		if replyLen(first) <= limit {
			b.Fatalf("enrich reply of %d bytes: not oversized", replyLen(first))
		}
		buf := new(bytes.Buffer)
		builds = 0
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			r := s.fitBudget(first, events.MaxMaxTokens, limit, build)
			if err := encodeReply(buf, r); err != nil || buf.Len() > limit {
				b.Fatalf("sent %d bytes, %v", buf.Len(), err)
			}
		}
		b.ReportMetric(float64(builds)/float64(b.N), "builds/op")
		b.SetBytes(int64(buf.Len()))
	})
}
