package proxy

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

var pickKeep = []string{"id", "choices", "index", "message", "content", "finish_reason"}

// keepMembers is what the picker should leave of a decoded value.
func keepMembers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := map[string]any{}
		for k, e := range v {
			for _, kk := range pickKeep {
				if strings.EqualFold(k, kk) {
					m[k] = keepMembers(e)
				}
			}
		}
		return m
	case []any:
		for i := range v {
			v[i] = keepMembers(v[i])
		}
		return v
	}
	return v
}

func pickIn(in []byte, cut int) []byte {
	p := newPicker(pickKeep...)
	if cut < 0 {
		for i := range in {
			p.feed(in[i : i+1])
		}
		return p.out
	}
	cut %= len(in) + 1
	p.feed(in[:cut])
	p.feed(in[cut:])
	return p.out
}

type replyShape struct {
	ID      string `json:"id"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Content *string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
}

// FuzzPicker: for a valid JSON text, the picked text decodes to the
// original's kept members; the reply's own struct decodes the same from
// both; and pieces cut anywhere give the same output.
func FuzzPicker(f *testing.F) {
	for _, s := range []string{
		`{"id":"c1","object":"chat.completion","created":1}`,
		`{"choices":[{"index":0,"message":{"role":"assistant","content":"Hi \"x\" \\ \u00e9"},"logprobs":{"content":[{"token":"Hi","logprob":-0.1,"top_logprobs":[]}]},"finish_reason":"stop"}],"usage":{"total_tokens":3}}`,
		"{\n \"id\" : \"c1\" , \"usage\" : { \"n\" : [1,2,{}] } , \"choices\" : [ ]\n}",
		`[1,[2,[3]],{"id":{"x":1,"content":[]}},{},[]]`, `"x"`, `12`, `null`, `{}`, `[]`, `{"id":1,"id":2}`,
		`{"content":1e5}`, `{"choices":[[[{"index":-0.5e-3}]]]}`,
	} {
		f.Add([]byte(s), 3)
	}
	f.Fuzz(func(t *testing.T, in []byte, cut int) {
		whole := pickIn(in, -1)
		if cut < 0 {
			cut = -cut
		}
		if got := pickIn(in, cut); string(got) != string(whole) {
			t.Fatalf("%q: cut at %d gives %q, byte by byte %q", in, cut%(len(in)+1), got, whole)
		}
		var orig any
		if json.Unmarshal(in, &orig) != nil {
			return
		}
		p := newPicker(pickKeep...)
		p.feed(in)
		if false {
			_ = p
		}
		var picked any
		if err := json.Unmarshal(whole, &picked); err != nil {
			t.Fatalf("%q is JSON, picked %q is not: %v", in, whole, err)
		}
		if want := keepMembers(orig); !reflect.DeepEqual(picked, want) {
			t.Fatalf("%q: picked %q decodes to %#v, want %#v", in, whole, picked, want)
		}
		var a, b replyShape
		errA, errB := json.Unmarshal(in, &a), json.Unmarshal(whole, &b)
		if (errA == nil) != (errB == nil) || !reflect.DeepEqual(a, b) {
			t.Fatalf("%q: as a reply %+v (%v), picked %q %+v (%v)", in, a, errA, whole, b, errB)
		}
	})
}

// TestPickerReadsNamesAsReplyDecodes: the picker keeps a member
// encoding/json decodes into the reply's fields, whose names it matches
// with their escapes read and case-insensitively; dropping it decoded
// another reply than the upstream's (a tool-call round as an answer, a
// second choice as the first, the id lost).
func TestPickerReadsNamesAsReplyDecodes(t *testing.T) {
	for _, in := range []string{
		`{"\u0069d":"x","choices":[]}`,
		`{"choices":[{"index":0,"message":{"content":"real","Content":"last wins"}}]}`,
		`{"choices":[{"index":0,"message":{"content":"hi"},"FINISH_REASON":"tool_calls"}]}`,
		`{"choices":[{"Index":1,"message":{"content":"hi"},"finish_reason":"stop"}]}`,
		`{"choices":[{"index":0,"message":{"content":"hi"},"finish_reaso\u006e":"tool_calls"}]}`,
		`{"choices":[{"index":0,"message":{"content":"hi"},"\u0066\u0069\u006e\u0069\u0073\u0068\u005f\u0072\u0065\u0061\u0073\u006f\u006e":"tool_calls"}]}`,
	} {
		var want, got replyShape
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		out := pickIn([]byte(in), -1)
		if err := json.Unmarshal(out, &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s\npicked %s: decodes to %+v (%v), the reply to %+v", in, out, got, err, want)
		}
	}
}

// TestReplyMalformedJSONNotRemembered: a reply encoding/json refuses is not
// remembered (the client got it as is and could not read it either), as
// before the picker; its closers and member names are checked.
func TestReplyMalformedJSONNotRemembered(t *testing.T) {
	for _, in := range []string{
		`{"choices":[{"index":0,"message":{"content":"real","junk"}},{"index":0,"message":{"content":"x"}}]}`,
		`}]{"choices":[{"index":0,"message":{"content":"A"}}]}`,
		`{"choices":[{"index":0,"message":{"content":"A"}}],"usage":{"a":[}}}`,
		`{"choices":[{"index":0,"message":{"content":"A"}]]}`,
	} {
		if json.Valid([]byte(in)) {
			t.Fatalf("%s is valid", in)
		}
		a := reply{}
		a.feed([]byte(in))
		a.end()
		if a.done() {
			t.Errorf("%s: remembered %q", in, a.text.String())
		}
	}
}

// TestPickerDepthBounded: a reply of nested arrays holds a frame per byte
// kept (16 bytes each, over 100 MB of heap for a 4 MiB reply); past
// encoding/json's own depth limit it is not read.
func TestPickerDepthBounded(t *testing.T) {
	var a reply
	chunk := []byte(strings.Repeat("[", 32<<10))
	for range 4 {
		a.feed(chunk)
	}
	if !a.overflow {
		t.Fatalf("%d containers deep: still reading, %d frames held", 4*len(chunk), len(a.body.frames))
	}
	var v any
	deep := "[]"
	if json.Unmarshal([]byte(deep), &v) != nil {
		t.Fatal("encoding/json refuses the depth the picker keeps")
	}
}
