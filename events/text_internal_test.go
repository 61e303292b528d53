package events

import (
	"encoding/json"
	"errors"
	"testing"
)

// checkText names the first field that is not UTF-8 by its JSON path, and
// passes every request whose text is.
func TestCheckText(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		req  any
		want string // the field named; "" for none
	}{
		{"valid", StoreRequest{UserID: "alice", Question: "Wo ist Köln?", Answer: "am Rhein 🏞"}, ""},
		{"field", StoreRequest{UserID: "alice", Question: "Where \xff is it", Answer: "here"}, "question"},
		{"second field", StoreRequest{UserID: "alice", Question: "ok", Answer: "K\xf6ln"}, "answer"},
		{"pointer", &EnrichRequest{UserID: "alice", Message: "caf\xe9"}, "message"},
		{"raw line", ImportRequest{UserID: "alice", Lines: []json.RawMessage{json.RawMessage(`{"a":1}`), json.RawMessage("{\"v\":\"\xf6\"}")}}, "lines[1]"},
		{"metadata", DocsPutRequest{UserID: "alice", Metadata: json.RawMessage("{\"t\":\"\xe9\"}")}, "metadata"},
		{"map key", map[string]string{"ok": "fine", "k\xf6": "v"}, "value key"},
		{"cut rune", EnrichRequest{UserID: "alice", Message: "🏞"[:2]}, "message"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := checkText(tt.req)
			var te *TextError
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want == "":
			case !errors.As(err, &te) || te.Field != tt.want || !errors.Is(err, ErrInvalidText):
				t.Fatalf("err = %v; want the field %q named, wrapping ErrInvalidText", err, tt.want)
			}
		})
	}
}
