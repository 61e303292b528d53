package enricher

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/memoryd/memoryd/events"
)

// TestEscapedLenIsTheReplys: escapedLen is what the reply's encoder
// writes for a line, whatever its bytes, so that a page cut by it stays
// under the payload limit without wasting it (a bound that counted 2 a
// byte of a multi-byte rune held half a page of CJK text).
func TestEscapedLenIsTheReplys(t *testing.T) {
	t.Parallel()
	check := func(line string) {
		t.Helper()
		var buf bytes.Buffer
		if err := encodeReply(&buf, line); err != nil {
			t.Fatal(err)
		}
		want := buf.Len() - 2 // the quotes
		if got := escapedLen([]byte(line)); got != want {
			t.Fatalf("escapedLen([]byte(%q)) = %d, encoded %d", line, got, want)
		}
		if got := escapedLen(line); got != want {
			t.Fatalf("escapedLen(%q) = %d, encoded %d", line, got, want)
		}
	}
	for _, line := range []string{
		`{"type":"fact","key":"city"}` + "\n",
		"quotes \" and \\ backslashes\t\r\n",
		"control \x01\x1f and <html> & co \x7f",
		"backspace \b and form feed \f",
		"ünïcödé, 日本語, emoji 🙂",
		"line\u2028separator\u2029",
		"invalid \xff \xc0\x80 \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x80 cut \xf0\x9f\x99",
		"",
	} {
		check(line)
	}
	// Random bytes, with every kind of byte the encoder treats apart
	// (and pieces of multi-byte runes) made likely.
	r := rand.New(rand.NewPCG(3, 5))
	const tricky = "\u2028\u2029\"\\<>&\n\b\f\x7f\x01日🙂é\xed\xa0\xe0\xf4\x90\xc1"
	for range 5000 {
		b := make([]byte, r.IntN(40))
		for j := range b {
			b[j] = byte(r.IntN(256))
			if r.IntN(2) == 0 {
				b[j] = tricky[r.IntN(len(tricky))]
			}
		}
		check(string(b))
	}
}

// TestFitEscapedCutsOnARune: a split export line ends on a rune boundary,
// within the limit, as late as it can, and always advances.
func TestFitEscapedCutsOnARune(t *testing.T) {
	t.Parallel()
	line := []byte(strings.Repeat("\x01é日", 100))
	for _, limit := range []int{1, 7, 8, 100, 1000} {
		n := fitEscaped(line, limit)
		if n == 0 || !utf8.Valid(line[:n]) || n > 1 && escapedLen(line[:n]) > limit {
			t.Errorf("fitEscaped(limit %d) = %d: escaped %d, valid %v", limit, n, escapedLen(line[:n]), utf8.Valid(line[:n]))
		}
		if _, w := utf8.DecodeRune(line[n:]); n < len(line) && escapedLen(line[:n+w]) <= limit {
			t.Errorf("fitEscaped(limit %d) = %d: the next rune fits too", limit, n)
		}
	}
}

// TestEnrichBoundIsAtLeastTheReply: enrich measures a reply by encoding it
// only when enrichBound says it may be over the limit, so the bound must
// never be under the encoded size, whatever the text holds.
func TestEnrichBoundIsAtLeastTheReply(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 23, 59, 59, 999999999, time.FixedZone("", -(9*3600+30*60)))
	for _, text := range []string{"", "plain words", "<html> & \"quotes\" \\ \n\t", "\x01\x02\x1f control", "ünïcödé 日本語 🙂 \u2028\u2029", strings.Repeat("\x01", 300)} {
		r := events.EnrichReply{UserID: "~" + text, Keywords: []string{text, "k"}, Injection: text + text, Reason: text, Tokens: 1 << 30, Degraded: true, TookMS: 123456.789}
		for i := range 3 {
			r.Facts = append(r.Facts, events.Fact{Key: text + "k", Value: text, UpdatedAt: at, SourceAt: at, EventID: text, ConversationID: text})
			r.Context = append(r.Context, events.ContextItem{ID: math.MaxInt64 - int64(i), Question: text, Answer: text, Score: 0.123456789012345678,
				CreatedAt: at, EventID: text, ConversationID: text})
			r.Documents = append(r.Documents, events.DocumentChunk{Citation: math.MaxInt32, Collection: text, DocumentID: text, Source: text,
				HeadingPath: []string{text, ""}, ChunkIndex: math.MaxInt32, Text: text, Score: 1e-300})
		}
		var buf bytes.Buffer
		if err := encodeReply(&buf, r); err != nil {
			t.Fatal(err)
		}
		if b := enrichBound(r); b < buf.Len() {
			t.Errorf("text %q: bound %d under the encoded %d bytes", text, b, buf.Len())
		}
	}
}

// TestExportBuildsOneAtATime: a process reads one whole export into memory
// at a time (exports.build): a second waits for the first's release, and
// gives up when its request's context ends.
func TestExportBuildsOneAtATime(t *testing.T) {
	e := exports{builds: make(chan struct{}, 1)}
	release, err := e.build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.build(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a second build while the first runs: %v, want it to wait until its context ends", err)
	}
	release()
	again, err := e.build(ctx)
	if err != nil {
		// A ready slot and a done context: select may pick either; the
		// slot must be free all the same.
		again, err = e.build(context.Background())
	}
	if err != nil {
		t.Fatalf("a build after the release: %v", err)
	}
	again()
}

// BenchmarkEscapedLen: escapedLen runs over every enrich reply's text
// (enrichBound) and every export line.
func BenchmarkEscapedLen(b *testing.B) {
	for _, c := range []struct{ name, text string }{
		{"ascii", strings.Repeat("The quick brown fox said \"hi\" and jumped.\n", 2800)},
		{"japanese", strings.Repeat("東京の天気はどうですか、明日は晴れるでしょう。", 1750)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.text)))
			n := 0
			for b.Loop() {
				n += escapedLen(c.text)
			}
			if n == 0 {
				b.Fatal("nothing counted")
			}
		})
	}
}
