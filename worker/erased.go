package worker

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"
)

// releaseErasedOrWarn is releaseErased, its failure logged.
func releaseErasedOrWarn(ctx context.Context, js jetstream.JetStream, st jetstream.Stream, seqs []uint64, logger *slog.Logger) {
	if err := releaseErased(ctx, js, st, seqs); err != nil {
		logger.Warn("erased events not acknowledged on the stream's consumers: on nats-server 2.10.28 or 2.10.29 they may stay pending there for good",
			"events", len(seqs), "error", err)
	}
}

// releaseErased acknowledges the events at seqs, just erased from st
// (SecureDeleteMsg: a forget, a replay deleting what a forget covers), on
// each of st's consumers that acknowledges every message (AckExplicit: the
// ingest consumer), by stream sequence: the server keys a consumer's
// pending list by it, so an acknowledgement sent to
// "$JS.ACK.<stream>.<consumer>.1.<seq>.0.0.0" (the reply subject's form)
// removes the entry, and is a no-op for a sequence not pending there.
//
// Why: nats-server 2.10.28 and 2.10.29 (the last 2.10 release;
// compose.yaml's nats:2.10) keep a message erased while it waits for a
// redelivery it has had once (a turn ingest holds back while its user is
// forgotten, or one a killed process held) in the consumer's pending list
// for good, restarts and upgrades included: the consumer's ack floor stops
// there, and once such entries reach its MaxAckPending it delivers no
// more, and ingest stops. 2.9.10, 2.10.27, 2.11.17, 2.12.15 and 2.15.2
// drop the entry at its redelivery (the message is gone); a plain delete
// leaves none on any. TestChaos found it (on 2.10.29, 2 to 6 entries a
// forget under kills).
//
// Best effort: the erasure is done whatever this does; an error is the
// caller's to log.
func releaseErased(ctx context.Context, js jetstream.JetStream, st jetstream.Stream, seqs []uint64) error {
	if len(seqs) == 0 {
		return nil
	}
	stream := st.CachedInfo().Config.Name
	var explicit []string
	consumers := st.ListConsumers(ctx)
	for ci := range consumers.Info() {
		if ci.Config.AckPolicy == jetstream.AckExplicitPolicy {
			explicit = append(explicit, ci.Name)
		}
	}
	if err := consumers.Err(); err != nil {
		return fmt.Errorf("list consumers of %s: %w", stream, err)
	}
	nc := js.Conn()
	for _, name := range explicit {
		for _, seq := range seqs {
			if err := nc.Publish(fmt.Sprintf("$JS.ACK.%s.%s.1.%d.0.0.0", stream, name, seq), nil); err != nil {
				return fmt.Errorf("acknowledge erased event %d on %s: %w", seq, name, err)
			}
		}
	}
	if len(explicit) == 0 {
		return nil
	}
	return nc.FlushWithContext(ctx)
}
