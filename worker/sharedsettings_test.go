package worker_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/worker"
)

// TestIngestWarnsOfSharedConsumerSettings: --ack-wait and --batch-size set
// the durable consumer every ingest process shares, so a process started
// with others than the consumer has changes them for all; it says so
// (an audit saw a second ingest with --ack-wait 1s move the first one's
// 30 s to 1 s without a word). A process started with the same settings
// says nothing.
func TestIngestWarnsOfSharedConsumerSettings(t *testing.T) {
	e := setup(t)
	var first, same, other lockedBuffer
	logTo := func(b *lockedBuffer, ackWait time.Duration, batch int) func(*worker.Config) {
		return func(c *worker.Config) {
			c.Logger = slog.New(slog.NewTextHandler(b, nil))
			c.AckWait, c.BatchSize = ackWait, batch
		}
	}
	e.start(extractor.NewRules(), logTo(&first, 30*time.Second, 200))
	e.start(extractor.NewRules(), logTo(&same, 30*time.Second, 200))
	e.start(extractor.NewRules(), logTo(&other, time.Second, 10))
	const warning = "ingest consumer settings changed for every ingest process"
	if strings.Contains(first.String(), warning) || strings.Contains(same.String(), warning) {
		t.Errorf("warned with the consumer's own settings:\n%s%s", first.String(), same.String())
	}
	got := other.String()
	for _, want := range []string{warning, "ack_wait=1s", "ack_wait_was=30s", "max_ack_pending=200", "max_ack_pending_was=4000"} {
		if !strings.Contains(got, want) {
			t.Errorf("a process with --ack-wait 1s --batch-size 10 logged %q, want %q in it", got, want)
		}
	}
}
