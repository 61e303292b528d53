package enricher

import (
	"math"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

func wireFacts(facts []store.Fact) []events.Fact {
	out := make([]events.Fact, len(facts))
	for i, f := range facts {
		out[i] = events.Fact{Key: f.Key, Value: f.Value, UpdatedAt: f.UpdatedAt.UTC()}
	}
	return out
}

func wireItems(items []store.ContextItem) []events.ContextItem {
	out := make([]events.ContextItem, len(items))
	for i, it := range items {
		out[i] = events.ContextItem{
			ID:             it.ID,
			Question:       it.Question,
			Answer:         it.Answer,
			Score:          math.Round(it.Score*1e6) / 1e6,
			CreatedAt:      it.CreatedAt.UTC(),
			EventID:        it.EventID,
			ConversationID: it.ConversationID,
		}
	}
	return out
}

// wireUsage maps the store's token counts to the wire's; the map is never
// nil, so that llm_usage is {} rather than null.
func wireUsage(usage map[string]store.TokenUsage) map[string]events.TokenUsage {
	out := make(map[string]events.TokenUsage, len(usage))
	for model, u := range usage {
		out[model] = events.TokenUsage{
			PromptTokens:     u.PromptTokens,
			CompletionTokens: u.CompletionTokens,
			Extractions:      u.Extractions,
		}
	}
	return out
}
