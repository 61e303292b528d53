package store

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func TestTermCountsRead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		vector  string
		terms   []string
		want    []termCount
		wantErr bool
	}{
		{"empty vector", "", []string{"dog"}, []termCount{{}}, false},
		{"question and answer", "'dog':1A,4B 'rex':3B", []string{"dog", "rex"}, []termCount{{true, 1, 1}, {true, 0, 1}}, false},
		{"weights C and D count as answer", "'dog':1,2C,3A", []string{"dog"}, []termCount{{true, 1, 2}}, false},
		{"absent term", "'cat':1A", []string{"dog"}, []termCount{{}}, false},
		{"no positions", "'dog' 'cat':2A", []string{"dog", "cat"}, []termCount{{true, 0, 0}, {true, 1, 0}}, false},
		{"doubled quote", "'it''s':1A", []string{"it's"}, []termCount{{true, 1, 0}}, false},
		{"doubled backslash", `'a\\b':2B`, []string{`a\b`}, []termCount{{true, 0, 1}}, false},
		{"quote at the end of a lexeme", "'x''':1A 'y':2A", []string{"x'", "y"}, []termCount{{true, 1, 0}, {true, 1, 0}}, false},
		{"multibyte", "'日本語':1A,2A", []string{"日本語"}, []termCount{{true, 2, 0}}, false},
		{"unterminated", "'dog:1A", []string{"dog"}, nil, true},
		{"no quote", "dog:1A", []string{"dog"}, nil, true},
		{"junk after positions", "'dog':1A;", []string{"dog"}, nil, true},
	}
	var tc termCounts
	for _, tt := range tests {
		err := tc.read([]byte(tt.vector), tt.terms)
		if (err != nil) != tt.wantErr {
			t.Fatalf("%s: err %v, want error %v", tt.name, err, tt.wantErr)
		}
		if err != nil {
			continue
		}
		if len(tc.counts) != len(tt.want) {
			t.Fatalf("%s: %d counts, want %d", tt.name, len(tc.counts), len(tt.want))
		}
		for i := range tt.want {
			if tc.counts[i] != tt.want[i] {
				t.Fatalf("%s: term %q counted %+v, want %+v", tt.name, tt.terms[i], tc.counts[i], tt.want[i])
			}
		}
	}
}

func TestRankOrderThresholdLimit(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	coll := collection{n: 10, avgq: 3, avga: 5}
	var arena []byte
	cand := func(id int64, age time.Duration, vector string) candidate {
		return candidate{id: id, createdAt: at.Add(-age), qlen: 3, alen: 5,
			question: push(&arena, []byte(fmt.Sprint("q", id))), search: push(&arena, []byte(vector))}
	}
	cands := []candidate{
		cand(1, 0, "'dog':1B"),            // answer only
		cand(2, 0, "'dog':1A"),            // question
		cand(3, 24*time.Hour, "'dog':1A"), // same, older
		cand(4, 0, "'cat':1A"),            // no term
		cand(5, 0, "'dog:1A"),             // unreadable
		cand(6, 0, "'dog':1A"),            // ties with 2, higher id
	}
	got := rank("u", cands, arena, []string{"dog"}, coll, at, 0, 10)
	wantIDs := []int64{6, 2, 3, 1}
	if len(got) != len(wantIDs) {
		t.Fatalf("ranked %+v, want ids %v", got, wantIDs)
	}
	for i, id := range wantIDs {
		if got[i].ID != id || got[i].Question != fmt.Sprint("q", id) || got[i].UserID != "u" {
			t.Fatalf("position %d is %+v, want item %d (%+v)", i, got[i], id, got)
		}
	}
	// df = 4 of the candidates (the unreadable one is not counted); one
	// question match in a question of mean length gives f = 1.
	idf := math.Log(1 + (10+IDFPrior-4+0.5)/(4+0.5))
	s := idf * (K1 + 1) / (1 + K1)
	if want := s / (s + RelevanceHalf); math.Abs(got[0].Score-want) > 1e-12 {
		t.Fatalf("score %.15f, want %.15f", got[0].Score, want)
	}
	if got := rank("u", cands, arena, []string{"dog"}, coll, at, got[2].Score, 2); len(got) != 2 || got[0].ID != 6 || got[1].ID != 2 {
		t.Fatalf("threshold and limit: %+v", got)
	}
}
