package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ReadThrough calls fn with each message on subj in st, in stream order, up
// to the stream sequence through (the end the caller saw), read with an
// ordered consumer that delivers headers only unless withData, and deleted
// when the read ends. The read ends after the last such message, when fn
// returns false, or when nothing comes for a moment (readPoll, at most
// stall) and the stream holds no message on subj from the last one read up
// to through: a delete by someone else during the read (a forget, an
// erased event) leaves the consumer's pending count too high to tell the
// end (nats-server 2.9.10), or too low (2.15.2: 0 with messages left), so
// a count of 0 before through is checked with the stream too. It fails
// when nothing comes for readMaxStalls times stall while the stream still
// holds such a message.
func ReadThrough(ctx context.Context, st jetstream.Stream, subj string, through uint64, withData bool, stall time.Duration,
	fn func(m jetstream.Msg, md *jetstream.MsgMetadata) bool) error {
	// The first message on subj, asked first: a subject with none (a
	// forget's "<subject>.>", usually) ends here, without a consumer or a
	// poll, and the consumer starts at it.
	first, err := st.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subj))
	if errors.Is(err, jetstream.ErrMsgNotFound) || (err == nil && first.Sequence > through) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", subj, err)
	}
	// A bounded reset: nats.go otherwise retries recreating the consumer
	// forever, past Next's deadline, when the stream is gone.
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}, HeadersOnly: !withData, MaxResetAttempts: 3,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: first.Sequence})
	if err != nil {
		return err
	}
	defer func() {
		// Best effort, rather than leaving it to the inactivity threshold.
		if info := cons.CachedInfo(); info != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = st.DeleteConsumer(dctx, info.Name)
		}
	}()
	// Headers are small; with their data, a pull is bounded by bytes too
	// (a dead letter holds a rejected event, up to the server's payload
	// limit), so that a read holds at most about one maximal message's
	// worth, not a thousand of them.
	var pull jetstream.PullMessagesOpt = jetstream.PullMaxMessages(1000)
	if withData {
		pull = jetstream.PullMaxMessagesWithBytesLimit(1000, readMaxBytes)
	}
	it, err := cons.Messages(pull)
	if err != nil {
		return err
	}
	defer it.Stop()
	var (
		last      uint64 // the last sequence read
		delivered = time.Now()
		poll      = min(stall, readPoll)
		patient   = readMaxStalls * stall
	)
	for last < through {
		nctx, cancel := context.WithTimeout(ctx, poll)
		m, err := it.Next(jetstream.NextContext(nctx))
		cancel()
		if err != nil && ctx.Err() == nil && isTimeout(err) {
			left, gerr := heldAfter(ctx, st, subj, last, through)
			if gerr != nil {
				return gerr
			}
			if !left {
				return nil
			}
			if time.Since(delivered) >= patient {
				return fmt.Errorf("read %s: nothing delivered for %s, with events left after sequence %d", subj, patient, last)
			}
			continue
		}
		if err != nil {
			return err
		}
		delivered = time.Now()
		md, err := m.Metadata()
		if err != nil {
			return err
		}
		if md.Sequence.Stream > through {
			return nil
		}
		last = md.Sequence.Stream
		if !fn(m, md) {
			return nil
		}
		if md.NumPending == 0 && last < through {
			// The consumer's count is not the end's word: under deletes by
			// someone else nats-server 2.15.2 counts too few (0 with an
			// event on subj still after this one: a forget left it in the
			// stream), as 2.9.10 counts too many (the stall check above).
			// The stream tells.
			left, err := heldAfter(ctx, st, subj, last, through)
			if err != nil {
				return err
			}
			if !left {
				return nil
			}
		}
	}
	return nil
}

// heldAfter reports whether st holds a message on subj after the sequence
// last and no later than through. A request that times out counts as one
// held: the read goes on and its stall checks decide.
func heldAfter(ctx context.Context, st jetstream.Stream, subj string, last, through uint64) (bool, error) {
	next, err := st.GetMsg(ctx, last+1, jetstream.WithGetMsgSubject(subj))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	case err != nil && isTimeout(err) && ctx.Err() == nil:
		return true, nil
	case err != nil:
		return false, fmt.Errorf("read %s after sequence %d: %w", subj, last, err)
	}
	return next.Sequence <= through, nil
}

// readMaxStalls bounds, in stalls, how long ReadThrough waits while the
// stream still holds a message for it: a consumer that stopped delivering
// for good (or a server that never answers) fails the read rather than
// holding it forever.
const readMaxStalls = 5

// readMaxBytes bounds what a ReadThrough with data pulls at once. It is
// above the largest message a NATS server takes unless its max_pending
// (64 MiB by default, and max_payload may not exceed it) is raised too: a
// pull smaller than the next message gets nothing, ever (the server
// answers 409 "Message Size Exceeds MaxBytes", and the client pulls
// again), and the read failed on it every time.
const readMaxBytes = 64<<20 + 1<<20

// readPoll is how long ReadThrough waits for a message before it asks the
// stream whether one is left: a message deleted during the read (the last
// one, typically) is never delivered, and one cheap request tells so.
const readPoll = 250 * time.Millisecond

func isTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}
