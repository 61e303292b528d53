package extractor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/extractor"
)

// benchTurns are conversational turns of the length users write: most
// state nothing the rules take, a few do.
var benchTurns = []string{
	"Hey! So I finally finished that painting I was telling you about last week, the one with the lake at sunset. It took me almost three weekends, but I think the colours came out really well, especially the reflections on the water.",
	"Honestly work has been a bit much lately. We have a big release coming up and my manager keeps adding things to the list, so I'm staying late most days and barely have time to cook, let alone go for a run.",
	"My name is Dana and I live in Lisbon, but I grew up in Porto. I work at a small design studio and I'm allergic to peanuts, so please keep that in mind when you suggest recipes.",
	"Can you recommend a few books for the flight? I like historical fiction and the occasional thriller, nothing too gory though. The trip is about eleven hours and I always struggle to sleep on planes.",
	"We adopted a puppy named Biscuit last month! She's a beagle mix, very curious, and she already chewed through two pairs of my shoes. My partner thinks it's hilarious; I'm less amused.",
	"I was thinking about what you said about the budget spreadsheet. If I split the categories by month instead of by quarter, would the formulas for the running totals still work, or do I need to rewrite them?",
}

func BenchmarkRulesExtract(b *testing.B) {
	r := extractor.NewRules()
	ctx := context.Background()
	ts := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	var bytes int
	for _, t := range benchTurns {
		bytes += len(t)
	}
	b.SetBytes(int64(bytes))
	for b.Loop() {
		for i, t := range benchTurns {
			in := extractor.Input{UserID: "u", Turn: extractor.Turn{EventID: strings.Repeat("x", i+1), UserMessage: t, AssistantResponse: "Sure, noted.", Timestamp: ts}}
			if _, err := r.Extract(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
	}
}
