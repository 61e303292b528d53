package enricher

import "testing"

func TestPlainWholeNumbers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, data, path, want string // want "" = not rewritten
	}{
		{"top level", `{"max_results":3.0}`, "max_results", `{"max_results":3}`},
		{"exponent", `{"max_results": 0.3e1 ,"x":1}`, "max_results", `{"max_results": 3 ,"x":1}`},
		{"negative", `{"id":-2.50e1}`, "id", `{"id":-25}`},
		{"only the named field; the rest byte for byte",
			`{"metadata":{"z":1.50,"a":2.0,"s":"<\u00e9>"},"chunk_tokens":200.0}`, "chunk_tokens",
			`{"metadata":{"z":1.50,"a":2.0,"s":"<\u00e9>"},"chunk_tokens":200}`},
		{"nested", `{"after":{"created_at":"2026-01-01T00:00:00Z","id":7.0}}`, "after.id", `{"after":{"created_at":"2026-01-01T00:00:00Z","id":7}}`},
		{"in an array", `{"ids":[1.0,2,3e0]}`, "ids", `{"ids":[1,2,3]}`},
		{"a key that looks like the path elsewhere", `{"a":{"id":1.0},"id":2.0}`, "id", `{"a":{"id":1.0},"id":2}`},
		{"a key in another case, as encoding/json matches it", `{"Max_Results":3.0}`, "max_results", `{"Max_Results":3}`},
		{"a fraction", `{"max_results":2.5}`, "max_results", ""},
		{"a fraction beyond float precision", `{"max_results":2.0000000000000000000000000000000000000001}`, "max_results", ""},
		{"a large exponent", `{"max_results":1e400}`, "max_results", ""},
		{"an underflowing exponent", `{"max_results":1e-999999999}`, "max_results", ""},
		{"out of int64", `{"max_results":1e19}`, "max_results", ""},
		{"plain already", `{"max_results":3}`, "max_results", ""},
		{"malformed", `{"max_results":3.0`, "max_results", ""},
	}
	for _, tt := range tests {
		got, ok := plainWholeNumbers([]byte(tt.data), tt.path)
		if tt.want == "" {
			if ok {
				t.Errorf("%s: rewritten to %s, want it left", tt.name, got)
			}
			continue
		}
		if !ok || string(got) != tt.want {
			t.Errorf("%s: %s, %v; want %s", tt.name, got, ok, tt.want)
		}
	}
}
