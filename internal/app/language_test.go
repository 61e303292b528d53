package app

import (
	"context"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
)

// TestLanguagesEndToEnd: Japanese and Chinese turns published on the
// stream, extracted by the offline rules and found by enrich over NATS
// through a word inside them; one user sets Japanese after their turns
// (re-indexing them), the other Chinese before. Mixed text is found by its
// Latin and its CJK part.
func TestLanguagesEndToEnd(t *testing.T) {
	t.Parallel()
	a := startTestApp(t, nil)
	nc, err := a.Conn()
	if err != nil {
		t.Fatal(err)
	}
	client := events.NewClient(nc, a.cfg.Prefix)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

	publishAndWait(t, a, "yuki",
		events.Turn{ID: "yuki-1", UserID: "yuki", UserMessage: "東京の天気はどうですか", AssistantResponse: "今日の東京は晴れです", Timestamp: at},
		events.Turn{ID: "yuki-2", UserID: "yuki", UserMessage: "東京でReactを勉強しています", AssistantResponse: "Hooksから始めましょう", Timestamp: at.Add(time.Minute)})
	// Set after the turns: their items are re-indexed under simple.
	if r, err := client.SetLanguage(ctx, "yuki", "ja"); err != nil || r.Config != "simple" || r.Reindexed != 2 {
		t.Fatalf("set ja = %+v, %v", r, err)
	}
	// Set before the turn: its items are indexed under simple at once.
	if r, err := client.SetLanguage(ctx, "mei", "zh"); err != nil || r.Config != "simple" || r.Reindexed != 0 {
		t.Fatalf("set zh = %+v, %v", r, err)
	}
	publishAndWait(t, a, "mei",
		events.Turn{ID: "mei-1", UserID: "mei", UserMessage: "今天的天气很好", AssistantResponse: "是的，阳光明媚", Timestamp: at})

	for _, tt := range []struct{ user, message, want string }{
		{"yuki", "東京の天気を教えて", "東京の天気はどうですか"},
		{"yuki", "Reactのおすすめは？", "東京でReactを勉強しています"},
		{"yuki", "勉強", "東京でReactを勉強しています"},
		{"mei", "天气怎么样", "今天的天气很好"},
	} {
		e, err := client.Enrich(ctx, events.EnrichRequest{UserID: tt.user, Message: tt.message})
		if err != nil || e.Degraded || len(e.Context) == 0 || e.Context[0].Question != tt.want {
			t.Errorf("enrich %s %q = %+v, %v; want %q first", tt.user, tt.message, e.Context, err, tt.want)
		}
	}
}
