package enricher

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
)

// publishFitReference is publish's cutting before, given a fitter over
// limit: a search without its oversized results encoded whole first,
// then fitOld, the binary search encoding every cut it tries (fit's way
// before it added up item sizes, kept as its fallback): the reference
// the new fit must agree with, cut for cut.
func publishFitReference(buf *bytes.Buffer, f fitter, limit int) bool {
	if d, ok := f.(oversizedDropper); ok {
		if g, dropped := d.withoutOversized(limit); dropped {
			f = g
			if encodeReply(buf, f.keep(f.listed())) == nil && buf.Len() <= limit {
				return true
			}
		}
	}
	return (&Service{}).fitOld(buf, f, limit)
}

// failOnWarn fails t on any warning logged: fit warns when the sizes it
// added up were not the encoding's, and would then hide it by fitting
// the old way.
type failOnWarn struct {
	slog.Handler
	t *testing.T
}

func (h failOnWarn) Handle(_ context.Context, r slog.Record) error {
	h.t.Errorf("logged %s: %s", r.Level, r.Message)
	return nil
}

func (h failOnWarn) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

// fitTexts are the kinds of text a reply's strings are made of: ASCII,
// multi-byte UTF-8, what JSON escapes in 2 bytes, in 6, HTML (not
// escaped), line separators, invalid UTF-8.
var fitTexts = []string{
	"plain words about the garden and the train ",
	"café naïve 東京 日本語 한국어 🙂👍🏽 — “quoted” ",
	`a "quote" and a \backslash\ and` + "\n\ttabs\r\b\f ",
	"\x00\x01\x1b[0m\x1f control ",
	"<b>bold</b> & <a href='x?a=1&b=2'> ",
	"line\u2028separator\u2029paragraph ",
	"bad \xff\xfe utf-8 \xe6\x97 cut ",
}

// fitText is a text of about n bytes from the kinds mix picks (a bit
// mask of fitTexts).
func fitText(r *rand.Rand, mix, n int) string {
	var sb strings.Builder
	for sb.Len() < n {
		if k := r.IntN(len(fitTexts)); mix&(1<<k) != 0 || k == 0 {
			sb.WriteString(fitTexts[k])
		}
	}
	return sb.String()[:n]
}

// TestFitKeepsWhatEncodingKept: for every kind of page and search, item
// sizes from tiny to larger than the limit, text of every kind JSON
// escapes differently, and payload limits around the reply's size, fit
// keeps the cut the encoding binary search kept (the same items, cursor
// and bytes), the reply is within the limit, and the sizes it adds up are
// the encoding's for every cut (it never falls back on encoding).
func TestFitKeepsWhatEncodingKept(t *testing.T) {
	t.Parallel()
	s := &Service{logger: slog.New(failOnWarn{slog.DiscardHandler, t})}
	r := rand.New(rand.NewPCG(7, 13))
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 600000000, time.UTC)
	sizes := []struct {
		name string
		of   func(i int) int
	}{
		{"even", func(int) int { return 300 }},
		{"mixed", func(int) int { return 10 + r.IntN(3000) }},
		{"one big", func(i int) int { return map[bool]int{true: 6000, false: 200}[i == 3] }},
		{"big head", func(i int) int { return map[bool]int{true: 9000, false: 100}[i == 0] }},
		{"tiny", func(int) int { return r.IntN(8) }},
	}
	// pages builds one reply of each kind from n texts.
	pages := func(texts []string) map[string]fitter {
		var (
			facts    []events.Fact
			items    []events.ContextItem
			changes  []events.FactChange
			docs     []events.DocumentInfo
			prevText *string
		)
		for i, text := range texts {
			// Keys and ids of varying lengths: a cursor's size depends on
			// where the page is cut.
			key := fmt.Sprintf("k%s_%d", strings.Repeat("é<", i%5), i)
			facts = append(facts, events.Fact{Key: key, Value: text, UpdatedAt: t0, SourceAt: t0.Add(time.Duration(i) * time.Second),
				EventID: map[bool]string{true: "ev\"" + key}[i%3 == 0]})
			items = append(items, events.ContextItem{ID: int64(i * i * 1013), Question: key, Answer: text, Score: float64(i) / 7,
				CreatedAt: t0.Add(time.Duration(i) * time.Minute), ConversationID: key})
			changes = append(changes, events.FactChange{ID: int64(1 + i*i*9973), Op: "set", OldValue: prevText, NewValue: &texts[i],
				SourceAt: map[bool]time.Time{true: t0}[i%2 == 0], ChangedAt: t0})
			prevText = &texts[i]
			meta, _ := json.Marshal(map[string]string{"note": text[:min(len(text), 40)]})
			docs = append(docs, events.DocumentInfo{DocID: key, Source: text[:min(len(text), 60)], Hash: "h", Metadata: meta,
				Size: int64(len(text)), Status: "ready", CreatedAt: t0, UpdatedAt: t0})
		}
		return map[string]fitter{
			"facts.list":    factsPage(facts, len(facts)-1),
			"context.list":  contextPage(items, len(items)),
			"facts.history": historyPage{events.FactHistoryReply{Key: "k<&>\u2028", Changes: changes, NextBefore: 5}},
			"docs.list":     docsPage{events.DocsListReply{Documents: docs, Next: "after\x01"}},
			"search":        searchResults{events.SearchReply{Results: items}},
		}
	}
	cases := 0
	for _, size := range sizes {
		for mix := range 1 << len(fitTexts) {
			if mix&(mix-1) != 0 && mix != 1<<len(fitTexts)-1 {
				// Each kind alone, and all at once: a spread of the mixes
				// (every ninth) cost 22 s under -race, 100-160 s beside a
				// CI run, for no kind more.
				continue
			}
			n := 2 + r.IntN(40)
			texts := make([]string, n)
			for i := range texts {
				texts[i] = fitText(r, mix, size.of(i))
			}
			byKind := pages(texts)
			for _, kind := range slices.Sorted(maps.Keys(byKind)) {
				f := byKind[kind]
				whole := replyLen(f.keep(f.listed()))
				for _, limit := range []int{1, 150, 400, whole / 5, whole / 3, whole / 2, whole - 1, whole - 200, 9100} {
					if limit >= whole || limit < 1 {
						continue // publish fits a reply within the limit whole
					}
					cases++
					name := fmt.Sprintf("%s %s mix %b: %d items, %d bytes, limit %d", kind, size.name, mix, n, whole, limit)
					var want, got bytes.Buffer
					wantOK := publishFitReference(&want, f, limit)
					_, dropper := f.(oversizedDropper)
					g, whole := f, false
					if dropper {
						if d, dropped := f.(oversizedDropper).withoutOversized(limit); dropped {
							g, whole = d, true
						}
					}
					c := &countingFitter{fitter: g}
					gotOK := s.fit(&got, c, limit, whole)
					if len(c.kept) > 1 {
						t.Fatalf("%s: %d replies encoded, want 1", name, len(c.kept))
					}
					if gotOK != wantOK || (wantOK && got.String() != want.String()) {
						t.Fatalf("%s: fit %v, %d bytes; encoding every cut: %v, %d bytes", name, gotOK, got.Len(), wantOK, want.Len())
					}
					if gotOK && got.Len() > limit {
						t.Fatalf("%s: %d bytes sent", name, got.Len())
					}
					z := replySizes{f: g, limit: limit, ends: []int{0}}
					// Cuts around the one kept, and a few others.
					kept := -1
					if len(c.kept) == 1 {
						kept = c.kept[0]
					}
					for _, k := range []int{g.least(), g.listed(), kept - 1, kept, kept + 1, r.IntN(g.listed() + 1)} {
						if k < g.least() || k > g.listed() {
							continue
						}
						enc := replyLen(g.keep(k))
						if size, ok := z.size(k); ok && size != enc || !ok && enc <= limit {
							t.Fatalf("%s: cut of %d measured %d (%v), encoded %d", name, k, size, ok, enc)
						}
					}
				}
			}
		}
	}
	t.Logf("%d cuts compared", cases)
}

// TestEnrichLenIsReplyLen: enrichLen, which fitBudget lowers the budget
// by, is the bytes the reply takes encoded, for replies with and without
// lists (null, [] and omitted documents kept apart) and text of every
// kind JSON escapes differently (escapedLen's exactness on any bytes is
// TestEscapedLenIsTheReplys').
func TestEnrichLenIsReplyLen(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.FixedZone("", 3600))
	for mix := range 1 << len(fitTexts) {
		text := func() string { return fitText(r, mix, r.IntN(400)) }
		reply := events.EnrichReply{UserID: "alice<>", Keywords: []string{"a", text()}, Injection: text(), Tokens: 7, TookMS: 1.25,
			Degraded: mix%2 == 0, Reason: map[bool]string{true: text()}[mix%3 == 0]}
		for j := range mix % 5 {
			reply.Facts = append(reply.Facts, events.Fact{Key: text(), Value: text(), UpdatedAt: t0, SourceAt: map[bool]time.Time{true: t0}[j%2 == 0], EventID: text()})
			reply.Context = append(reply.Context, events.ContextItem{ID: int64(j), Question: text(), Answer: text(), Score: 1.0 / 3, CreatedAt: t0})
		}
		switch mix % 4 {
		case 1:
			reply.Documents = []events.DocumentChunk{}
		case 2:
			reply.Documents = []events.DocumentChunk{{Citation: 1, Collection: text(), DocumentID: "d", Source: text(), HeadingPath: []string{text()}, Text: text(), Score: 0.5}}
		case 3:
			reply.Facts, reply.Context = []events.Fact{}, []events.ContextItem{}
		}
		if got, want := enrichLen(reply), replyLen(reply); got != want {
			t.Fatalf("mix %b: enrichLen %d, encoded %d", mix, got, want)
		}
	}
}

// lyingFitter is a fitter whose items, as item gives them, encode pad
// bytes longer (or, negative, shorter: the ID left out) than in keep's
// list: the sizes fit adds up are then wrong, as they never should be.
type lyingFitter struct {
	fitter
	pad int
}

func (l lyingFitter) item(i int) any {
	it := *l.fitter.item(i).(*events.ContextItem)
	if l.pad < 0 {
		return struct {
			Question string `json:"question"`
		}{it.Question}
	}
	it.Question += strings.Repeat("x", l.pad)
	return it
}

// warnings counts the warnings logged.
type warnings struct {
	slog.Handler
	n *int
}

func (h warnings) Handle(_ context.Context, r slog.Record) error {
	*h.n++
	return nil
}

func (h warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

// TestFitFallsBackWhenSizesAreWrong: should the sizes fit adds up from
// the items ever disagree with the encoding (over or under), it says so
// in a warning and keeps the cut the encoding binary search keeps, within
// the limit, never a reply over it.
func TestFitFallsBackWhenSizesAreWrong(t *testing.T) {
	t.Parallel()
	var items []events.ContextItem
	for i := range 30 {
		items = append(items, events.ContextItem{ID: int64(1000 + i), Question: fmt.Sprintf("question %d", i),
			Answer: strings.Repeat("an answer of some length ", 1+i%4)})
	}
	page := contextPage(items, len(items))
	whole := replyLen(page.keep(page.listed()))
	for _, pad := range []int{-1, 40} {
		for _, limit := range []int{whole / 4, whole / 2, whole - 1} {
			var warned int
			s := &Service{logger: slog.New(warnings{slog.DiscardHandler, &warned})}
			var want, got bytes.Buffer
			wantOK := (&Service{}).fitOld(&want, page, limit)
			gotOK := s.fit(&got, lyingFitter{page, pad}, limit, false)
			if gotOK != wantOK || got.String() != want.String() {
				t.Errorf("pad %d, limit %d: fit %v, %d bytes; encoding every cut: %v, %d bytes", pad, limit, gotOK, got.Len(), wantOK, want.Len())
			}
			if gotOK && got.Len() > limit {
				t.Errorf("pad %d, limit %d: %d bytes sent", pad, limit, got.Len())
			}
			if warned != 1 {
				t.Errorf("pad %d, limit %d: %d warnings, want 1 (sizes measured wrong)", pad, limit, warned)
			}
		}
	}
}
