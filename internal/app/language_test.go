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
	a, client, ctx := startLanguageApp(t)
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

// TestSouthEastAsianScriptsEndToEnd: Thai, Lao, Khmer and Burmese, written
// without spaces between words, published on the stream and found by
// enrich through a word inside a sentence, both for a user who never set a
// language (English) and for one who set Thai.
func TestSouthEastAsianScriptsEndToEnd(t *testing.T) {
	t.Parallel()
	a, client, ctx := startLanguageApp(t)
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	if r, err := client.SetLanguage(ctx, "malee", "th"); err != nil || r.Config != "simple" || r.Language != "th" {
		t.Fatalf("set th = %+v, %v", r, err)
	}
	turns := []events.Turn{
		// "I like shrimp fried rice from the shop near my house." "Sounds delicious."
		{UserMessage: "ฉันชอบกินข้าวผัดกุ้งที่ร้านใกล้บ้าน", AssistantResponse: "ฟังดูอร่อยมาก"},
		// "Tomorrow I'm going to Chiang Mai with my mother." "Have a safe trip."
		{UserMessage: "พรุ่งนี้ฉันจะไปเชียงใหม่กับแม่", AssistantResponse: "เดินทางปลอดภัยนะ"},
		// "My cat is called Som-O." "What a cute name."
		{UserMessage: "แมวของฉันชื่อส้มโอ", AssistantResponse: "ชื่อน่ารักมาก"},
		// Lao: "I like to eat sticky rice with grilled chicken."
		{UserMessage: "ຂ້ອຍມັກກິນເຂົ້າໜຽວກັບໄກ່ປີ້ງ", AssistantResponse: "ແຊບຫຼາຍ"},
		// Khmer: "I work at a bank in Phnom Penh."
		{UserMessage: "ខ្ញុំធ្វើការនៅធនាគារក្នុងភ្នំពេញ", AssistantResponse: "ល្អណាស់"},
		// Burmese: "Next month I will go to Mandalay."
		{UserMessage: "နောက်လကျွန်တော်မန္တလေးကိုသွားမယ်", AssistantResponse: "ခရီးသွားတာပျော်ပါစေ"},
	}
	for _, user := range []string{"somchai", "malee"} {
		var ts []events.Turn
		for i, tr := range turns {
			tr.ID, tr.UserID, tr.Timestamp = user+"-"+string(rune('a'+i)), user, at.Add(time.Duration(i)*time.Minute)
			ts = append(ts, tr)
		}
		publishAndWait(t, a, user, ts...)
	}
	for _, user := range []string{"somchai", "malee"} {
		for _, tt := range []struct{ message, want string }{
			{"ฉันชอบกินอะไร", turns[0].UserMessage},             // "What do I like to eat?"
			{"ข้าวผัดร้านไหนอร่อย", turns[0].UserMessage},       // "Which shop's fried rice is good?"
			{"แมวของฉันชื่ออะไรนะ", turns[2].UserMessage},       // "What is my cat called again?"
			{"ฉันจะไปเชียงใหม่เมื่อไหร่", turns[1].UserMessage}, // "When am I going to Chiang Mai?"
			{"ເຂົ້າໜຽວ", turns[3].UserMessage},                  // "sticky rice"
			{"ធនាគារ", turns[4].UserMessage},                    // "bank"
			{"မန္တလေး", turns[5].UserMessage},                   // "Mandalay"
		} {
			e, err := client.Enrich(ctx, events.EnrichRequest{UserID: user, Message: tt.message})
			if err != nil || e.Degraded || len(e.Context) == 0 || e.Context[0].Question != tt.want {
				t.Errorf("enrich %s %q = %+v, %v; want %q first", user, tt.message, e.Context, err, tt.want)
			}
		}
	}
}

// startLanguageApp starts an app and returns it with a client of its
// NATS connection and a context of a minute.
func startLanguageApp(t *testing.T) (*App, *events.Client, context.Context) {
	t.Helper()
	a := startTestApp(t, nil)
	nc, err := a.Conn()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return a, events.NewClient(nc, a.cfg.Prefix), ctx
}
