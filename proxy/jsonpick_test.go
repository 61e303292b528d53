package proxy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestPicker: the members kept, with their values picked alike, and the
// rest dropped, whatever the white space, the escapes in strings and
// where the pieces are cut.
func TestPicker(t *testing.T) {
	keep := []string{"id", "choices", "message", "content", "finish_reason", "index"}
	tests := []struct {
		name, in, want string
	}{
		{"flat", `{"id":"c1","object":"chat.completion","created":1}`, `{"id":"c1"}`},
		{"first member dropped", `{"object":"x","id":"c1"}`, `{"id":"c1"}`},
		{"nested", `{"choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"logprobs":{"content":[{"token":"Hi","logprob":-0.1,"top_logprobs":[]}]},"finish_reason":"stop"}],"usage":{"total_tokens":3}}`,
			`{"choices":[{"index":0,"message":{"content":"Hi"},"finish_reason":"stop"}]}`},
		{"white space", "{\n  \"id\" : \"c1\" ,\n  \"usage\" : { \"n\" : 1 } ,\n  \"choices\" : [ ]\n}\n", `{"id":"c1","choices":[]}`},
		{"strings holding JSON", `{"x":"}]{\"id\":1","content":"a \"quoted\" } ] , : word\\","id":"c\\\"1"}`,
			`{"content":"a \"quoted\" } ] , : word\\","id":"c\\\"1"}`},
		{"a kept name inside a dropped value", `{"logprobs":{"content":[{"content":"x","id":2}]},"id":"c1"}`, `{"id":"c1"}`},
		{"scalars", `{"index":-1.5e+3,"content":null,"finish_reason":true,"id":false}`, `{"index":-1.5e+3,"content":null,"finish_reason":true,"id":false}`},
		{"arrays of scalars and objects", `{"choices":[1,"two",{"x":1},[3,{"id":4}],null]}`, `{"choices":[1,"two",{},[3,{"id":4}],null]}`},
		{"dropped scalar between kept", `{"id":1,"n":2,"index":3}`, `{"id":1,"index":3}`},
		{"unicode", `{"content":"東京 \u00e9 😀","x":"é"}`, `{"content":"東京 \u00e9 😀"}`},
		{"a long name", `{"` + string(bytes.Repeat([]byte("k"), 200)) + `":{"id":1},"id":2}`, `{"id":2}`},
	}
	for _, tt := range tests {
		for _, size := range []int{1, 2, 7, len(tt.in)} {
			p := newPicker(keep...)
			for b := []byte(tt.in); len(b) > 0; {
				n := min(size, len(b))
				p.feed(b[:n])
				b = b[n:]
			}
			if string(p.out) != tt.want {
				t.Errorf("%s, pieces of %d: %s, want %s", tt.name, size, p.out, tt.want)
			}
		}
	}
}

// TestPickerKeepingAllIsCompact: with every name kept, the picked text is
// the input compacted.
func TestPickerKeepingAllIsCompact(t *testing.T) {
	in := []byte(`{"id": "c1", "choices": [ {"index": 0, "message": {"role": "assistant", "content": "a\nb \"c\" \\ {]"}, "finish_reason": "stop"} ],
	  "usage": {"prompt_tokens": 12, "completion_tokens": 4.5e1}, "flags": [true, false, null, -0.25, "x"]}`)
	p := newPicker("id", "choices", "index", "message", "role", "content", "finish_reason", "usage", "prompt_tokens", "completion_tokens", "flags")
	p.feed(in)
	var want bytes.Buffer
	if err := json.Compact(&want, in); err != nil {
		t.Fatal(err)
	}
	if string(p.out) != want.String() {
		t.Fatalf("picked %s\nwant     %s", p.out, want.String())
	}
}

// TestPickerCutsStringsWhole: a kept string over maxString is cut where it
// is whole, never inside an escape or a UTF-8 sequence, and closed: the
// output is JSON whose string is a start of the input's, at every cut
// point.
func TestPickerCutsStringsWhole(t *testing.T) {
	s := "ab\\\"c\u00e9\\\\d\U0001F600e\u6771\\u0041\\u00e9\\n" + `\ud83d\ude00` + "z"
	in := `{"content":"` + s + `","keep":1}`
	var whole struct{ Content string }
	if err := json.Unmarshal([]byte(in), &whole); err != nil {
		t.Fatal(err)
	}
	for max := 1; max <= len(s)+2; max++ {
		p := newPicker("content", "keep")
		p.maxString = max
		for i := range len(in) { // a byte at a time: cut anywhere
			p.feed([]byte{in[i]})
		}
		var got struct {
			Content string
			Keep    int
		}
		if err := json.Unmarshal(p.out, &got); err != nil || p.bad || got.Keep != 1 {
			t.Fatalf("maxString %d: %s: %v, bad %v", max, p.out, err, p.bad)
		}
		// A surrogate pair cut between its halves reads as U+FFFD.
		if c := strings.TrimSuffix(got.Content, "\uFFFD"); !strings.HasPrefix(whole.Content, c) || !utf8.ValidString(got.Content) {
			t.Fatalf("maxString %d: kept %q, not a start of %q", max, got.Content, whole.Content)
		}
	}
}
