package app

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
)

// TestSizeMetricsAfterAPrune: with a size limit, /metrics shows what the
// last prune measured: the live size, the floor and whether it is over the
// limit, so that an alert needs no log. Before, only the prune runs and
// the items removed were counted.
func TestSizeMetricsAfterAPrune(t *testing.T) {
	t.Parallel()
	svc := startTestApp(t, func(c *Config) {
		c.Ops = OpsConfig{Addr: "127.0.0.1:0"}
		c.Worker.MaxDBSize = 1 << 30
	})
	live := regexp.MustCompile(`(?m)^memoryd_db_live_bytes (\S+)$`)
	floor := regexp.MustCompile(`(?m)^memoryd_db_floor_bytes (\S+)$`)
	var body string
	// The prune job runs at start, on River's leader.
	eventstest.Eventually(t, "the size gauges after the first prune", time.Minute, func() (bool, string) {
		resp, err := http.Get("http://" + svc.ops.ln.Addr().String() + "/metrics")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return live.MatchString(body), "no memoryd_db_live_bytes yet"
	})
	l, _ := strconv.ParseFloat(live.FindStringSubmatch(body)[1], 64)
	m := floor.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no memoryd_db_floor_bytes:\n%s", body)
	}
	f, _ := strconv.ParseFloat(m[1], 64)
	// Every replica that ran a prune keeps its own last figures: the
	// time of the measure says which is the newest.
	if !regexp.MustCompile(`(?m)^memoryd_db_size_measured_timestamp_seconds [1-9]`).MatchString(body) {
		t.Fatalf("no memoryd_db_size_measured_timestamp_seconds after a prune:\n%s", body)
	}
	if l <= 0 || f <= 0 || f > l || !regexp.MustCompile(`(?m)^memoryd_db_over_limit 0$`).MatchString(body) {
		t.Fatalf("live %v, floor %v, over_limit line missing or not 0; want 0 < floor <= live under a 1G limit:\n%s", l, f, body)
	}
}
