package main

import "testing"

func TestAsksReply(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want bool
	}{
		{"I'm going back to Moncayo: what was the name of that hiking trail you recommended?", true},
		{"You mentioned that companies use two-factor authentication. Which others?", true},
		{"In our previous chat, you suggested a few terms. Which was the first?", true},
		{"I was going through our previous conversation about fashion brands.", true},
		{"You’ve given me a list of bottles, which were they?", true},
		{"you once mentioned a book", true},
		{"Can you suggest some activities I can do in the evening?", false},
		{"Do you know I said I'd move to Lisbon?", false},
		{"What did I say about my dog last week?", false},
		{"How many stars do I need to reach the gold level?", false},
		{"the last session of my course", false},
		{"", false},
	} {
		if got := asksReply(tc.q); got != tc.want {
			t.Errorf("asksReply(%q) = %v, want %v", tc.q, got, tc.want)
		}
	}
}
