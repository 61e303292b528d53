package main

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/events/eventstest"
)

// TestStatsShowsSpendAgainstCap: stats prints the user's model tokens of
// the day against their daily cap, as memory.stats answers them
// (operations.md, "Daily spend caps"): an ops walk's user over the cap had
// two turns extracted offline, and stats said nothing of it without --json.
// Without a per-user cap the line says so, not "no daily cap": the reply
// does not carry --llm-daily-tokens, everyone's cap, which a review found
// the line denying while it sent the user's turns offline.
func TestStatsShowsSpendAgainstCap(t *testing.T) {
	t.Parallel()
	nc := eventstest.Conn(t)
	prefix, _ := eventstest.Names(t, nc)
	reply := map[string]string{
		"alice": `{"turns_received":5,"turns_processed":5,"facts":0,"context_items":2,"llm_tokens_today":45,"llm_daily_token_cap":40}`,
		"bob":   `{"turns_received":1,"turns_processed":1,"llm_tokens_today":15}`,
		"carol": `{"turns_received":1,"turns_processed":1}`,
	}
	sub, err := nc.Subscribe(prefix+".stats.*", func(m *nats.Msg) {
		_ = m.Respond([]byte(reply[m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]]))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ user, want string }{
		{"alice", "model tokens today  45 of the daily cap of 40: reached, turns are extracted offline until 00:00 UTC\n"},
		{"bob", "model tokens today  15 (no per-user daily cap)\n"},
		{"carol", ""},
	} {
		out, errOut, code := runArgs(context.Background(), "stats", "--user", c.user, "--nats-url", eventstest.URL(), "--prefix", prefix)
		if code != 0 || c.want != "" && !strings.Contains(out, c.want) || c.want == "" && strings.Contains(out, "model tokens") {
			t.Errorf("stats --user %s: exit %d, stdout %q, stderr %q; want %q", c.user, code, out, errOut, c.want)
		}
	}
}
