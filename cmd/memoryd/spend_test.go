package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/internal/app"
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
		c := serveConfig(t, tc.args)
		if c.Worker.DailyTokensPerUser != tc.perUser || c.Worker.DailyTokens != tc.global {
			t.Errorf("%v: per user %d, global %d; want %d, %d", tc.args, c.Worker.DailyTokensPerUser, c.Worker.DailyTokens, tc.perUser, tc.global)
		}
	}
}

// TestEnrichLimitFlags: the enrich limits reach the enricher's Config; the
// per-user one, unset, is derived when the App is made (a quarter of
// --enrich-max-in-flight and at most half of --enrich-max-conns), so
// raising the total alone raises it only up to half the connections.
func TestEnrichLimitFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args                  []string
		total, perUser, inApp int
	}{
		{nil, 64, 0, 4},
		{[]string{"--enrich-max-in-flight", "256"}, 256, 0, 4},
		{[]string{"--enrich-max-in-flight", "256", "--enrich-max-conns", "40"}, 256, 0, 20},
		{[]string{"--enrich-max-in-flight", "16", "--enrich-max-conns", "40"}, 16, 0, 4},
		{[]string{"--enrich-max-user-in-flight", "64"}, 64, 64, 64},
	} {
		c := serveConfig(t, tc.args)
		if c.Enricher.MaxInFlight != tc.total || c.Enricher.MaxUserEnrichInFlight != tc.perUser {
			t.Errorf("%v: total %d, per user %d; want %d, %d", tc.args, c.Enricher.MaxInFlight, c.Enricher.MaxUserEnrichInFlight, tc.total, tc.perUser)
		}
		a, err := app.New(c)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got := a.Config().Enricher.MaxUserEnrichInFlight; got != tc.inApp {
			t.Errorf("%v: the App works on %d enrich requests of one user at once, want %d", tc.args, got, tc.inApp)
		}
	}
	_, errOut, code := runArgs(context.Background(), "serve", "--enrich-max-user-in-flight", "100", "--nats-url", "nats://127.0.0.1:1")
	if code != 2 || !strings.HasPrefix(errOut, "memoryd serve: --enrich-max-user-in-flight 100 is above --enrich-max-in-flight (64)\n") {
		t.Errorf("serve --enrich-max-user-in-flight 100: exit %d, stderr %q", code, errOut)
	}
}

// serveConfig is the app's Config serve's flags give for args.
func serveConfig(t *testing.T, args []string) app.Config {
	t.Helper()
	var o serveOptions
	f := newFlags("serve", "")
	o.register(f)
	if err := f.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o.config(slog.New(slog.DiscardHandler), "memoryd")
}

// TestCommandsOpenOneConnectionAtStart: a one-shot command's pool opens one
// connection at start; serve's keeps the store's default (four kept ready).
func TestCommandsOpenOneConnectionAtStart(t *testing.T) {
	t.Parallel()
	var o connOptions
	if got := o.config("memoryd-failed", slog.New(slog.DiscardHandler)).Store.MinConns; got != 1 {
		t.Errorf("a command's Store.MinConns = %d, want 1", got)
	}
	if got := serveConfig(t, nil).Store.MinConns; got != 0 {
		t.Errorf("serve's Store.MinConns = %d, want 0 (the store's default)", got)
	}
}
