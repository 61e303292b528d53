package extractor

import (
	"strings"
	"testing"
)

// TestPythonHexEscapesUTF8Run: a run of \xHH escapes holding a UTF-8
// sequence anywhere is a bytes repr ("é" or "Ã©"), refused wherever the
// sequence starts; before, only a run whose first byte was >= 0x80 was,
// and '\x01\xc3\xa9' was read as the mojibake "\x01Ã©".
func TestPythonHexEscapesUTF8Run(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in     string
		want   string // JSON escapes written; "" when refused
		wantOK bool
	}{
		{`\xe9`, `\u00e9`, true},
		{`\x41\x42`, `\u0041\u0042`, true},
		{`\xe9\xe9`, `\u00e9\u00e9`, true}, // not UTF-8: Latin-1 "éé"
		{`\x01\xe9`, `\u0001\u00e9`, true},
		{`\xc3\xa9`, "", false},
		{`\x01\xc3\xa9`, "", false},
		{`\x41\xc3\xa9\x42`, "", false},
		{`\x41\xe2\x82\xac`, "", false}, // "A€" as bytes
		{`\x4`, "", false},
		{`\xe9\x4`, "", false},
	}
	for _, tt := range tests {
		var b strings.Builder
		n, ok := pythonHexEscapes(tt.in+"'", &b)
		if ok != tt.wantOK {
			t.Errorf("pythonHexEscapes(%s) ok = %v, want %v (wrote %s)", tt.in, ok, tt.wantOK, b.String())
			continue
		}
		if ok && (b.String() != tt.want || n != len(tt.in)) {
			t.Errorf("pythonHexEscapes(%s) = %d, %s; want %d, %s", tt.in, n, b.String(), len(tt.in), tt.want)
		}
	}
}
