package worker

import (
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestUsageBacklogBound: the backlog gives back what it holds once, and
// drops the oldest calls past maxUsageBacklog, saying how many.
func TestUsageBacklogBound(t *testing.T) {
	var b usageBacklog
	call := func(i int) usageCall { return usageCall{used: store.TokenUsage{PromptTokens: int64(i)}} }
	var calls []usageCall
	for i := range maxUsageBacklog - 1 {
		calls = append(calls, call(i))
	}
	if dropped := b.put(calls); dropped != 0 {
		t.Fatalf("dropped %d under the bound", dropped)
	}
	if dropped := b.put([]usageCall{call(maxUsageBacklog - 1), call(maxUsageBacklog), call(maxUsageBacklog + 1)}); dropped != 2 {
		t.Fatalf("dropped %d, want the 2 oldest", dropped)
	}
	held := b.take()
	if len(held) != maxUsageBacklog || held[0].used.PromptTokens != 2 || held[len(held)-1].used.PromptTokens != maxUsageBacklog+1 {
		t.Fatalf("held %d calls, %d to %d; want %d, 2 to %d", len(held), held[0].used.PromptTokens, held[len(held)-1].used.PromptTokens, maxUsageBacklog, maxUsageBacklog+1)
	}
	if again := b.take(); len(again) != 0 {
		t.Fatalf("taken again: %d calls, want none", len(again))
	}
}
