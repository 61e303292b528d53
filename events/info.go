package events

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// InfoTimeout bounds a JetStream info request (stream or consumer info, a
// stream's lookup by subject, the stream and consumer lists: a KeyValue
// bucket's lookup is a stream info) that memoryd makes on a user's path
// without a deadline of its own, on nats-server 2.11 and later, where
// nats.go gives every request 5 s. Those servers answer info requests only
// when no other JetStream API request waits: while forgets delete (each
// event on its own; three at once on 2.15.2 held a stream info 8.2 s during
// 3,000 deletes and 30.2 s during 6,000, nearly all of them), an info
// request waits for a gap, and a forget, a replay or a start failed on a
// server that was only busy. A request the server refuses (a stream not
// found, a permission error sent as an API error) still fails as soon as
// it is answered.
const InfoTimeout = 2 * time.Minute

// InfoContext returns ctx for an info request made through js: bounded by
// InfoTimeout when it has no deadline and js's server is 2.11 or later. A
// deadline of ctx's own is kept, shorter or longer; an older server (which
// answers info requests in turn, and may not answer at all when it runs no
// JetStream: see ErrJetStreamNoAnswer, told after nats.go's 5 s) keeps
// js's default. The cancel func is never nil.
func InfoContext(ctx context.Context, js jetstream.JetStream) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || !InfoDeferred(js) {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, InfoTimeout)
}

// InfoDeferred reports whether js's server answers info requests after the
// other API requests (nats-server 2.11 and later; a version it cannot read
// is taken for one). Not while the connection is down: nats.go then tells
// no version, and a request waits for the reconnect; taken for 2.11+, a
// request to a server dead or restarting waited InfoTimeout, not 5 s.
func InfoDeferred(js jetstream.JetStream) bool {
	nc := js.Conn()
	if nc == nil {
		return true
	}
	v := nc.ConnectedServerVersion()
	if v == "" {
		return false // not connected
	}
	major, rest, _ := strings.Cut(strings.TrimPrefix(v, "v"), ".")
	minor, _, _ := strings.Cut(rest, ".")
	maj, err1 := strconv.Atoi(major)
	mnr, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil {
		return true
	}
	return maj > 2 || maj == 2 && mnr >= 11
}
