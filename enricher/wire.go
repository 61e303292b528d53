package enricher

import (
	"math"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// The mapping from store types to wire types, in one place: times go out
// in UTC whatever the server's zone, scores rounded to six places.

func wireFact(f store.Fact) events.Fact {
	return events.Fact{
		Key:            f.Key,
		Value:          f.Value,
		UpdatedAt:      f.UpdatedAt.UTC(),
		SourceAt:       f.SourceAt.UTC(),
		EventID:        f.EventID,
		ConversationID: f.ConversationID,
	}
}

// wireChanges maps a fact's history; never nil.
func wireChanges(changes []store.FactChange) []events.FactChange {
	out := make([]events.FactChange, len(changes))
	for i, c := range changes {
		out[i] = events.FactChange{
			ID:             c.ID,
			Op:             c.Op,
			OldValue:       c.OldValue,
			NewValue:       c.NewValue,
			EventID:        c.EventID,
			ConversationID: c.ConversationID,
			ChangedAt:      c.ChangedAt.UTC(),
		}
		if c.SourceAt != nil {
			out[i].SourceAt = c.SourceAt.UTC()
		}
	}
	return out
}

func wireFacts(facts []store.Fact) []events.Fact {
	out := make([]events.Fact, len(facts))
	for i, f := range facts {
		out[i] = wireFact(f)
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

// wireStats maps a user's counters; jobs_pending is kept for older clients
// and equals turns_pending (a turn is pending until its job has run).
func wireStats(st store.UserStats) events.StatsReply {
	var last *time.Time
	if st.LastProcessedAt != nil {
		t := st.LastProcessedAt.UTC()
		last = &t
	}
	return events.StatsReply{
		TurnsReceived:   st.TurnsReceived,
		TurnsProcessed:  st.TurnsProcessed,
		TurnsFailed:     st.TurnsFailed,
		TurnsPending:    st.TurnsPending,
		JobsPending:     st.TurnsPending,
		Facts:           st.Facts,
		ContextItems:    st.ContextItems,
		LastProcessedAt: last,
		LLMUsage:        wireUsage(st.LLMUsage), // never nil: {} for a user without usage
		LLMTokensToday:  st.TokensToday,
	}
}
