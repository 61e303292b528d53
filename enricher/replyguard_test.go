package enricher_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store/storetest"
)

func TestSafeReplySubject(t *testing.T) {
	for _, c := range []struct {
		reply, prefix string
		safe          bool
	}{
		{"", "memory", true},
		{"_INBOX.abc.1", "memory", true},
		{"_INBOX_alice_frontend.abc.1", "memory", true},
		{"_INBOX_memory.7", "_INBOX_memory", false}, // memoryd's own prefix, even an inbox's
		{"memoryd.inbox.1", "memory", false},
		{"myapp.replies.7", "memory", false},
		{"tenant2.forget.alice", "memory", false}, // another memoryd's endpoint
		{"_INBOXES.x", "memory", false},
		{"_R_.Ab12Cd.xY9", "memory", true}, // a service import's reply
		{"_R_", "memory", false},
		{"$JS.API.STREAM.PURGE.MEMORY_TURNS", "memory", false},
		{"$JS.API.CONSUMER.DELETE.MEMORY_TURNS.memoryd-ingest", "memory", false},
		{"$JS.ACK.MEMORY_TURNS.memoryd-ingest.1.2.3.4.0", "memory", false},
		{"$SYS.REQ.SERVER.PING", "memory", false},
		{"$SRV.PING", "memory", false},
		{"memory.turns.alice", "memory", false},
		{"memory.deadletter.alice", "memory", false},
		{"memory.changes.alice", "memory", false},
		{"memory", "memory", false},
		{"tenant1.turns.alice", "tenant1", false},
		{"memory.turns.alice", "tenant1", false},
	} {
		if got := enricher.SafeReplySubject(c.reply, c.prefix); got != c.safe {
			t.Errorf("SafeReplySubject(%q, %q) = %v, want %v", c.reply, c.prefix, got, c.safe)
		}
	}
}

// TestUnsafeReplyDroppedQuietly: requests naming memoryd's subjects as
// their reply get no reply there and are logged once, not once each (a
// frontend sending them in a loop must not flood the log); a request with
// an inbox is answered as ever.
func TestUnsafeReplyDroppedQuietly(t *testing.T) {
	t.Parallel()
	var logs eventstest.SyncBuffer
	h := start(t, storetest.New(t), func(c *enricher.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	sub, err := h.nc.SubscribeSync(h.prefix + ".changes.alice")
	if err != nil {
		t.Fatal(err)
	}
	// Another service's subject (a second memoryd's forget endpoint): a
	// reply there would be a request of its own.
	other, err := h.nc.SubscribeSync(h.prefix + "x.forget.bob")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		reply := h.prefix + ".changes.alice"
		if i%2 == 1 {
			reply = h.prefix + "x.forget.bob"
		}
		if err := h.nc.PublishRequest(h.prefix+".stats.bob", reply, []byte(`{"user_id":"bob"}`)); err != nil {
			t.Fatal(err)
		}
	}
	// The endpoint handles its requests in order: once bob's own request
	// is answered, the 50 before it have been handled.
	if _, err := h.client.Stats(ctxT(t), "bob"); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []*nats.Subscription{sub, other} {
		if m, err := sub.NextMsg(100 * time.Millisecond); err == nil {
			t.Errorf("a reply reached %s: %q", m.Subject, m.Data)
		}
	}
	if n := strings.Count(logs.String(), "request dropped: its reply subject is not an inbox"); n != 1 {
		t.Errorf("%d warnings for 50 dropped requests, want 1:\n%s", n, logs.String())
	}
}
