package proxy

import (
	"bytes"
	"encoding/json"
	"testing"
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
