package store_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// BenchmarkForgetUser: a forget (ForgetUser) of a user with 300 and with
// 30,000 turns, beside 10 other users' 1,000 turns each, and reports the
// mean forget in milliseconds (forget_ms), and the fastest (min_ms, less
// of what a loaded machine adds). The user's turns, 100 a
// conversation, were claimed by a burst and processed, but the newest 50
// (pending), their event ids in an order other than their time order, as a
// stream's ids are; each iteration records them again and vacuums the
// table, outside the timer.
//
//	go test -run '^$' -bench BenchmarkForgetUser -benchtime 5x ./store/
func BenchmarkForgetUser(b *testing.B) {
	for _, n := range []int{300, 30_000} {
		b.Run(fmt.Sprintf("turns=%d", n), func(b *testing.B) {
			ctx, s := context.Background(), storetest.New(b)
			for u := range 10 {
				recordTurns(b, ctx, s, fmt.Sprintf("other%d", u), 1000)
			}
			var spent, least time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				recordTurns(b, ctx, s, "alice", n)
				if _, err := s.Pool().Exec(ctx, `VACUUM ANALYZE turns`); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				t := time.Now()
				r, _, err := s.ForgetUser(ctx, "alice", "alice-token", store.StreamPosition{})
				took := time.Since(t)
				spent += took
				if least == 0 || took < least {
					least = took
				}
				if err != nil || r.Turns != int64(n) {
					b.Fatalf("forget deleted %d turns (%v), want %d", r.Turns, err, n)
				}
			}
			b.ReportMetric(float64(spent.Microseconds())/1000/float64(b.N), "forget_ms")
			b.ReportMetric(float64(least.Microseconds())/1000, "min_ms")
		})
	}
}

// recordTurns records n turns of user, one a minute, 100 a conversation,
// each conversation's claimed, then all processed but the newest 50, their
// event ids hashes of their index (not in time order).
func recordTurns(b *testing.B, ctx context.Context, s *store.Store, user string, n int) {
	b.Helper()
	const batch = 5000
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < n; i += batch {
		var turns []store.Turn
		var done []string
		for j := i; j < min(i+batch, n); j++ {
			h := fnv.New64a()
			fmt.Fprintf(h, "%s/%d", user, j)
			id := fmt.Sprintf("%016x", h.Sum64())
			turns = append(turns, store.Turn{EventID: id, UserID: user, ConversationID: fmt.Sprintf("c%d", j/100),
				UserMessage:       fmt.Sprintf("message %d of a user who talks about many things", j),
				AssistantResponse: "noted", TurnAt: start.Add(time.Duration(j) * time.Minute)})
			if j < n-50 {
				done = append(done, id)
			}
		}
		if _, err := s.InsertTurns(ctx, turns); err != nil {
			b.Fatal(err)
		}
		// Each conversation's turns claimed by a burst's job, as the
		// extraction of a conversation claims them before its save.
		for c := i / 100; c*100 < min(i+batch, n); c++ {
			if _, err := s.ClaimConversationTurns(ctx, store.Claim{JobID: int64(c + 1), UserID: user,
				ConversationID: fmt.Sprintf("c%d", c), Limit: 100, TTL: time.Hour}); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.MarkProcessed(ctx, user, done, store.Provenance{Extractor: "rules"}); err != nil {
			b.Fatal(err)
		}
	}
}
