package app

import (
	"errors"
	"testing"

	"github.com/memoryd/memoryd/worker"
)

// TestSpendCapConfig: the per-user cap the worker applies is the one stats
// show, and a negative cap is refused naming the field.
func TestSpendCapConfig(t *testing.T) {
	t.Parallel()
	c := Config{Worker: worker.Config{DailyTokensPerUser: 700, DailyTokens: 9000}}.withDefaults()
	if c.Enricher.DailyTokensPerUser != 700 {
		t.Errorf("Enricher.DailyTokensPerUser = %d, want the worker's 700", c.Enricher.DailyTokensPerUser)
	}
	for _, w := range []worker.Config{{DailyTokensPerUser: -1}, {DailyTokens: -1}} {
		_, err := New(Config{Worker: w})
		var cerr *ConfigError
		if !errors.As(err, &cerr) {
			t.Errorf("New with %+v = %v, want a ConfigError", w, err)
		}
	}
	if d := Defaults(); d.Worker.DailyTokensPerUser != 0 || d.Worker.DailyTokens != 0 || d.Worker.Now != nil || d.Worker.OverCapExtractor != nil {
		t.Errorf("Defaults: caps %d, %d (want none), clock and offline extractor left to the worker", d.Worker.DailyTokensPerUser, d.Worker.DailyTokens)
	}
}
