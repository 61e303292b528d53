// Package eventstest connects tests to the real NATS server and gives each test
// its own subject prefix and stream names, so tests can run in parallel and
// re-run cleanly.
package eventstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// URL is the test server: MEMORYD_TEST_NATS_URL, or the local default.
func URL() string {
	if u := os.Getenv("MEMORYD_TEST_NATS_URL"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// Conn connects to the test server; the connection closes when the test ends.
func Conn(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(URL(), nats.Name(t.Name()), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("eventstest: connect to %s (is nats-server -js running? `make services` starts it): %v", URL(), err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Names returns a fresh subject prefix and turn stream name. Streams whose
// names start with the stream name (the turn stream and its dead-letter
// stream) are deleted when the test ends.
func Names(t testing.TB, nc *nats.Conn) (prefix, stream string) {
	t.Helper()
	var b [5]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	prefix, stream = "t"+id, "T"+strings.ToUpper(id)+"_TURNS"
	t.Cleanup(func() {
		js, err := jetstream.New(nc)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		names := js.StreamNames(ctx)
		var doomed []string
		for n := range names.Name() {
			if strings.HasPrefix(n, stream) {
				doomed = append(doomed, n)
			}
		}
		for _, n := range doomed {
			_ = js.DeleteStream(ctx, n)
		}
	})
	return prefix, stream
}
