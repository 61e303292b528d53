package proxy

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/memoryd/memoryd/events"
)

// TestLastBytes: a message over the limit keeps its end, at most n bytes,
// cut on a rune boundary whatever the width of the runes around the cut
// (ASCII, 2-byte é, 3-byte 日 and €, 4-byte 🙂), so enrich never gets
// invalid UTF-8.
func TestLastBytes(t *testing.T) {
	for _, c := range []struct {
		name string
		s    string
		n    int
		want string
	}{
		{"short", "héllo", 10, "héllo"},
		{"exact", "héllo", 6, "héllo"},
		{"ascii", "hello world", 5, "world"},
		{"cut in a 2-byte rune", "aéé", 3, "é"},
		{"on a 2-byte boundary", "aéé", 4, "éé"},
		{"cut in a 3-byte rune, first byte kept out", "日本語", 8, "本語"},
		{"cut in a 3-byte rune, last byte", "日本語", 7, "本語"},
		{"on a 3-byte boundary", "日本語", 6, "本語"},
		{"cut in a 4-byte rune", "x🙂🙂", 7, "🙂"},
		{"cut in a 4-byte rune at its last byte", "x🙂🙂", 5, "🙂"},
		{"nothing fits", "🙂", 3, ""},
		{"mixed", "prix: 5€ ou 🙂 日本", 9, " 日本"},
	} {
		got := lastBytes(c.s, c.n)
		if got != c.want || len(got) > c.n || !utf8.ValidString(got) || !strings.HasSuffix(c.s, got) {
			t.Errorf("%s: lastBytes(%q, %d) = %q, want %q", c.name, c.s, c.n, got, c.want)
		}
	}
	// Every limit over a long mixed text: valid, a suffix, within n, and
	// losing less than one rune to the boundary.
	long := strings.Repeat("aé日🙂", 50)
	for n := 0; n <= len(long); n++ {
		got := lastBytes(long, n)
		if !utf8.ValidString(got) || !strings.HasSuffix(long, got) || len(got) > n || n-len(got) >= utf8.UTFMax {
			t.Fatalf("lastBytes(long, %d) = %d bytes, valid %v", n, len(got), utf8.ValidString(got))
		}
	}
}

// TestFirstBytes: the start of a text within n bytes, cut on a rune
// boundary, losing less than one rune to it.
func TestFirstBytes(t *testing.T) {
	for _, c := range []struct {
		name, s string
		n       int
		want    string
	}{
		{"short", "héllo", 10, "héllo"},
		{"exact", "héllo", 6, "héllo"},
		{"ascii", "hello world", 5, "hello"},
		{"cut in a 2-byte rune", "aéé", 2, "a"},
		{"on a 2-byte boundary", "aéé", 3, "aé"},
		{"cut in a 3-byte rune", "日本語", 5, "日"},
		{"cut in a 4-byte rune", "🙂🙂x", 7, "🙂"},
		{"nothing fits", "🙂", 3, ""},
	} {
		if got := firstBytes(c.s, c.n); got != c.want {
			t.Errorf("%s: firstBytes(%q, %d) = %q, want %q", c.name, c.s, c.n, got, c.want)
		}
	}
	long := strings.Repeat("aé日🙂", 50)
	for n := 0; n <= len(long); n++ {
		got := firstBytes(long, n)
		if !utf8.ValidString(got) || !strings.HasPrefix(long, got) || len(got) > n || n-len(got) >= utf8.UTFMax {
			t.Fatalf("firstBytes(long, %d) = %d bytes, valid %v", n, len(got), utf8.ValidString(got))
		}
	}
}

// TestFitEvent: a turn within its fields' limits whose text JSON escapes
// (HTML in a reply) is shortened, reply first, until its encoded event fits
// the publish limit, and stays valid; one that fits is left alone. A review
// found a 64 KiB message with a 200 KiB HTML reply encoded to 552,488
// bytes, refused, and nothing remembered.
func TestFitEvent(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name, msg, reply string
		cut              bool
	}{
		{"plain", "where do I live?", "Lisbon.", false},
		{"HTML reply", strings.Repeat("q", events.MaxUserMessageBytes), strings.Repeat("<b>x</b>&amp;", 200<<10/13), true},
		{"escapes in both", strings.Repeat("<&>", events.MaxUserMessageBytes/3), strings.Repeat("é<", events.MaxAssistantResponseBytes/3), true},
	} {
		turn := events.Turn{ID: "proxy-1", UserID: "alice", UserMessage: c.msg, AssistantResponse: c.reply, Timestamp: at}
		fitEvent(&turn)
		data, err := json.Marshal(turn)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > events.MaxEventBytes || turn.Validate() != nil {
			t.Errorf("%s: %d bytes (limit %d), valid: %v", c.name, len(data), events.MaxEventBytes, turn.Validate())
		}
		if cut := turn.AssistantResponse != c.reply || turn.UserMessage != c.msg; cut != c.cut {
			t.Errorf("%s: shortened %v, want %v", c.name, cut, c.cut)
		}
		if !strings.HasPrefix(c.reply, turn.AssistantResponse) || !strings.HasSuffix(c.msg, turn.UserMessage) || turn.UserMessage == "" {
			t.Errorf("%s: not the reply's start and the message's end", c.name)
		}
	}
}
