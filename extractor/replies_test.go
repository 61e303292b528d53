package extractor

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor/extractortest"
)

// TestLLMReasoningWithoutOpeningTag: reasoning models served with a chat
// template that opens the reasoning block in the prompt reply with its
// closing tag only. The drafts written before it are not the answer.
func TestLLMReasoningWithoutOpeningTag(t *testing.T) {
	t.Parallel()

	const (
		red    = `{"facts":[{"op":"set","key":"favorite_color","value":"red"}]}`
		blue   = `{"facts":[{"op":"set","key":"favorite_color","value":"blue"}],"context":[]}`
		empty  = `{"facts":[],"context":[]}`
		quoted = `{"facts":[{"op":"set","key":"nickname","value":"the </think> guy"}],"context":[]}`
	)
	tests := []struct {
		name, reply, key, want string
	}{
		{"closing think only", "The user likes red? Draft " + red + " but then corrected to blue.\n</think>\n\n" + blue, "favorite_color", "blue"},
		{"closing think only, empty draft", "Nothing yet: " + empty + " wait, blue.</think>" + blue, "favorite_color", "blue"},
		{"closing thinking only", "draft " + red + "\n</thinking>\n" + blue, "favorite_color", "blue"},
		{"closing reasoning only", "draft " + red + "\n</REASONING>\n" + blue, "favorite_color", "blue"},
		{"thinking block", "<thinking>draft " + red + "</thinking>" + blue, "favorite_color", "blue"},
		{"reasoning block", "<reasoning>draft " + red + "</reasoning>\n" + blue, "favorite_color", "blue"},
		{"think block", "<think>draft " + red + "</think>" + blue, "favorite_color", "blue"},
		// The user typed the tag: the answer quotes it in a JSON string.
		{"answer quotes the tag", quoted, "preferred_name", "the </think> guy"},
		{"closing tag, then an answer quoting it", "draft " + red + "\n</think>\n" + quoted, "preferred_name", "the </think> guy"},
		{"draft quoting the tag", `draft {"facts":[{"op":"set","key":"nickname","value":"the </think> kid"}]}` + "\n</think>\n" + quoted, "preferred_name", "the </think> guy"},
		// An opening tag inside the answer's JSON (a turn about prompting)
		// is text too, and does not swallow the rest of the answer.
		{"answer quotes an opening tag", `{"facts":[{"op":"set","key":"hobby_tip","value":"wrap reasoning in <thinking> tags"}],"context":[]}`, "hobby_tip", "wrap reasoning in <thinking> tags"},
		{"answer quotes both tags", `{"facts":[{"op":"set","key":"tip","value":"say </thinking> then <Reasoning> later"}]}`, "tip", "say </thinking> then <Reasoning> later"},
		{"think block, then an answer quoting an opening tag", "<think>draft " + red + "</think>\n" + `{"facts":[{"op":"set","key":"tip","value":"use <think> tags"}]}`, "tip", "use <think> tags"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := extractortest.NewServer(t, extractortest.Content(tt.reply))
			res, err := newTestLLM(t, srv, nil).Extract(context.Background(), testInput("My favourite colour is blue, call me the </think> guy"))
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			if got := res.Facts[tt.key]; got != tt.want {
				t.Errorf("facts = %v, want %s %q", res.Facts, tt.key, tt.want)
			}
			if got := srv.Requests(); got != 1 {
				t.Errorf("requests = %d, want 1", got)
			}
		})
	}

	// An unterminated block still swallows the rest, as before.
	srv := extractortest.NewServer(t, extractortest.Content("<think>draft "+red))
	if _, err := newTestLLM(t, srv, nil).Extract(context.Background(), testInput("I like red")); KindOf(err) != KindInvalidOutput {
		t.Errorf("unterminated block: error %v, want KindInvalidOutput", err)
	}
}

// TestLLMServerErrorMessage: the server's message is in the error in the
// error body formats go-openai does not read.
func TestLLMServerErrorMessage(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name     string
		reply    extractortest.Reply
		wantKind Kind
		want     string
	}{
		{"ollama string error", extractortest.Reply{Status: http.StatusNotFound, Body: `{"error":"model \"qwen9\" not found, try pulling it first"}`},
			KindTransient, `status 404: model "qwen9" not found`}, // waited for as a misconfiguration
		{"vllm older error", extractortest.Reply{Status: http.StatusBadRequest,
			Body: `{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","code":400}`},
			KindPermanent, "status 400: This model's maximum context length is 4096 tokens."},
		{"busy", extractortest.Reply{Status: http.StatusServiceUnavailable, Body: `{"error":"server busy"}`}, KindTransient, "status 503: server busy"},
		{"fastapi detail", extractortest.Reply{Status: http.StatusUnprocessableEntity, Body: `{"detail":"bad field"}`}, KindPermanent, "status 422: bad field"},
		{"message bounded", extractortest.Reply{Status: http.StatusBadRequest, Body: `{"error":"` + strings.Repeat("long ", 1000) + `"}`},
			KindPermanent, "status 400: long long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := extractortest.NewServer(t, tt.reply)
			_, err := newTestLLM(t, srv, nil).Extract(context.Background(), testInput("I'm Ana"))
			if KindOf(err) != tt.wantKind || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Extract error = %v (%s), want %s saying %q", err, KindOf(err), tt.wantKind, tt.want)
			}
			if len(err.Error()) > 300 {
				t.Errorf("error is %d bytes, not bounded", len(err.Error()))
			}
		})
	}
}

// TestLLMReplyWithoutAnswer: each way a reply can lack an answer says
// which, and an error object sent with status 200 is the server's error.
func TestLLMReplyWithoutAnswer(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name     string
		body     string
		wantKind Kind
		want     string
		requests int
	}{
		{"no choices", `{"id":"x","object":"chat.completion","choices":[]}`, KindInvalidOutput, "reply has no choices (after 2 model calls)", 2},
		{"error object with status 200", `{"error":{"message":"upstream timeout","type":"proxy_error"}}`, KindTransient, "status 200 with an error: upstream timeout", 1},
		{"error object with a code", `{"error":{"message":"upstream down","code":502}}`, KindTransient, "status 502: upstream down", 1},
		{"error string with status 200", `{"error":"gateway busy"}`, KindTransient, "gateway busy", 1},
		{"only reasoning_content", `{"choices":[{"index":0,"message":{"role":"assistant","content":"","reasoning_content":"The user likes red..."},"finish_reason":"length"}]}`,
			KindInvalidOutput, "reply holds only reasoning (reasoning_content), no answer", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := extractortest.NewServer(t, extractortest.Reply{Body: tt.body})
			_, err := newTestLLM(t, srv, nil).Extract(context.Background(), testInput("I'm Ana"))
			if KindOf(err) != tt.wantKind || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Extract error = %v (%s), want %s saying %q", err, KindOf(err), tt.wantKind, tt.want)
			}
			if strings.Contains(err.Error(), "reply is empty") {
				t.Errorf("error %q still says the reply is empty", err)
			}
			if got := srv.Requests(); got != tt.requests {
				t.Errorf("requests = %d, want %d", got, tt.requests)
			}
		})
	}
}

// TestLLMReplyOverSizeLimit: a reply over the body cap is permanent for
// the turn (the same request gets it again) and says so.
func TestLLMReplyOverSizeLimit(t *testing.T) {
	t.Parallel()

	srv := extractortest.NewServer(t, extractortest.Content(strings.Repeat("x", maxResponseBytes)))
	_, err := newTestLLM(t, srv, nil).Extract(context.Background(), testInput("I'm Ana"))
	if KindOf(err) != KindTransient || !strings.Contains(err.Error(), "reply over "+strconv.Itoa(maxResponseBytes)+" bytes") {
		t.Fatalf("Extract error = %.300v, want KindTransient saying the reply is over %d bytes", err, maxResponseBytes)
	}
	if got := srv.Requests(); got != 1 {
		t.Errorf("requests = %d, want 1", got)
	}
}

// TestLLMUnreachable: a server that is down, restarting or loading a model
// is told apart from one failing the request.
func TestLLMUnreachable(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		reply extractortest.Reply
		want  bool
	}{
		{extractortest.Error(http.StatusBadGateway, "bad gateway"), true},
		{extractortest.Reply{Status: http.StatusServiceUnavailable, Body: `{"error":"loading model"}`}, true},
		// A gateway's timeout may be the request's doing (a long prompt):
		// an outage only as the third of different requests in a row
		// (TestLLMGatewayTimeoutsInARowAreAnOutage).
		{extractortest.Error(http.StatusGatewayTimeout, "gateway timeout"), false},
		{extractortest.Error(http.StatusInternalServerError, "boom"), false},
		{extractortest.Error(http.StatusBadRequest, "bad"), false},
		{extractortest.Reply{Status: http.StatusServiceUnavailable, Body: `{}`, Header: http.Header{"Retry-After": {"3"}}}, false},
	} {
		t.Run(strconv.Itoa(tt.reply.Status), func(t *testing.T) {
			t.Parallel()
			srv := extractortest.NewServer(t, tt.reply)
			_, err := newTestLLM(t, srv, nil).Extract(context.Background(), testInput("I'm Ana"))
			if err == nil || IsUnreachable(err) != tt.want {
				t.Errorf("Extract error = %v: unreachable %v, want %v", err, IsUnreachable(err), tt.want)
			}
		})
	}
	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		l, err := NewLLM(LLMConfig{BaseURL: "http://" + closedAddr(t) + "/v1", Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Extract(context.Background(), testInput("I'm Ana"))
		if !IsUnreachable(err) || KindOf(err) != KindTransient {
			t.Errorf("Extract error = %v, want an unreachable KindTransient", err)
		}
	})
	// A server that takes the connection and resets it (one that crashes on
	// this request) is not down for everyone: the request spends attempts.
	t.Run("connection reset after it was made", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				if tc, ok := c.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // close with a reset
				}
				c.Close()
			}
		}()
		l, err := NewLLM(LLMConfig{BaseURL: "http://" + ln.Addr().String() + "/v1", Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Extract(context.Background(), testInput("I'm Ana"))
		if err == nil || IsUnreachable(err) || KindOf(err) != KindTransient {
			t.Errorf("Extract error = %v, want a transient error that is not unreachable", err)
		}
	})
}

// TestLLMServerErrorsInARowAreAnOutage: a 500 is the request's own failure
// until three different requests in a row (of any turns) got one: then the server is
// taken for down, as with a 503, so that an outage of a server or gateway
// that answers 500 while it restarts does not spend every turn's attempts.
// An answer in between ends the row.
func TestLLMServerErrorsInARowAreAnOutage(t *testing.T) {
	t.Parallel()
	boom := extractortest.Error(http.StatusInternalServerError, "boom")
	srv := extractortest.NewServer(t, boom, boom, boom, boom, extractortest.Content(`{"facts": [], "context": []}`), boom, boom, extractortest.Error(http.StatusBadRequest, "bad"), boom, boom, boom)
	l := newTestLLM(t, srv, nil)
	for i, want := range []string{"500", "500", "outage", "outage", "ok", "500", "500", "400", "500", "500", "outage"} {
		_, err := l.Extract(context.Background(), testInput(fmt.Sprintf("I'm Ana %d", i)))
		got := "ok"
		switch {
		case err == nil:
		case IsUnreachable(err) && KindOf(err) == KindTransient:
			got = "outage"
		case KindOf(err) == KindTransient:
			got = "500"
		case KindOf(err) == KindPermanent:
			got = "400"
		}
		if got != want {
			t.Errorf("request %d: %s (%v), want %s", i+1, got, err, want)
		}
	}
	// One turn's request failing again and again, with nothing else in
	// between (a quiet system), is that turn's failure: it spends its
	// attempts rather than wait out --llm-max-outage (a review).
	l = newTestLLM(t, extractortest.NewServer(t, boom), nil)
	for i := range 6 {
		if _, err := l.Extract(context.Background(), testInput("the same turn")); IsUnreachable(err) || KindOf(err) != KindTransient {
			t.Fatalf("the same request's %d. 500: %v (unreachable %v), want a transient failure, not an outage", i+1, err, IsUnreachable(err))
		}
	}
}

// TestLLMGatewayTimeoutsInARowAreAnOutage: a gateway's 504 (its own
// timeout on the model behind it) is counted as this client's timeouts
// are: the request's failure until three different requests in a row got
// one, then the server is taken for down; one turn's request answered 504
// again and again stays that turn's failure.
func TestLLMGatewayTimeoutsInARowAreAnOutage(t *testing.T) {
	t.Parallel()
	gw := extractortest.Error(http.StatusGatewayTimeout, "upstream timed out")
	l := newTestLLM(t, extractortest.NewServer(t, gw), nil)
	for i := range 4 {
		if _, err := l.Extract(context.Background(), testInput("the same turn")); err == nil || IsUnreachable(err) || KindOf(err) != KindTransient {
			t.Fatalf("the same request's %d. 504: %v, want a transient failure, not an outage", i+1, err)
		}
	}
	for i, want := range []bool{false, true, true} {
		_, err := l.Extract(context.Background(), testInput(fmt.Sprintf("I'm Ana %d", i)))
		if err == nil || IsUnreachable(err) != want || KindOf(err) != KindTransient {
			t.Errorf("request %d after it: %v (unreachable %v), want unreachable %v", i+1, err, IsUnreachable(err), want)
		}
	}
}

// TestLLMPingHidesPassword: the base URL's password never reaches an error
// (the start-up warning logs it).
func TestLLMPingHidesPassword(t *testing.T) {
	t.Parallel()

	for name, base := range map[string]string{
		"refused":   "http://alice:pw-SECRET@" + closedAddr(t) + "/v1",
		"answering": strings.Replace(extractortest.NewServer(t).URL(), "http://", "http://alice:pw-SECRET@", 1),
	} {
		l, err := NewLLM(LLMConfig{BaseURL: base, Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		err = l.Ping(context.Background())
		if err == nil || strings.Contains(err.Error(), "pw-SECRET") {
			t.Errorf("%s: Ping error %q, want one without the password", name, err)
		}
		_, err = l.Extract(context.Background(), testInput("I'm Ana"))
		if err != nil && strings.Contains(err.Error(), "pw-SECRET") {
			t.Errorf("%s: Extract error %q holds the password", name, err)
		}
	}
}

// closedAddr is an address whose port was just released: connections are
// refused.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestLLMSaysOnceWhenTheServerAnswersAgain: the first reply after the
// server was taken for down (a 503, or the third 500 in a row) is logged
// once, with how long it was down: the end of an outage, which the
// held-back warnings of the waits do not show. A 503 asking to wait
// (Retry-After) is no reply. An outage shorter than outageTold (a blip,
// which can come every few seconds under load) is told at debug, a longer
// one at info. Replies without an outage before them log nothing.
func TestLLMSaysOnceWhenTheServerAnswersAgain(t *testing.T) {
	t.Parallel()
	ok := extractortest.Content(`{"facts": [], "context": []}`)
	down := extractortest.Reply{Status: http.StatusServiceUnavailable, Body: `{"error":"loading model"}`}
	wait := extractortest.Reply{Status: http.StatusServiceUnavailable, Body: `{}`, Header: http.Header{"Retry-After": {"0"}}}
	boom := extractortest.Error(http.StatusInternalServerError, "boom")
	srv := extractortest.NewServer(t, ok, boom, ok, down, wait, ok, ok, boom, boom, boom, ok, ok, down, ok)
	var logs eventstest.SyncBuffer
	l := newTestLLM(t, srv, func(c *LLMConfig) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	var told []string // "<request>:<level>" of each line
	for i := range 14 {
		if i == 13 {
			// The outage the 13th request found has lasted a minute when
			// its reply comes, and this request is its probe (admit).
			l.serverErrors.mu.Lock()
			l.serverErrors.downSince = time.Now().Add(-time.Minute)
			l.serverErrors.prober.Start(time.Time{})
			l.serverErrors.mu.Unlock()
		}
		before := len(logLines(&logs, "model server answering again"))
		_, _ = l.Extract(context.Background(), testInput(fmt.Sprintf("I'm Ana %d", i)))
		if lines := logLines(&logs, "model server answering again"); len(lines) > before {
			for _, line := range lines[before:] {
				told = append(told, fmt.Sprintf("%d:%s", i+1, line.Level))
				if line.DownFor == "" {
					t.Errorf("line %+v without down_for", line)
				}
			}
		}
	}
	if want := []string{"6:DEBUG", "11:DEBUG", "14:INFO"}; !slices.Equal(told, want) {
		t.Fatalf("told the server answering again at %v, want %v: after a 503 and a 503 asking to wait, after three 500s in a row, and at info after a minute's outage; not after a lone 500", told, want)
	}
}

type logLine struct {
	Level, Msg string
	DownFor    string `json:"down_for"`
}

// logLines returns the JSON lines of logs whose message is msg.
func logLines(logs *eventstest.SyncBuffer, msg string) []logLine {
	var out []logLine
	for l := range strings.Lines(logs.String()) {
		var line logLine
		if json.Unmarshal([]byte(l), &line) == nil && line.Msg == msg {
			out = append(out, line)
		}
	}
	return out
}
