package store

import "testing"

func TestTermCountsRead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		vector  string
		terms   []string
		want    []TermCount
		wantErr bool
	}{
		{"empty vector", "", []string{"dog"}, []TermCount{{}}, false},
		{"question and answer", "'dog':1A,4B 'rex':3B", []string{"dog", "rex"}, []TermCount{{true, 1, 1}, {true, 0, 1}}, false},
		{"weights C and D count as answer", "'dog':1,2C,3A", []string{"dog"}, []TermCount{{true, 1, 2}}, false},
		{"absent term", "'cat':1A", []string{"dog"}, []TermCount{{}}, false},
		{"no positions", "'dog' 'cat':2A", []string{"dog", "cat"}, []TermCount{{true, 0, 0}, {true, 1, 0}}, false},
		{"doubled quote", "'it''s':1A", []string{"it's"}, []TermCount{{true, 1, 0}}, false},
		{"doubled backslash", `'a\\b':2B`, []string{`a\b`}, []TermCount{{true, 0, 1}}, false},
		{"quote at the end of a lexeme", "'x''':1A 'y':2A", []string{"x'", "y"}, []TermCount{{true, 1, 0}, {true, 1, 0}}, false},
		{"multibyte", "'日本語':1A,2A", []string{"日本語"}, []TermCount{{true, 2, 0}}, false},
		{"no terms", "'dog':1A", nil, []TermCount{}, false},
		{"unterminated", "'dog:1A", []string{"dog"}, nil, true},
		{"no quote", "dog:1A", []string{"dog"}, nil, true},
		{"junk after positions", "'dog':1A;", []string{"dog"}, nil, true},
	}
	var tc termCounts
	for _, tt := range tests {
		// Counts left from a previous vector must not leak into this one.
		counts := make([]TermCount, len(tt.terms))
		for i := range counts {
			counts[i] = TermCount{true, 7, 7}
		}
		err := tc.read([]byte(tt.vector), tt.terms, counts)
		if (err != nil) != tt.wantErr {
			t.Fatalf("%s: err %v, want error %v", tt.name, err, tt.wantErr)
		}
		if err != nil {
			continue
		}
		for i := range tt.want {
			if counts[i] != tt.want[i] {
				t.Fatalf("%s: term %q counted %+v, want %+v", tt.name, tt.terms[i], counts[i], tt.want[i])
			}
		}
	}
}
