package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/worker"
)

// TestFetchCooldownDefaultAndBounds: the cooldown defaults to River's
// 100ms, at most the poll interval, and New names it when out of range.
func TestFetchCooldownDefaultAndBounds(t *testing.T) {
	e := setup(t)
	if got := (worker.Config{}).WithDefaults().FetchCooldown; got != 100*time.Millisecond {
		t.Errorf("default FetchCooldown %s, want 100ms", got)
	}
	if got := (worker.Config{FetchPollInterval: 20 * time.Millisecond}).WithDefaults().FetchCooldown; got != 20*time.Millisecond {
		t.Errorf("FetchCooldown with a 20ms poll interval %s, want 20ms", got)
	}
	for _, d := range []time.Duration{-time.Millisecond, 2 * time.Second} {
		_, err := worker.New(worker.Config{Conn: e.nc, Store: e.store, Extractor: extractor.NewRules(), FetchCooldown: d})
		if err == nil || !strings.Contains(err.Error(), "Config.FetchCooldown") {
			t.Errorf("New with FetchCooldown %s: %v, want an error naming Config.FetchCooldown", d, err)
		}
	}
}
