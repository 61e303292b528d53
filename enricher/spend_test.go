package enricher_test

import (
	"testing"
	"time"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestStatsShowSpendAgainstTheCap: stats carry the user's tokens of today
// (not older days', not other users') and the per-user daily cap.
func TestStatsShowSpendAgainstTheCap(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, func(c *enricher.Config) { c.DailyTokensPerUser = 5000 })
	ctx := ctxT(t)
	today := time.Now()
	for _, u := range []struct {
		user string
		day  time.Time
		n    int64
	}{{"u", today, 120}, {"u", today, 30}, {"u", today.AddDate(0, 0, -2), 999}, {"other", today, 77}} {
		if _, err := st.AddTurnUsage(ctx, u.user, store.StreamPosition{Seq: 1}, u.user, "m", u.day, store.TokenUsage{PromptTokens: u.n, Extractions: 1}, store.CallID{}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := h.client.Stats(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	if s.LLMTokensToday != 150 || s.LLMDailyTokenCap != 5000 {
		t.Fatalf("stats = %+v; want 150 tokens today against a cap of 5000", s)
	}
}
