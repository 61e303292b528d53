package store

import (
	"slices"
	"testing"
)

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

func TestCandidateReader(t *testing.T) {
	t.Parallel()
	rows := []struct{ q, a, ev, conv, vector string }{
		{"What is my dog called?", "Rex", "e1", "c1", "'call':5A 'dog':4A 'rex':6B"},
		{"Where?", "Paris, with the dog", "e2", "", "'dog':5B 'pari':2B"},
		{"Broken", "vector", "e3", "", "'dog:1A"},
		{"Cat?", "no", "e4", "c2", "'cat':1A"},
	}
	terms := []string{"dog", "pari"}
	want := []Candidate{
		{Item: ContextItem{ID: 1, UserID: "u", Question: "What is my dog called?", Answer: "Rex", EventID: "e1", ConversationID: "c1"}, QuestionLen: 2, AnswerLen: 1,
			Terms: []TermCount{{true, 1, 0}, {}}},
		{Item: ContextItem{ID: 2, UserID: "u", Question: "Where?", Answer: "Paris, with the dog", EventID: "e2"}, QuestionLen: 0, AnswerLen: 2,
			Terms: []TermCount{{true, 0, 1}, {true, 0, 1}}},
		// e3's tsvector does not read: left out.
		{Item: ContextItem{ID: 4, UserID: "u", Question: "Cat?", Answer: "no", EventID: "e4", ConversationID: "c2"}, QuestionLen: 1, AnswerLen: 1,
			Terms: []TermCount{{}, {}}},
	}
	lens := [][2]int{{2, 1}, {0, 2}, {1, 1}, {1, 1}}
	// The statistics row, and with it the terms, may come before, between
	// or after the candidates.
	for at := range len(rows) + 1 {
		var cr candidateReader
		for i, r := range rows {
			if i == at {
				cr.setTerms(terms)
			}
			c := Candidate{Item: ContextItem{ID: int64(i + 1)}, QuestionLen: lens[i][0], AnswerLen: lens[i][1]}
			cr.add(c, []byte(r.q), []byte(r.a), []byte(r.ev), []byte(r.conv), []byte(r.vector), false)
		}
		if at == len(rows) {
			cr.setTerms(terms)
		}
		got := cr.decode("u")
		if len(got) != len(want) {
			t.Fatalf("terms before row %d: %d candidates, want %d: %+v", at, len(got), len(want), got)
		}
		for i := range want {
			if got[i].Item != want[i].Item || got[i].QuestionLen != want[i].QuestionLen || got[i].AnswerLen != want[i].AnswerLen ||
				!slices.Equal(got[i].Terms, want[i].Terms) {
				t.Fatalf("terms before row %d: candidate %d is\n%+v, want\n%+v", at, i, got[i], want[i])
			}
		}
	}
	var none candidateReader
	if got := none.decode("u"); len(got) != 0 {
		t.Fatalf("no candidates: %+v", got)
	}
}
