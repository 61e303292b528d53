package proxy

import "testing"

// TestMemoryTwiceSpelledWithEscapes: "memory" given twice is a 400 however
// the second key is spelled: a JSON key may escape any of its letters
// ("memor\u0079" is "memory" to the decoder, which keeps the last), so an
// opt-out followed by such a key was remembered. The check counted only
// the key's literal spelling.
func TestMemoryTwiceSpelledWithEscapes(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"memory":false,"messages":[{"role":"user","content":"x"}],"memor\u0079":true}`,
		`{"\u006demory":false,"memory":true,"messages":[{"role":"user","content":"x"}]}`,
	} {
		rq, err := parseRequest([]byte(body))
		if err == nil {
			t.Errorf("%s: no error (memory %v), want \"memory\" given twice", body, rq.memory)
		}
	}
	// One escaped key alone is the field, once.
	rq, err := parseRequest([]byte(`{"memor\u0079":false,"messages":[{"role":"user","content":"caf\u00e9"}]}`))
	if err != nil || rq.memory {
		t.Errorf("an escaped memory key alone: memory %v, %v; want false, no error", rq != nil && rq.memory, err)
	}
}
