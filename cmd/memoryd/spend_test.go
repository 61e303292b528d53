package main

import (
	"log/slog"
	"testing"
)

// TestSpendCapFlags: the cap flags reach the worker's Config (and, through
// the app, the cap stats show); they default to no cap.
func TestSpendCapFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args            []string
		perUser, global int64
	}{
		{nil, 0, 0},
		{[]string{"--llm-daily-tokens-per-user", "20000", "--llm-daily-tokens", "5000000"}, 20000, 5000000},
	} {
		var o serveOptions
		f := newFlags("serve", "")
		o.register(f)
		if err := f.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		c := o.config(slog.New(slog.DiscardHandler), "memoryd")
		if c.Worker.DailyTokensPerUser != tc.perUser || c.Worker.DailyTokens != tc.global {
			t.Errorf("%v: per user %d, global %d; want %d, %d", tc.args, c.Worker.DailyTokensPerUser, c.Worker.DailyTokens, tc.perUser, tc.global)
		}
	}
}
