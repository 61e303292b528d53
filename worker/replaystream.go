package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// DefaultReplayStallTimeout is ReplayConfig.StallTimeout's default.
const DefaultReplayStallTimeout = 5 * time.Second

// Replay's window defaults (ReplayConfig.Window, WindowBytes): 20,000 turns
// give each user of a stream interleaving 1,000 users jobs of about 20
// turns; 32 MiB holds 20,000 short turns or about 14,000 real chat turns
// (2.3 KB on average in LongMemEval), so a replay's memory stays near
// 100 MiB.
const (
	DefaultReplayWindow      = 20000
	DefaultReplayWindowBytes = 32 << 20
)

// replayMaxStalls bounds how often in a row a replay recreates its consumer
// without reading anything before it gives up on a subject.
const replayMaxStalls = 5

// ReplayIncompleteError is returned by Replay when it could not read part of
// what the stream held for a subject when the replay started. What was read
// before is recorded and enqueued; re-running the replay (e.g. with FromSeq
// set to FirstSeq) reads the rest.
type ReplayIncompleteError struct {
	// Subject is the subject filter that was being read.
	Subject string
	// FirstSeq and LastSeq bound the stream sequences not read, inclusive;
	// LastSeq is the stream's last sequence when the replay started.
	FirstSeq, LastSeq uint64
	// Unread counts the events of Subject that the stream held when the
	// replay started and that were not read (events deleted since, e.g. by
	// a forget, are counted too).
	Unread uint64
	// Err is why reading stopped.
	Err error
}

func (e *ReplayIncompleteError) Error() string {
	return fmt.Sprintf("replay incomplete: %d events of %s in stream sequences %d-%d were not read: %v",
		e.Unread, e.Subject, e.FirstSeq, e.LastSeq, e.Err)
}

func (e *ReplayIncompleteError) Unwrap() error { return e.Err }

// replaySrc is one subject filter of a replay: its first ordered consumer
// (created with the replay's start position), the configuration to create
// another one, and how many events it held when the replay started.
type replaySrc struct {
	filter  string
	occ     jetstream.OrderedConsumerConfig
	cons    jetstream.Consumer
	pending uint64
}

// streamEnd is the stream's last sequence now: a replay reads up to it.
func streamEnd(ctx context.Context, js jetstream.JetStream, stream string) (uint64, error) {
	ctx, cancel := events.InfoContext(ctx, js)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("replay: stream %s: %w", stream, events.NoJetStream(err))
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("replay: stream %s: %w", stream, events.NoJetStream(err))
	}
	return info.State.LastSeq, nil
}

// replaySource reads one subject filter up to the stream sequence end and
// requeues what it reads a window at a time (flushed early when the
// consumer has nothing more for now). It reads with an ordered consumer's
// continuous pull iterator (a Fetch per batch would re-create the ordered
// consumer each time). When the consumer says nothing is left, or delivers
// nothing for StallTimeout (it can stall for good after a purge of another
// subject), a fresh ordered consumer is created from the sequence after the
// last one read: if it has nothing pending the subject is done, otherwise
// reading goes on from it. After replayMaxStalls fresh consumers in a row
// that deliver nothing, or when the stream is gone, it returns a
// *ReplayIncompleteError saying what it did not read.
func replaySource(ctx context.Context, cfg ReplayConfig, enq *Enqueuer, src replaySrc, end uint64, p *ReplayProgress, start time.Time) error {
	var (
		turns   []store.Turn // the window: read, not yet recorded
		bytes   int          // their text
		inBatch int          // events read since the last progress report
		read    uint64       // events read from this source
		last    uint64       // the last stream sequence read
	)
	progress := func() {
		inBatch = 0
		p.Elapsed = time.Since(start)
		if !p.readFrom.IsZero() {
			p.Reading = time.Since(p.readFrom)
		}
		if cfg.Progress != nil {
			cfg.Progress(*p)
		}
	}
	// flush records the window, a transaction per chunk of whole users.
	flush := func() error {
		if len(turns) == 0 {
			if inBatch > 0 {
				progress()
			}
			return nil
		}
		for _, chunk := range windowChunks(turns, cfg.BatchSize) {
			if !cfg.DryRun {
				n, forgotten, del, err := requeue(ctx, cfg.Store, enq, chunk, cfg.JobSize, p.resetDone)
				if err != nil {
					return err
				}
				p.Enqueued += n
				p.Forgotten += forgotten
				if err := deleteForgotten(ctx, cfg, del, p); err != nil {
					return err
				}
			} else {
				p.Enqueued += len(chunk)
				if cfg.collect != nil {
					if err := cfg.collect(chunk); err != nil {
						return err
					}
				}
			}
			p.Recorded += len(chunk)
			// Recording a window beside live work can take tens of
			// seconds: report each transaction, not only the window.
			progress()
		}
		clear(turns) // drop the texts' references
		turns, bytes = turns[:0], 0
		return nil
	}
	incomplete := func(err error) error {
		if ferr := flush(); ferr != nil {
			return ferr
		}
		first := last + 1
		if last == 0 {
			first = max(src.occ.OptStartSeq, 1)
		}
		var unread uint64
		if src.pending > read {
			unread = src.pending - read
		}
		return &ReplayIncompleteError{Subject: src.filter, FirstSeq: first, LastSeq: end, Unread: unread, Err: err}
	}
	// take handles one message; it reports whether the end was reached.
	take := func(m jetstream.Msg) (bool, error) {
		md, err := m.Metadata()
		if err != nil {
			return false, fmt.Errorf("replay: message metadata: %w", err)
		}
		if md.Sequence.Stream > end {
			return true, nil // published after the replay started
		}
		last = md.Sequence.Stream
		read++
		if !cfg.Since.IsZero() && md.Timestamp.Before(cfg.Since) {
			// nats-server 2.9.10 can start a consumer by start time before
			// that time once messages were deleted after it (an
			// operator's walk saw an event stored before --since read):
			// not in the replay's scope, nor in its total.
			p.Total = max(p.Total, 1) - 1
			return last == end, nil
		}
		inBatch++
		p.Read++
		turn, err := events.Decode(m.Data())
		if err == nil && events.TokenFromSubject(cfg.Prefix, m.Subject()) != events.UserToken(turn.UserID) {
			err = errTokenMismatch
		}
		switch {
		case err != nil:
			p.Invalid++
		case !turn.MemoryEnabled():
			p.OptedOut++
		default:
			st, _, _ := storeTurn(turn, m, cfg.MaxClockSkew)
			turns = append(turns, st)
			bytes += len(st.UserMessage) + len(st.AssistantResponse) + len(st.Metadata)
		}
		switch {
		case len(turns) >= cfg.Window || bytes >= cfg.WindowBytes:
			if err := flush(); err != nil {
				return false, err
			}
		case inBatch >= cfg.BatchSize:
			progress()
		}
		return last == end, nil
	}

	if src.pending == 0 {
		deleteConsumer(ctx, cfg, src.cons)
		return nil
	}
	cons, pending := src.cons, src.pending
	stalls := 0
	for {
		if pending > 0 {
			readBefore := read
			done, err := readUntilIdle(ctx, cfg, cons, take)
			if err != nil {
				return err
			}
			if done {
				return flush()
			}
			if read > readBefore {
				stalls = 0
			} else {
				stalls++
			}
		}
		if err := flush(); err != nil {
			return err
		}
		if stalls > replayMaxStalls {
			return incomplete(fmt.Errorf("the stream delivered nothing after %d new consumers, each waited on for %s", replayMaxStalls, cfg.StallTimeout))
		}
		// The consumer says it is done, or it stalled: ask a fresh one from
		// the next sequence whether anything is left.
		deleteConsumer(ctx, cfg, cons)
		occ := src.occ
		if last > 0 {
			occ.DeliverPolicy, occ.OptStartSeq, occ.OptStartTime = jetstream.DeliverByStartSequencePolicy, last+1, nil
		}
		var err error
		cons, pending, err = orderedConsumer(ctx, cfg, occ)
		if ctx.Err() != nil {
			return fmt.Errorf("replay: %w", ctx.Err())
		}
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return incomplete(err)
		}
		if err != nil {
			// A transient failure counts as a stall, so that it is retried
			// a bounded number of times.
			stalls++
			cfg.Logger.Warn("replay: cannot create a consumer; retrying", "subject", src.filter, "from_seq", last+1, "error", err)
			if stalls > replayMaxStalls {
				return incomplete(err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("replay: %w", ctx.Err())
			case <-time.After(min(cfg.StallTimeout, time.Second)):
			}
			continue
		}
		if pending == 0 {
			deleteConsumer(ctx, cfg, cons)
			return nil
		}
		if stalls > 0 {
			cfg.Logger.Info("replay: consumer stalled; reading on from a new one", "subject", src.filter, "from_seq", last+1, "pending", pending)
		}
	}
}

// windowChunks splits a window's turns into chunks of at most size turns,
// each recorded in one transaction: the turns grouped by user (users in
// order of first appearance, each user's turns in stream order), a user's
// turns in one chunk unless they are more than size, so that a user's turns
// of the whole window share jobs.
func windowChunks(turns []store.Turn, size int) [][]store.Turn {
	byUser := make(map[string][]store.Turn)
	var users []string
	for _, t := range turns {
		if _, ok := byUser[t.UserID]; !ok {
			users = append(users, t.UserID)
		}
		byUser[t.UserID] = append(byUser[t.UserID], t)
	}
	var (
		out   [][]store.Turn
		chunk []store.Turn
	)
	for _, u := range users {
		ts := byUser[u]
		if len(chunk) > 0 && len(chunk)+len(ts) > size {
			out, chunk = append(out, chunk), nil
		}
		for len(ts) > size {
			out, ts = append(out, ts[:size]), ts[size:]
		}
		chunk = append(chunk, ts...)
	}
	if len(chunk) > 0 {
		out = append(out, chunk)
	}
	return out
}

// readUntilIdle passes the messages of cons to take until take reports the
// end (done), the consumer says nothing more is pending, nothing arrives for
// StallTimeout, or the iterator fails; only ctx's end is an error.
func readUntilIdle(ctx context.Context, cfg ReplayConfig, cons jetstream.Consumer, take func(jetstream.Msg) (bool, error)) (done bool, err error) {
	it, err := cons.Messages(jetstream.PullMaxMessages(cfg.BatchSize * 2))
	if err != nil {
		cfg.Logger.Warn("replay: cannot read the stream", "error", err)
		return false, nil
	}
	defer it.Stop()
	for {
		nextCtx, cancel := context.WithTimeout(ctx, cfg.StallTimeout)
		m, err := it.Next(jetstream.NextContext(nextCtx))
		cancel()
		if ctx.Err() != nil {
			return false, fmt.Errorf("replay: %w", ctx.Err())
		}
		if errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
			return false, nil
		}
		if err != nil {
			cfg.Logger.Warn("replay: reading the stream failed", "error", err)
			return false, nil
		}
		done, err := take(m)
		if err != nil || done {
			return done, err
		}
		if md, err := m.Metadata(); err == nil && md.NumPending == 0 {
			return false, nil
		}
	}
}

// orderedConsumer creates an ordered consumer and returns how many events it
// has pending.
func orderedConsumer(ctx context.Context, cfg ReplayConfig, occ jetstream.OrderedConsumerConfig) (jetstream.Consumer, uint64, error) {
	cons, err := cfg.JetStream.OrderedConsumer(ctx, cfg.Stream, occ)
	if err != nil {
		return nil, 0, fmt.Errorf("replay: consumer for %v: %w", occ.FilterSubjects, err)
	}
	ictx, cancel := events.InfoContext(ctx, cfg.JetStream)
	info, err := cons.Info(ictx)
	cancel()
	if err != nil {
		return nil, 0, fmt.Errorf("replay: consumer info: %w", err)
	}
	return cons, info.NumPending, nil
}

// deleteConsumer removes a consumer the replay is done with, rather than
// leaving it to the server's inactivity threshold. Best effort.
func deleteConsumer(ctx context.Context, cfg ReplayConfig, cons jetstream.Consumer) {
	if cons == nil {
		return
	}
	if info := cons.CachedInfo(); info != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = cfg.JetStream.DeleteConsumer(ctx, cfg.Stream, info.Name)
	}
}

// deleteForgotten deletes from the stream the events a forget covers that
// a replay skipped (seqs): a forget whose deletes from the stream did not
// finish, or a stream restored from a backup older than the forget, left
// them, text and all, where a forget promises none stays. Secure deletes,
// as the forget's own. A delete that fails (a stream that denies deletes)
// is warned of, not the replay's failure: the events stay skipped, as
// before, and ForgottenDeleted says how many went.
func deleteForgotten(ctx context.Context, cfg ReplayConfig, seqs []uint64, p *ReplayProgress) error {
	if len(seqs) == 0 {
		return nil
	}
	ictx, cancel := events.InfoContext(ctx, cfg.JetStream)
	st, err := cfg.JetStream.Stream(ictx, cfg.Stream)
	cancel()
	if err != nil {
		return fmt.Errorf("replay: stream %s: %w", cfg.Stream, events.NoJetStream(err))
	}
	dctx, cancel := context.WithTimeout(ctx, purgeTimeout+time.Duration(len(seqs))*purgePerEvent)
	defer cancel()
	var erased []uint64
	defer func() { releaseErasedOrWarn(dctx, cfg.JetStream, st, erased, cfg.Logger) }()
	for i, seq := range seqs {
		if _, err := deleteEvent(dctx, st, seq, true); err != nil { // gone already counts: ForgottenDeleted is what is no longer there
			cfg.Logger.Warn("replay could not delete events a forget covers; they stay skipped", "stream", cfg.Stream,
				"first_seq", seq, "events", len(seqs)-i, "error", err)
			return nil
		}
		erased = append(erased, seq)
		p.ForgottenDeleted++
	}
	return nil
}
