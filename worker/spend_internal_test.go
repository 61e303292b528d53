package worker

import (
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

func TestOverCapRule(t *testing.T) {
	for _, tc := range []struct {
		name         string
		sp           store.Spend
		perUser, all int64
		want         bool
	}{
		{"no caps", store.Spend{User: 1 << 40, All: 1 << 40}, 0, 0, false},
		{"under the user cap", store.Spend{User: 99, All: 500}, 100, 0, false},
		{"at the user cap", store.Spend{User: 100, All: 500}, 100, 0, true},
		{"over the user cap", store.Spend{User: 101, All: 500}, 100, 0, true},
		{"under both", store.Spend{User: 99, All: 999}, 100, 1000, false},
		{"at the global cap, user under", store.Spend{User: 0, All: 1000}, 100, 1000, true},
		{"global cap alone", store.Spend{User: 5000, All: 999}, 0, 1000, false},
	} {
		if got := overCap(tc.sp, tc.perUser, tc.all); got != tc.want {
			t.Errorf("%s: overCap(%+v, %d, %d) = %v, want %v", tc.name, tc.sp, tc.perUser, tc.all, got, tc.want)
		}
	}
}

func TestNextDay(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	for _, tc := range []struct {
		at, want time.Time
	}{
		{time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC), time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)},
		{time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)},
		{time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		// 00:30 in Berlin is still the previous UTC day.
		{time.Date(2026, 11, 22, 0, 30, 0, 0, berlin), time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)},
	} {
		if got := nextDay(tc.at); !got.Equal(tc.want) {
			t.Errorf("nextDay(%s) = %s, want %s", tc.at, got, tc.want)
		}
	}
}
