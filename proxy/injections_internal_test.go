package proxy

import (
	"fmt"
	"testing"
	"time"
)

// TestInjectionsExpireAndAreBounded: an injection is kept for its user,
// index and text alone, for injectionTTL, and at most maxInjections are
// kept, the oldest going first; setting one again renews it.
func TestInjectionsExpireAndAreBounded(t *testing.T) {
	var c injections
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c.put("alice", 0, "where do I live?", "[facts: location=Rome]", t0)
	c.put("alice", 2, "other", "", t0)
	for _, tc := range []struct {
		user  string
		index int
		text  string
		at    time.Duration
		want  string
		found bool
	}{
		{"alice", 0, "where do I live?", time.Minute, "[facts: location=Rome]", true},
		{"alice", 2, "other", time.Minute, "", true}, // none was sent: none again
		{"bob", 0, "where do I live?", time.Minute, "", false},
		{"alice", 1, "where do I live?", time.Minute, "", false},
		{"alice", 0, "where do I live", time.Minute, "", false},
		{"alice", 0, "where do I live?", injectionTTL + time.Second, "", false},
	} {
		got, ok := c.get(tc.user, tc.index, tc.text, t0.Add(tc.at))
		if got != tc.want || ok != tc.found {
			t.Errorf("get(%s, %d, %q) after %s = %q, %v; want %q, %v", tc.user, tc.index, tc.text, tc.at, got, ok, tc.want, tc.found)
		}
	}
	// Over the bound the oldest go, and the renewed one stays.
	for i := range maxInjections {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		if i == maxInjections/2 {
			c.put("alice", 0, "where do I live?", "renewed", at)
		}
		c.put("u", i, fmt.Sprint(i), "x", at)
	}
	now := t0.Add(time.Second)
	if len(c.byKey) > maxInjections || len(c.order) > 2*maxInjections {
		t.Errorf("%d kept, %d in order; want at most %d", len(c.byKey), len(c.order), maxInjections)
	}
	if _, ok := c.get("alice", 2, "other", now); ok {
		t.Error("the oldest was kept past the bound")
	}
	if got, ok := c.get("alice", 0, "where do I live?", now); !ok || got != "renewed" {
		t.Errorf("the renewed injection: %q, %v", got, ok)
	}
	if _, ok := c.get("u", maxInjections-1, fmt.Sprint(maxInjections-1), now); !ok {
		t.Error("the newest was dropped")
	}
}
