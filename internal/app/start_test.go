package app

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/memoryd/memoryd/worker"
)

// TestStartTwiceIsRefused: Start after Start, or after StartEnrich, is an
// error; a second enrich service would stay registered on NATS, unstopped.
func TestStartTwiceIsRefused(t *testing.T) {
	a, err := New(testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop(context.Background()) })
	if err := a.StartEnrich(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err == nil {
		t.Fatal("Start after StartEnrich succeeded")
	}
	if err := a.StartEnrich(context.Background()); err == nil {
		t.Fatal("StartEnrich twice succeeded")
	}
}

// TestStartFailsFirstOnABusyOpsPort: with the operators' port taken,
// Start fails naming the address before it has started anything (no
// worker fetched jobs it would then have to finish), and Stop is clean.
func TestStartFailsFirstOnABusyOpsPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := testConfig(t)
	cfg.Ops.Addr = ln.Addr().String()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = a.Start(context.Background())
	var le *OpsListenError
	if !errors.As(err, &le) || le.Addr != cfg.Ops.Addr {
		t.Fatalf("Start = %v, want an OpsListenError for %s", err, cfg.Ops.Addr)
	}
	if a.worker != nil || a.enrich != nil || a.store != nil || a.nc != nil {
		t.Fatalf("Start left something running: worker %v, enrich %v, store %v, nc %v", a.worker != nil, a.enrich != nil, a.store != nil, a.nc != nil)
	}
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestReplayJobSize: replay's job size is the size asked for, bounded by
// replay's own batch, not by ingest's batch size; unset, it follows the
// extractor.
func TestReplayJobSize(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  Config
		want int
	}{
		{"asked, over ingest's batch", Config{Worker: worker.Config{JobSize: 300}}, 300},
		{"asked, over replay's batch", Config{Worker: worker.Config{JobSize: ReplayBatchSize + 1}}, ReplayBatchSize},
		{"rules", Config{}, ReplayJobSizeRules},
		{"LLM", Config{LLM: llm("m")}, ReplayJobSizeLLM},
	} {
		a, err := New(tt.cfg)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := a.ReplayJobSize(); got != tt.want {
			t.Errorf("%s: ReplayJobSize() = %d, want %d", tt.name, got, tt.want)
		}
	}
}
