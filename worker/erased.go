package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
)

// releaseErasedOrWarn is releaseErased, its failure logged.
func releaseErasedOrWarn(ctx context.Context, js jetstream.JetStream, st jetstream.Stream, seqs []uint64, logger *slog.Logger) {
	if len(seqs) == 0 {
		return
	}
	// Its own deadline: the erasure's may have run out (the deletes took
	// it) or been cancelled (a stop), and the events are erased all the same.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
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
// compose.yaml's nats:2.10) keep a message erased while in flight after a
// second delivery (a turn ingest handed back while its user was being
// forgotten, or one a killed process held), above a nonzero ack floor, in
// the consumer's pending list for good, restarts and upgrades included:
// the consumer's ack floor stops there, and once such entries reach its
// MaxAckPending it delivers no more, and ingest stops. 2.9.10, 2.10.27, 2.11.17, 2.12.15 and 2.15.2
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
	return ackOn(ctx, js, stream, explicit, seqs)
}

// releaseTimeout bounds releaseErasedOrWarn's listing of the consumers and
// ackOn's flush.
const releaseTimeout = 10 * time.Second

// ackOn acknowledges the events at seqs of stream on each of consumers,
// by stream sequence, and waits until the server has them (a flush, within
// releaseTimeout: a context without a deadline, a worker's start, is
// refused by FlushWithContext).
func ackOn(ctx context.Context, js jetstream.JetStream, stream string, consumers []string, seqs []uint64) error {
	if len(consumers) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, releaseTimeout)
	defer cancel()
	nc := js.Conn()
	for _, name := range consumers {
		for _, seq := range seqs {
			if err := nc.Publish(fmt.Sprintf("$JS.ACK.%s.%s.1.%d.0.0.0", stream, name, seq), nil); err != nil {
				return fmt.Errorf("acknowledge erased event %d on %s: %w", seq, name, err)
			}
		}
	}
	return nc.FlushWithContext(ctx)
}

// maxHealDeleted bounds the deleted sequences healErased reads (the
// stream info's list, some 10 bytes each): a stream with more is left to
// the operator (docs/operations.md, "Upgrading nats-server").
const maxHealDeleted = 200_000

// healErased acknowledges, on cons (the ingest consumer), the events
// erased from st above its ack floor: on nats-server 2.10.28 or 2.10.29 an
// earlier memoryd (before releaseErased) may have left such events pending
// for good, which a restart or an upgrade of the server keeps. A no-op for
// an event not pending; nothing to do when nothing is pending. Best
// effort: a failure is logged, the start goes on.
func (w *Worker) healErased(ctx context.Context, cons jetstream.Consumer, st jetstream.Stream) {
	ctx, cancel := events.InfoContext(ctx, w.js)
	defer cancel()
	info, err := cons.Info(ctx)
	if err != nil || info.NumAckPending == 0 {
		return
	}
	floor, delivered := info.AckFloor.Stream, info.Delivered.Stream
	if sinfo, err := st.Info(ctx); err != nil || sinfo.State.NumDeleted == 0 {
		return
	} else if sinfo.State.NumDeleted > maxHealDeleted {
		w.logger.Warn("ingest consumer may hold erased events pending (nats-server 2.10.28, 2.10.29), and the stream has too many deleted events to look through at start: see \"Upgrading nats-server\" in docs/operations.md",
			"consumer", w.cfg.Durable, "ack_floor", floor, "deleted", sinfo.State.NumDeleted)
		return
	}
	sinfo, err := st.Info(ctx, jetstream.WithDeletedDetails(true))
	if err != nil {
		w.logger.Warn("cannot read the turn stream's deleted events to release those left pending", "error", err)
		return
	}
	var seqs []uint64
	for _, seq := range sinfo.State.Deleted {
		if seq > floor && seq <= delivered {
			seqs = append(seqs, seq)
		}
	}
	if len(seqs) == 0 {
		return
	}
	if err := ackOn(ctx, w.js, sinfo.Config.Name, []string{cons.CachedInfo().Name}, seqs); err != nil {
		w.logger.Warn("cannot release erased events left pending on the ingest consumer", "error", err)
		return
	}
	if after, err := cons.Info(ctx); err == nil && after.NumAckPending < info.NumAckPending {
		w.logger.Info("released erased events an earlier memoryd left pending on the ingest consumer (nats-server 2.10.28, 2.10.29)",
			"consumer", w.cfg.Durable, "pending_before", info.NumAckPending, "pending_after", after.NumAckPending)
	}
}
