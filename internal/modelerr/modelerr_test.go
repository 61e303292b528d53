package modelerr_test

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memoryd/memoryd/internal/modelerr"
)

func TestRetryAfter(t *testing.T) {
	t.Parallel()

	now := time.Date(2024, 3, 15, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{in: "", wantOK: false},
		{in: "0", want: 0, wantOK: true},
		{in: " 7 ", want: 7 * time.Second, wantOK: true},
		{in: "-3", wantOK: false},
		{in: "1.5", wantOK: false},
		{in: "soon", wantOK: false},
		{in: "99999999999999999", want: time.Duration(1<<63 - 1), wantOK: true},
		{in: "Fri, 15 Mar 2024 12:00:30 GMT", want: 30 * time.Second, wantOK: true},
		{in: "Fri, 15 Mar 2024 11:00:00 GMT", want: 0, wantOK: true},
	}
	for _, tt := range tests {
		got, ok := modelerr.RetryAfter(tt.in, now)
		if ok != tt.wantOK || got != tt.want {
			t.Errorf("RetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

// TestMessage: the message of an error body in each form servers use, and
// nothing of a body that is none of them.
func TestMessage(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"error":{"message":"Invalid API key","type":"auth"}}`:         "Invalid API key",
		`{"error":"model \"qwen9\" not found, try pulling it first"}`:   `model "qwen9" not found, try pulling it first`,
		`{"object":"error","message":"maximum context length is 8192"}`: "maximum context length is 8192",
		`{"detail":"Not Found"}`:                                        "Not Found",
		`{"error":{"message":["a","b"]}}`:                               "a; b",
		`{"error":{"code":500}}`:                                        "",
		`<html>502 Bad Gateway</html>`:                                  "",
		`upstream connect error`:                                        "",
	} {
		if got := modelerr.Message([]byte(body)); got != want {
			t.Errorf("Message(%s) = %q, want %q", body, got, want)
		}
	}
}

func TestNotConnected(t *testing.T) {
	t.Parallel()
	_, refused := net.Dial("tcp", "127.0.0.1:1")
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused", refused, true},
		{"wrapped refused", fmt.Errorf("post: %w", refused), true},
		{"name not resolved", &net.DNSError{Err: "no such host", Name: "nowhere.invalid"}, true},
		{"reset while reading", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, false},
		{"other", errors.New("unexpected EOF"), false},
	} {
		if got := modelerr.NotConnected(c.err); got != c.want {
			t.Errorf("%s (%v): %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestHideEcho(t *testing.T) {
	texts := []string{`{"user_message":"my sister Maria lives in Porto now"}`, "Ich wohne in München seit Mai"}
	for _, c := range []struct{ in, want string }{
		{"status 500: boom", "status 500: boom"},
		{"status 500: bad input: my sister Maria lives in Porto", "status 500: bad input: " + modelerr.EchoMark},
		{"status 400: You extract facts. Reply with JSON.", "status 400: You extract facts. Reply with JSON."},
		{`status 400: at "lives in Porto now"}`, `status 400: at "` + modelerr.EchoMark},
		{"status 400: input 'Ich wohne in München' too long", "status 400: input '" + modelerr.EchoMark + "' too long"},
		{"status 400: in Porto", "status 400: in Porto"}, // shorter than a window
	} {
		if got := modelerr.HideEcho(c.in, texts); got != c.want {
			t.Errorf("HideEcho(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := modelerr.HideEcho("status 500: my sister Maria lives in Porto", nil); got != "status 500: my sister Maria lives in Porto" {
		t.Errorf("HideEcho without texts changed the reason: %q", got)
	}
}

// TestHideEchoAcrossLineBreaks: the callers bound a reason with its
// whitespace made single spaces, and a server quoting a text as a JSON or
// Python string writes its line breaks as \n: an echo of a text with short
// lines must not be left whole because no run of a window matches the
// text as it was sent.
func TestHideEchoAcrossLineBreaks(t *testing.T) {
	text := "Maria\nis pregnant\nwith twins,  due \"in May\""
	for _, reason := range []string{
		"status 400: bad input: " + strings.Join(strings.Fields(text), " "),
		`status 400: bad input: Maria\nis pregnant\nwith twins,  due \"in May\"`,
		`status 400: [{'type': 'string_too_long', 'input': 'Maria\nis pregnant\nwith twins'}]`,
	} {
		got := modelerr.HideEcho(reason, []string{text})
		for _, word := range []string{"Maria", "pregnant", "twins", "May"} {
			if strings.Contains(got, word) {
				t.Errorf("HideEcho(%q) = %q: holds %q", reason, got, word)
			}
		}
		if !strings.Contains(got, "status 400") || !strings.Contains(got, modelerr.EchoMark) {
			t.Errorf("HideEcho(%q) = %q: lost the server's words or hid nothing", reason, got)
		}
	}
}

// TestHoldBack: nothing held in an outage's first second (or with probing
// off), one probe a gap (a quarter of the outage, at most maxGap) once the
// last has ended, the others held with the time to the next.
func TestHoldBack(t *testing.T) {
	t.Parallel()
	const maxGap = 5 * time.Second
	for _, c := range []struct {
		name             string
		down, sinceProbe time.Duration
		probing          bool
		maxGap           time.Duration
		probe, held      bool
		probeIn          time.Duration
	}{
		{"not down", 0, 0, false, maxGap, false, false, 0},
		{"first second", 900 * time.Millisecond, 900 * time.Millisecond, false, maxGap, false, false, 0},
		{"probing off", time.Minute, time.Minute, false, -1, false, false, 0},
		{"a gap since the last probe", 8 * time.Second, 2 * time.Second, false, maxGap, true, false, 0},
		{"within the gap", 8 * time.Second, 500 * time.Millisecond, false, maxGap, false, true, 1500 * time.Millisecond},
		{"gap capped", time.Minute, 5 * time.Second, false, maxGap, true, false, 0},
		{"one in flight", time.Minute, time.Minute, true, maxGap, false, true, maxGap},
	} {
		probe, held, in := modelerr.HoldBack(c.down, c.sinceProbe, c.probing, c.maxGap)
		if probe != c.probe || held != c.held || in != c.probeIn {
			t.Errorf("%s: HoldBack = %v, %v, %s; want %v, %v, %s", c.name, probe, held, in, c.probe, c.held, c.probeIn)
		}
	}
}
