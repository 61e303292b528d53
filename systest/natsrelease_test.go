package systest

import (
	"fmt"
	"testing"

	"github.com/memoryd/memoryd/events/eventstest"
)

// startNATSRelease runs a nats-server of version (eventstest.ReleaseBin)
// with JetStream, its store in a directory of the test's, and returns its
// URL. TestChaos runs its killed, forgotten and replayed system on
// compose.yaml's line (eventstest.ReleaseCompose) against a reference on
// the machine's server, TestScaleOutSurvivesSIGKILL on the newest
// (eventstest.ReleaseNewest); the other tests on the machine's (Debian
// 12's 2.9.10).
func startNATSRelease(t *testing.T, version string) string {
	t.Helper()
	port := eventstest.FreePort(t)
	startRelNATS(t, eventstest.ReleaseBin(t, version), port, t.TempDir())
	return fmt.Sprintf("nats://127.0.0.1:%d", port)
}
