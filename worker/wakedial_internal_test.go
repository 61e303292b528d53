package worker

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/memoryd/memoryd/extractor"
)

// TestWakeWithinWakeEveryDialsNot: a wake asked for within wakeEvery of
// the last (an answer while wakes linger asks for one each) does not run,
// and so does not dial the model server first (gone). Before, each such
// answer cost a connection to the server (a DNS lookup and a handshake,
// up to crashDialTimeout) for a wake that then did nothing.
func TestWakeWithinWakeEveryDialsNot(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: "http://" + ln.Addr().String() + "/v1", Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	w := &Worker{logger: slog.New(slog.DiscardHandler)}
	m := &modelWaiters{server: "model server", kind: "extraction", refuses: llm.RefusesConnections}
	now := time.Now().UnixNano()
	m.since.Store(now)
	m.woke.Store(now) // a wake just began
	w.wakeWaiters(context.Background(), m)

	// The connections made before a sentinel of the test's own are those
	// the wake made: the listener accepts them in the order they came.
	sentinel, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer sentinel.Close()
	dials := 0
	for {
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		mine := c.RemoteAddr().String() == sentinel.LocalAddr().String()
		_ = c.Close()
		if mine {
			break
		}
		dials++
	}
	if dials != 0 {
		t.Errorf("a wake within wakeEvery of the last dialled the model server %d time(s); want none", dials)
	}
}
