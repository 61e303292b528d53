package systest

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// SIGHUP stops serve as SIGTERM does: "shutting down", "stopped", exit 0
// (before: killed at once, exit status 129, no log line, running jobs
// held until their lease lapsed). memoryd reloads nothing.
func TestServeStopsCleanlyOnSIGHUP(t *testing.T) {
	t.Parallel()
	light(t)
	e := newRelEnv(t, "")
	p := e.startServe(e.dbURL)
	waitFor(t, "serve started", 2*time.Minute, func() (bool, string) {
		return strings.Contains(p.logs.String(), "enrich service started"), ""
	}, p)
	_ = p.cmd.Process.Signal(syscall.SIGHUP)
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		t.Fatalf("serve still running a minute after SIGHUP:\n%s", p.tail())
	}
	if p.err != nil || !strings.Contains(p.logs.String(), `"msg":"stopped"`) {
		t.Fatalf("serve after SIGHUP: %v; want exit 0 after a clean stop:\n%s", p.err, p.tail())
	}
}
