package enricher_test

import (
	"testing"

	"github.com/memoryd/memoryd/enricher"
)

func TestSafeReplySubject(t *testing.T) {
	for _, c := range []struct {
		reply, prefix string
		safe          bool
	}{
		{"", "memory", true},
		{"_INBOX.abc.1", "memory", true},
		{"_INBOX_alice_frontend.abc.1", "memory", true},
		{"memoryd.inbox.1", "memory", true}, // another subject that only shares the letters
		{"myapp.replies.7", "memory", true},
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
		{"memory.turns.alice", "tenant1", true},
	} {
		if got := enricher.SafeReplySubject(c.reply, c.prefix); got != c.safe {
			t.Errorf("SafeReplySubject(%q, %q) = %v, want %v", c.reply, c.prefix, got, c.safe)
		}
	}
}
