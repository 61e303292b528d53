package proxy

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestReplyStream feeds an SSE body cut at every byte boundary: the text,
// id and completion are the same whatever the chunking; a stream without a
// finish reason is not done (not remembered).
func TestReplyStream(t *testing.T) {
	body := "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\r\n\r\n" +
		": keep-alive comment\n\n" +
		"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null},{\"index\":1,\"delta\":{\"content\":\"other choice\"}}]}\n\n" +
		"data:{\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo é\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: [DONE]\n\n"
	for cut := 1; cut < len(body); cut++ {
		a := reply{streamed: true}
		a.feed([]byte(body[:cut]))
		a.feed([]byte(body[cut:]))
		a.end()
		if !a.done() || a.text.String() != "Hello é" || a.id != "c1" {
			t.Fatalf("cut at %d: done %v, text %q, id %q", cut, a.done(), a.text.String(), a.id)
		}
	}
	cutShort := body[:strings.Index(body, "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},")]
	a := reply{streamed: true}
	a.feed([]byte(cutShort))
	a.end()
	if a.done() {
		t.Fatal("a stream cut before its finish reason counts as done")
	}
	if !a.brokeOff() {
		t.Fatal("a stream cut before its finish reason and [DONE] did not break off")
	}
	// Read only for its end (memory off): its end is seen, its text not
	// kept.
	a = reply{streamed: true, discard: true}
	a.feed([]byte(body))
	a.end()
	if a.brokeOff() || a.text.Len() != 0 {
		t.Fatalf("a whole stream read for its end: broke off %v, kept %d bytes of text; want its end seen and no text", a.brokeOff(), a.text.Len())
	}
}

func TestReplyJSON(t *testing.T) {
	for _, tc := range []struct {
		body string
		done bool
		text string
	}{
		{`{"id":"c2","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`, true, "Hi"},
		{`{"id":"c2","choices":[]}`, false, ""},
		{`{"id":"c2","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"}`, false, ""}, // cut
		{`not json`, false, ""},
	} {
		a := reply{}
		for _, b := range []byte(tc.body) {
			a.feed([]byte{b})
		}
		a.end()
		if a.done() != tc.done || a.text.String() != tc.text {
			t.Errorf("%s: done %v text %q; want %v %q", tc.body, a.done(), a.text.String(), tc.done, tc.text)
		}
	}
}

// TestRequestBody: only the last user message changes; the other messages'
// bytes, "<" included, are the client's; "memory" is dropped.
func TestRequestBody(t *testing.T) {
	in := `{"model":"m","memory":true,"messages":[{"role":"system","content":"a <b> & c"},{"role":"user","content":"first"},{"role":"assistant","content":"x"},{"role":"user","content":"second"},{"role":"assistant","content":"pending"}],"temperature":0.2}`
	rq, err := parseRequest([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if rq.last != 3 || rq.text != "second" || !rq.memory || rq.stream {
		t.Fatalf("parsed %+v", rq)
	}
	out, err := rq.body("[facts: location=Lisbon]")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Memory      *bool             `json:"memory"`
		Temperature float64           `json:"temperature"`
		Messages    []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.Memory != nil || got.Temperature != 0.2 || len(got.Messages) != 5 {
		t.Fatalf("body %s", out)
	}
	for i, want := range []string{`{"role":"system","content":"a <b> & c"}`, `{"role":"user","content":"first"}`, `{"role":"assistant","content":"x"}`, "", `{"role":"assistant","content":"pending"}`} {
		if i != 3 && string(got.Messages[i]) != want {
			t.Errorf("message %d: %s, want %s", i, got.Messages[i], want)
		}
	}
	// The word in a message, or a nested "memory" key, is no second field.
	if _, err := parseRequest([]byte(`{"memory":false,"messages":[{"role":"user","content":"my \"memory\""}],"tools":[{"memory":1}]}`)); err != nil {
		t.Errorf("a nested \"memory\": %v", err)
	}
	if string(got.Messages[3]) != `{"content":"second\n\n[facts: location=Lisbon]","role":"user"}` {
		t.Errorf("enriched message %s", got.Messages[3])
	}
	// "memory" twice: the decoder kept the last, so an opt-out followed by
	// true was remembered (a security walk).
	for _, bad := range []string{`[]`, `{"memory":"no","messages":[]}`, `{"messages":{}}`, `{"messages":[1]}`,
		`{"memory":false,"messages":[{"role":"user","content":"x"}],"memory":true}`} {
		if _, err := parseRequest([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// TestToolCallRoundsAreNotTurns: a reply that ends in tool (or legacy
// function) calls is not remembered, streamed or not, with or without text
// before the calls; a reply that ends otherwise is. Before, a streamed round
// was remembered with an empty answer (a proxy walk), and a review found a
// JSON round with "content": "", a stream with "Let me check." before its
// calls, and function_call remembered too.
func TestToolCallRoundsAreNotTurns(t *testing.T) {
	const call = `"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]`
	for _, c := range []struct {
		name     string
		streamed bool
		body     string
		done     bool
	}{
		{"stream of calls alone", true, `data: {"choices":[{"index":0,"delta":{` + call + `},"finish_reason":null}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n", false},
		{"stream with text before the calls", true, `data: {"choices":[{"index":0,"delta":{"content":"Let me check."},"finish_reason":null}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{` + call + `},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n", false},
		{"stream of a legacy function call", true, `data: {"choices":[{"index":0,"delta":{"function_call":{"name":"f","arguments":"{}"}},"finish_reason":"function_call"}]}` + "\n\n", false},
		{"stream of an answer", true, `data: {"choices":[{"index":0,"delta":{"content":"Lisbon."},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n", true},
		{"JSON calls, content null", false, `{"choices":[{"index":0,"message":{"role":"assistant","content":null,` + call + `},"finish_reason":"tool_calls"}]}`, false},
		{"JSON calls, content empty", false, `{"choices":[{"index":0,"message":{"role":"assistant","content":"",` + call + `},"finish_reason":"tool_calls"}]}`, false},
		{"JSON answer", false, `{"choices":[{"index":0,"message":{"role":"assistant","content":"Lisbon."},"finish_reason":"stop"}]}`, true},
		// A round of calls that ends with "stop": OpenAI's with a named
		// tool_choice, vLLM's, older Ollama's, OpenVINO's. It was
		// remembered with an empty answer, and its user message again
		// with the next round's answer.
		{"stream of calls ending stop", true, `data: {"choices":[{"index":0,"delta":{"content":null,` + call + `},"finish_reason":null}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n", false},
		{"stream of a function call ending stop", true, `data: {"choices":[{"index":0,"delta":{"function_call":{"name":"f","arguments":"{}"}},"finish_reason":"stop"}]}` + "\n\n", false},
		{"JSON calls ending stop, content empty", false, `{"choices":[{"index":0,"message":{"role":"assistant","content":"",` + call + `},"finish_reason":"stop"}]}`, false},
		{"JSON answer with empty tool_calls", false, `{"choices":[{"index":0,"message":{"role":"assistant","content":"Lisbon.","tool_calls":[],"function_call":null},"finish_reason":"stop"}]}`, true},
		{"stream answer with an odd tool_calls", true, `data: {"choices":[{"index":0,"delta":{"content":"Lisbon.","tool_calls":{}},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n", true},
		{"stream answer with empty tool_calls", true, `data: {"choices":[{"index":0,"delta":{"content":"Lisbon.","tool_calls":[],"function_call":null},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n", true},
	} {
		a := reply{streamed: c.streamed}
		a.feed([]byte(c.body))
		a.end()
		if a.done() != c.done {
			t.Errorf("%s: done %v (text %q), want %v", c.name, a.done(), a.text.String(), c.done)
		}
	}
}

// TestReplyJSONWithLargeLogprobs: a whole non-streamed reply whose JSON is
// over maxReplyBytes only because of its logprobs (top_logprobs: 20 on a
// few thousand tokens) is still a complete reply with a short answer:
// operations.md promises its turn is published ("a choice in the JSON"),
// the reply cut to 256 KiB at most. It was silently not remembered.
func TestReplyJSONWithLargeLogprobs(t *testing.T) {
	top := strings.Repeat(`{"token":"tok","logprob":-1.2345678,"bytes":[116,111,107]},`, 20)
	tok := `{"token":"tok","logprob":-0.1234567,"bytes":[116,111,107],"top_logprobs":[` + strings.TrimSuffix(top, ",") + `]},`
	var lp strings.Builder
	for lp.Len() <= maxReplyBytes {
		lp.WriteString(tok)
	}
	body := `{"id":"c3","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Your boat is Aurora."},` +
		`"logprobs":{"content":[` + strings.TrimSuffix(lp.String(), ",") + `]},"finish_reason":"stop"}]}`
	if !json.Valid([]byte(body)) {
		t.Fatal("test body is not JSON")
	}
	a := reply{}
	for b := []byte(body); len(b) > 0; {
		n := min(len(b), 32<<10) // as relay reads
		a.feed(b[:n])
		b = b[n:]
	}
	a.end()
	if !a.done() || a.text.String() != "Your boat is Aurora." {
		t.Fatalf("a complete %d-byte reply: done %v, text %q; want its answer remembered", len(body), a.done(), a.text.String())
	}
}

// TestReplyStreamEnds: where a stream's end is seen, for the three line
// ends SSE allows (CR alone included: such a complete stream was cut to
// the client) and for several choices (n > 1: one finishing before another
// ended the stream, and a body breaking off then reached the client as a
// clean end). Each body is cut at every byte boundary.
func TestReplyStreamEnds(t *testing.T) {
	chunk := func(index int, content, finish string) string {
		f := "null"
		if finish != "" {
			f = `"` + finish + `"`
		}
		return `data: {"id":"c1","choices":[{"index":` + string(rune('0'+index)) + `,"delta":{"content":"` + content + `"},"finish_reason":` + f + `}]}`
	}
	for _, tc := range []struct {
		name     string
		lines    []string
		eol      string
		brokeOff bool
		done     bool
		text     string
	}{
		{"LF", []string{chunk(0, "Hi", ""), chunk(0, "", "stop"), "data: [DONE]"}, "\n\n", false, true, "Hi"},
		{"CRLF", []string{chunk(0, "Hi", ""), chunk(0, "", "stop"), "data: [DONE]"}, "\r\n\r\n", false, true, "Hi"},
		{"CR alone", []string{chunk(0, "Hi", ""), chunk(0, "", "stop"), "data: [DONE]"}, "\r\r", false, true, "Hi"},
		{"CR alone, no [DONE]", []string{chunk(0, "Hi", ""), chunk(0, "", "stop")}, "\r\r", false, true, "Hi"},
		{"CR alone, cut", []string{chunk(0, "Hi", "")}, "\r", true, false, "Hi"},
		{"two choices, both finished", []string{chunk(0, "Hal", ""), chunk(1, "Done", "stop"), chunk(0, "lo", "stop")}, "\n\n", false, true, "Hallo"},
		{"two choices, the other finished, cut", []string{chunk(0, "Hal", ""), chunk(1, "Done", "stop")}, "\n\n", true, false, "Hal"},
		{"two choices, the first finished, cut", []string{chunk(0, "Hi", ""), chunk(1, "Do", ""), chunk(0, "", "stop")}, "\n\n", true, true, "Hi"},
		{"two choices, [DONE]", []string{chunk(0, "Hi", "stop"), chunk(1, "Do", ""), "data: [DONE]"}, "\n\n", false, true, "Hi"},
	} {
		body := strings.Join(tc.lines, tc.eol) + tc.eol
		for cut := 0; cut <= len(body); cut++ {
			a := reply{streamed: true}
			a.feed([]byte(body[:cut]))
			a.feed([]byte(body[cut:]))
			a.end()
			if a.brokeOff() != tc.brokeOff || a.done() != tc.done || a.text.String() != tc.text {
				t.Fatalf("%s, cut at %d: broke off %v, done %v, text %q; want %v, %v, %q", tc.name, cut,
					a.brokeOff(), a.done(), a.text.String(), tc.brokeOff, tc.done, tc.text)
			}
		}
	}
}

// TestReplyJSONLongAnswer: a non-streamed answer longer than what the
// proxy keeps of a reply (5 MB, over maxReplyBytes) is remembered by its
// start, as a streamed one is and operations.md promises ("a reply over
// 256 KiB by its first 256 KiB"), in ASCII, in escapes of 6 bytes a
// character and in CJK. It was not remembered, and nothing said why.
func TestReplyJSONLongAnswer(t *testing.T) {
	for name, content := range map[string]string{
		"ascii":   strings.Repeat("lorem ipsum ", 5_000_000/12),
		"escapes": strings.Repeat("\x01\"", 1_000_000),
		"cjk":     strings.Repeat("東京の天気", 400_000),
	} {
		msg, _ := json.Marshal(content)
		body := `{"id":"c9","choices":[{"index":0,"message":{"role":"assistant","content":` + string(msg) + `},"finish_reason":"stop"}]}`
		a := reply{}
		for b := []byte(body); len(b) > 0; {
			n := min(len(b), 32<<10)
			a.feed(b[:n])
			b = b[n:]
		}
		a.end()
		got := a.text.String()
		if !a.done() || len(got) < 256<<10 || !strings.HasPrefix(content, got) {
			t.Errorf("%s: a %d-byte answer: done %v, kept %d bytes (its start: %v); want done, its first 256 KiB or more",
				name, len(content), a.done(), len(got), strings.HasPrefix(content, got))
		}
	}
}

// TestReplyStreamWithAnEventTheClientFailsOn: a stream holding a data
// event that is not JSON, or an error event, before or after its finish
// reason is not a turn: the OpenAI SDKs raise on such an event, so the user
// saw an error, not an answer (proxy walk: both were remembered). Events
// are read as the SDKs read them (openai-node 7.60's SSEDecoder, Python's):
// an event's "data:" lines joined make one JSON value; an empty "data:"
// and an "error" event without data are dispatched and fail to parse; the
// "event:" line may come after the data; a comment is no event.
func TestReplyStreamWithAnEventTheClientFailsOn(t *testing.T) {
	chunk := "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n"
	finish := "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
	done := "data: [DONE]\n\n"
	for _, c := range []struct {
		name, body string
		want       bool
	}{
		{"whole", chunk + finish + done, true},
		{"comment keep-alive", chunk + ": ping\n\n" + finish + done, true},
		{"empty data", chunk + "data:\n\n" + finish + done, false},
		{"error event without data", chunk + "event: error\n\n" + finish + done, false},
		{"error event named after its data", chunk + "data: {\"message\":\"overloaded\"}\nevent: error\n\n" + finish + done, false},
		{"error event after [DONE]", chunk + finish + done + "event: error\ndata: {}\n\n", true},
		{"chunk over two data lines", "data: {\"id\":\"c1\",\ndata: \"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\n" + done, true},
		{"two chunks in one event", "data: {\"id\":\"c1\",\"choices\":[]}\ndata: {\"id\":\"c1\",\"choices\":[]}\n\n" + chunk + finish + done, false},
		{"[DONE] without its blank line", chunk + finish + "data: [DONE]", true},
		{"an unfinished event at the end", chunk + finish + done[:len(done)-1] + "event: error", true},
		{"not JSON", chunk + "data: {not json\n\n" + finish + done, false},
		{"error event after the finish", chunk + finish + "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n" + done, false},
		{"error null", chunk + "data: {\"id\":\"c1\",\"error\":null,\"choices\":[]}\n\n" + finish + done, true},
	} {
		a := reply{streamed: true}
		a.feed([]byte(c.body))
		a.end()
		if a.done() != c.want {
			t.Errorf("%s: remembered %v, want %v", c.name, a.done(), c.want)
		}
	}
}

// TestReplyStreamIgnoresEventsAfterDone: the OpenAI SDKs stop reading at
// [DONE] (Python breaks, Node skips every later event), so an event after
// it, even one they would fail on, is one the user's client never saw: the
// answer before it is remembered.
func TestReplyStreamIgnoresEventsAfterDone(t *testing.T) {
	chunk := "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n"
	finish := "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
	done := "data: [DONE]\n\n"
	for _, after := range []string{"data: {not json\n\n", "data: {\"error\":{\"message\":\"overloaded\"}}\n\n"} {
		a := reply{streamed: true}
		a.feed([]byte(chunk + finish + done + after))
		a.end()
		if !a.done() {
			t.Errorf("%q after [DONE]: not remembered", after)
		}
	}
}

// TestReplyStreamOpeningWithAByteOrderMark: a stream that opens with a
// UTF-8 byte order mark is read from its first event, as the SSE format
// says and openai-node reads it (its TextDecoder drops the mark). Before,
// the mark made the first line's field "\ufeffdata", an unknown field:
// the first chunk's text was missing from the turn remembered, and a
// reply whose finish came first was not remembered at all. The mark may
// come split over reads.
func TestReplyStreamOpeningWithAByteOrderMark(t *testing.T) {
	chunk := "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n"
	finish := "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" there\"},\"finish_reason\":\"stop\"}]}\n\n"
	body := "\ufeff" + chunk + finish + "data: [DONE]\n\n"
	for _, size := range []int{len(body), 1, 2} {
		a := reply{streamed: true}
		for i := 0; i < len(body); i += size {
			a.feed([]byte(body[i:min(i+size, len(body))]))
		}
		a.end()
		if got := a.text.String(); !a.done() || got != "Hi there" {
			t.Errorf("read %d bytes at a time: remembered %v, text %q; want remembered, \"Hi there\"", size, a.done(), got)
		}
	}
	// Only a mark at the start is skipped; one later is text.
	a := reply{streamed: true}
	a.feed([]byte(strings.Replace(chunk, "Hi", "\ufeffHi", 1) + finish + "data: [DONE]\n\n"))
	a.end()
	if got := a.text.String(); got != "\ufeffHi there" {
		t.Errorf("a mark inside the text: %q", got)
	}
}
