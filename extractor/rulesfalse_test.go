package extractor

import (
	"context"
	"testing"
)

// TestRulesRealTextFalseFacts: statements that are not about the user's
// name, home, job or languages must store no such fact. The first four
// have the shape of user messages in the LongMemEval-S haystacks (a resume
// for a made-up person with "Assume" misspelt, a pasted review, a pasted
// transcript), reworded here; the dataset's text is not copied.
// Each row stored the value shown in `got` before the rules read who speaks
// (be000ea; the last six until frames named outright were read).
func TestRulesRealTextFalseFacts(t *testing.T) {
	t.Parallel()
	r := NewRules()
	for _, tt := range []struct {
		user string
		key  string
		got  string // what main stores (a false fact)
	}{
		// Misspelt "Assume": a resume for a made-up person.
		{"Could you draft a strong resume for a backend team lead? Asume that my name is Carlos Ruiz and I'm from Lima. I mostly write Go.", "name", "Carlos Ruiz"},
		// "Assume" itself is caught for the name but not for the rest of the sentence.
		{"Assume that my name is Carlos Ruiz and I'm from Lima. Write my resume.", "hometown", "Lima"},
		// A customer's comment pasted to answer it.
		{"Answer this customer comment and thank them: I'm 51 and not great with gadgets, but the setup was easy.", "birth_year", "1972"},
		// A transcript pasted to summarise.
		{"Summarise in 5 bullets: Hello and welcome to another episode of the Growth Talks show My name is Petra Novak, head of sales at Acme, and today we talk about hiring.", "name", "Petra Novak"},
		{"I'm called to testify next week, which is scary.", "name", "to testify next week"},
		{"I live in the moment and try not to worry.", "location", "the moment and try not"},
		{"I work as hard as I can but never get promoted.", "occupation", "hard"},
		{"I speak too fast when I'm nervous.", "languages", "fast"},
		{"I'm married to my work these days, no time for dating.", "relationship_status", "married"},
		{"I'm from Microsoft support, your computer has a virus.", "hometown", "Microsoft support"},
		// Frames named outright, and a task verb alone before a paste (a
		// review of the rules).
		{"Let's play a game. You're a detective and I'm a suspect. My name is Jack and I live in Chicago.", "name", "Jack"},
		{"Write a story where I'm a wizard. My name is Gandalf and I live in Rivendell.", "location", "Rivendell"},
		{"Scenario: I'm 30, I live in Denver and I work as a pilot.", "occupation", "pilot"},
		{"For the sake of argument, my name is Max and I live in Oslo.", "name", "Max"},
		{"Summarize:\n\nMy name is Petra Novak and I live in Prague. Our team grew fast.", "name", "Petra Novak"},
		{"Translate: I live in Madrid and I work as a baker.", "location", "Madrid"},
	} {
		res, err := r.Extract(context.Background(), Input{UserID: "u1", Turn: Turn{EventID: "e1", UserMessage: tt.user, AssistantResponse: "OK.", Timestamp: testTurnTime}})
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := res.Facts[tt.key]; ok {
			t.Errorf("%q\n  stored %s=%q (a false fact)", tt.user, tt.key, v)
			continue
		}
		for _, c := range res.Changes {
			if c.Key == tt.key && (c.Op == OpAdd || c.Op == OpSet) {
				t.Errorf("%q\n  %v %s=%q (a false fact)", tt.user, c.Op, tt.key, c.Value)
			}
		}
	}
}
