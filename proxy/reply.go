package proxy

import (
	"bytes"
	"encoding/json"
	"strings"
)

// maxReplyBytes bounds what the proxy keeps of a reply to read the
// assistant's text from (the client gets every byte regardless): one line
// of a stream, the members a non-streamed reply is read for (its logprobs
// and other members are not kept), and the text itself, of which a turn
// keeps the first 256 KiB. A reply whose kept part is longer is not
// remembered.
const maxReplyBytes = 4 << 20

// maxPickedString bounds what is kept of each string of a non-streamed
// reply (picker.maxString), as written: a longer answer keeps its start,
// of which the turn keeps 256 KiB (escaped at most 6 bytes a byte, in
// 1.5 MiB), and its reply is still remembered. Streamed answers are cut
// as they come (line).
const maxPickedString = 2 << 20

// utf8BOM is the byte order mark a stream may open with.
var utf8BOM = []byte("\ufeff")

// reply accumulates the assistant's text of the first choice from the bytes
// relayed: Server-Sent Events chunks when streamed, one JSON object
// otherwise.
type reply struct {
	streamed bool
	id       string
	text     strings.Builder
	finished bool
	// reason is choice 0's finish reason, once finished.
	reason string
	// calls: choice 0 made tool (or legacy function) calls, whatever its
	// finish reason: OpenAI ends a round of calls with "stop" when
	// tool_choice names the function, and other servers (vLLM, Ollama's
	// older versions, OpenVINO) with "stop" always.
	calls bool
	// ended is a streamed reply's [DONE] seen; open are the choices seen
	// without their finish reason yet, and closed whether one has had
	// its own (tool calls' included). A stream whose body ends without
	// [DONE], or with a choice open (n > 1: one choice may finish long
	// before another), broke off, however cleanly its body ended (a
	// close-delimited body cut by a dropped connection reads as a clean
	// end).
	ended bool
	// event and data are the SSE event being read: its "event:" line's
	// name and its "data:" lines joined by line feeds (hasData: it has
	// one), until the blank line that dispatches it, as the OpenAI SDKs
	// read them.
	event   string
	data    []byte
	hasData bool
	open    map[int]bool // a choice seen: true while open, false once finished
	nopen   int          // the choices open
	closed  bool
	many    bool // more choices than maxOpenChoices: only [DONE] ends it
	// discard is the text not kept: a stream read only for its end
	// (memory off), which would otherwise hold up to maxReplyBytes.
	discard  bool
	overflow bool
	// broken: a data event the client's SDK fails on (not JSON, or an
	// error event).
	broken bool
	// pending is an incomplete line (streamed); body reads a non-streamed
	// reply's members.
	pending []byte
	// bomRead: the stream's start was read for a byte order mark, which
	// the SSE format (and openai-node's decoder) skips.
	bomRead bool
	body    *picker
}

func (a *reply) feed(b []byte) {
	if a.overflow {
		return
	}
	if !a.streamed {
		if a.body == nil {
			a.body = newPicker("id", "choices", "index", "message", "content", "finish_reason", "tool_calls", "function_call")
			a.body.maxString = maxPickedString
		}
		a.body.feed(b)
		if len(a.body.out) > maxReplyBytes || a.body.tooDeep {
			a.overflow, a.body = true, nil
		}
		return
	}
	a.pending = append(a.pending, b...)
	if len(a.pending) > maxReplyBytes {
		a.overflow, a.pending = true, nil
		return
	}
	if !a.bomRead {
		// A stream may open with a UTF-8 byte order mark: read as part of
		// the first field's name, it lost the first event (its text
		// missing from the turn, or the whole answer of a one-event
		// reply), which openai-node reads.
		if len(a.pending) < len(utf8BOM) && bytes.HasPrefix(utf8BOM, a.pending) {
			return // the mark's start: the next bytes, or the end, tell
		}
		a.pending, a.bomRead = bytes.TrimPrefix(a.pending, utf8BOM), true
	}
	for {
		// A line ends with CRLF, LF or a CR alone (the SSE format's three).
		i := bytes.IndexAny(a.pending, "\r\n")
		if i < 0 || (a.pending[i] == '\r' && i+1 == len(a.pending)) {
			return // a CR last may be a CRLF's half: the next bytes, or the end, tell
		}
		a.line(a.pending[:i])
		n := i + 1
		if a.pending[i] == '\r' && a.pending[n] == '\n' {
			n++
		}
		a.pending = a.pending[n:]
	}
}

// line reads one SSE line: fields accumulate into an event, which a blank
// line dispatches. The SDKs parse an event's data as one JSON value, the
// lines of several "data:" lines joined, and an event holding "data:" or
// named "error" is dispatched even with its data empty.
func (a *reply) line(l []byte) {
	if len(l) == 0 {
		a.dispatch()
		return
	}
	if l[0] == ':' {
		return // a comment (the keep-alive many servers send)
	}
	name, value, _ := bytes.Cut(l, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(name) {
	case "event":
		a.event = string(value)
	case "data":
		if len(a.data)+len(value) > maxReplyBytes {
			a.overflow, a.data = true, nil
			return
		}
		if a.hasData {
			a.data = append(a.data, '\n')
		}
		a.data, a.hasData = append(a.data, value...), true
	}
}

// dispatch reads the event accumulated: [DONE] or a chunk.
func (a *reply) dispatch() {
	event, data, some := a.event, a.data, a.hasData || a.event != ""
	a.event, a.data, a.hasData = "", a.data[:0], false
	if !some || a.ended {
		// After [DONE] the OpenAI SDKs read no event (Python breaks, Node
		// skips them): what follows is nothing the user's client saw.
		return
	}
	if string(bytes.TrimSpace(data)) == "[DONE]" {
		a.ended = true
		return
	}
	var chunk struct {
		ID string `json:"id"`
		// Error is a server's error event in the stream (OpenAI's SDKs
		// raise it).
		Error   json.RawMessage `json:"error"`
		Choices []struct {
			Index int `json:"index"`
			Delta struct {
				Content      string          `json:"content"`
				ToolCalls    json.RawMessage `json:"tool_calls"`
				FunctionCall json.RawMessage `json:"function_call"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
	}
	if json.Unmarshal(data, &chunk) != nil || (len(chunk.Error) > 0 && string(chunk.Error) != "null") || event == "error" {
		// The client's SDK fails on such an event (the OpenAI SDKs
		// raise a parse error or the error), so the user saw no answer:
		// the turn is not remembered, whatever came after it. Empty data
		// ("data:" alone) is such an event: both SDKs fail to parse it.
		// An event named "error" counts too, whatever its data: a server
		// says it failed (openai-node 7 threw on one in a walk; 6.49
		// throws only when its data holds an error), and a turn it ended
		// is not one to remember.
		a.broken = true
		return
	}
	if a.id == "" {
		a.id = chunk.ID
	}
	for _, c := range chunk.Choices {
		open, seen := a.open[c.Index]
		switch {
		case c.FinishReason != nil && *c.FinishReason != "":
			// A chunk of a finished choice without a finish reason (Azure
			// OpenAI's content filter annotations) does not open it again.
			if open {
				a.nopen--
			}
			if seen || len(a.open) < maxOpenChoices {
				a.setChoice(c.Index, false)
			}
			a.closed = true
		case seen:
		case len(a.open) >= maxOpenChoices:
			a.many = true
		default:
			a.setChoice(c.Index, true)
			a.nopen++
		}
		if c.Index != 0 {
			continue
		}
		if makesCalls(c.Delta.ToolCalls, c.Delta.FunctionCall) {
			a.calls = true
		}
		if !a.discard && a.text.Len() < maxReplyBytes {
			// Past it, the turn would not keep more.
			a.text.WriteString(c.Delta.Content)
		}
		if c.FinishReason != nil && *c.FinishReason != "" && !callsTools(*c.FinishReason) {
			a.finished, a.reason = true, *c.FinishReason
		}
	}
}

func (a *reply) setChoice(index int, open bool) {
	if a.open == nil {
		a.open = map[int]bool{}
	}
	a.open[index] = open
}

// end is the end of the body.
func (a *reply) end() {
	if a.overflow {
		return
	}
	if a.streamed {
		if len(a.pending) > 0 {
			a.line(bytes.TrimSuffix(a.pending, []byte("\r")))
		}
		// An event without its blank line at the body's end: openai-node
		// dispatches it (Python drops it, which costs its user nothing
		// when it is the [DONE]).
		a.dispatch()
		a.pending, a.data = nil, nil
		return
	}
	var resp struct {
		ID      string `json:"id"`
		Choices []struct {
			Index   int `json:"index"`
			Message struct {
				Content      *string         `json:"content"`
				ToolCalls    json.RawMessage `json:"tool_calls"`
				FunctionCall json.RawMessage `json:"function_call"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if a.body == nil || a.body.bad || json.Unmarshal(a.body.out, &resp) != nil {
		return
	}
	a.body = nil
	a.id = resp.ID
	for _, c := range resp.Choices {
		if c.Index == 0 && makesCalls(c.Message.ToolCalls, c.Message.FunctionCall) {
			a.calls = true
		}
		if c.Index == 0 && c.Message.Content != nil && !callsTools(c.FinishReason) {
			a.text.WriteString(*c.Message.Content)
			a.finished, a.reason = true, c.FinishReason
		}
	}
}

// callsTools reports whether a reply ending for reason is a round of tool
// (or legacy function) calls: not the turn's answer, even with some text
// before the calls ("Let me check."). The client sends the results and the
// answer comes with the next request, which carries the same user message
// and is remembered then; remembered now too, the turn would be stored
// twice, once with a partial or empty answer.
func callsTools(reason string) bool {
	return reason == "tool_calls" || reason == "function_call"
}

// makesCalls reports whether a message (or a stream's delta) holds tool
// calls or a legacy function call: an empty tool_calls (vLLM sends one with
// every answer) and a null function_call do not count. Both are read as
// raw values, so that one of an unexpected type costs the chunk nothing
// (its text and finish reason are still read).
func makesCalls(toolCalls, functionCall json.RawMessage) bool {
	var calls []json.RawMessage
	if json.Unmarshal(toolCalls, &calls) == nil && len(calls) > 0 {
		return true
	}
	fc := string(bytes.TrimSpace(functionCall))
	return fc != "" && fc != "null"
}

// brokeOff reports whether a streamed reply's body ended without its end:
// no [DONE], and a choice without its finish reason (or none with one).
// Unknown (false) past the bytes kept.
func (a *reply) brokeOff() bool {
	return a.streamed && !a.overflow && !a.ended && (a.nopen > 0 || !a.closed || a.many)
}

// maxOpenChoices bounds the choices a reply tracks (OpenAI's n is at most
// 128): a stream with more ends only by [DONE].
const maxOpenChoices = 128

// cut reports whether the upstream cut the reply by its token limit
// (finish reason "length").
func (a *reply) cut() bool { return a.reason == "length" }

// done reports whether a whole reply was read: a finish reason seen in the
// stream, or a choice in the JSON reply.
// A reply of tool calls is not (see callsTools), whatever its finish
// reason.
func (a *reply) done() bool { return a.finished && !a.calls && !a.overflow && !a.broken }
