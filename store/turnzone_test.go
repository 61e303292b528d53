package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestTurnOffsetReadBack: a turn is read back in the UTC offset it was
// recorded with, "Z" (and every turn recorded before migration 060) in
// UTC, not in the process's local zone, which pgx reads a timestamptz in:
// a host set to Tokyo read a "Z" turn at 20:00 on Dec 1 as 05:00 on Dec
// 2, a day late for its relative dates (a review). The zone is checked,
// not time.Local changed (other goroutines read it).
func TestTurnOffsetReadBack(t *testing.T) {
	t.Parallel()
	ctx, s := context.Background(), storetest.New(t)
	at := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	ny := time.Date(2026, 12, 1, 23, 55, 0, 0, time.FixedZone("", -5*3600))
	if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "z", UserID: "ana", UserMessage: "hi", TurnAt: at}, {EventID: "ny", UserID: "ana", UserMessage: "hi", TurnAt: ny}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		event string
		at    time.Time
	}{{"z", at}, {"ny", ny}} {
		got, err := s.GetTurn(ctx, "ana", want.event)
		if err != nil {
			t.Fatal(err)
		}
		_, off := got.TurnAt.Zone()
		_, wantOff := want.at.Zone()
		utc := want.at.Location() == time.UTC
		if !got.TurnAt.Equal(want.at) || off != wantOff || (utc && got.TurnAt.Location() != time.UTC) {
			t.Errorf("turn %s read back at %v in %v, want %v (offset %d)", want.event, got.TurnAt, got.TurnAt.Location(), want.at, wantOff)
		}
	}
}
