package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// ForgetResult counts what Forget removed.
type ForgetResult struct {
	store.Removed
	// StreamEvents counts turn events purged from the turn stream: those on
	// the user's subject and on subjects under it, and the user's events
	// that were dead-lettered from another subject. DeadLetters counts the
	// user's dead letters deleted from the dead-letter stream.
	StreamEvents uint64
	DeadLetters  uint64
}

// Forget deletes a user. First, in one Postgres transaction, it leaves a
// tombstone for the user's token (the turn-stream sequence the forget covers
// and its time, nothing of the user's data) and deletes everything derived:
// facts, fact history, context, turns, jobs naming the user's turns and
// token usage. Ingest, extraction and replay check the tombstone in the
// transaction that writes, so an event published before the forget is
// dropped wherever it was in flight; a turn published after it starts a new
// memory. Then it deletes the user's own documents created by the
// tombstone's time, with the collections of then left without one and the
// read grants made by then (store.ForgetCollections: what the user wrote
// after stays), and purges the user's events, up to the
// tombstone's sequence, from the turn stream and the dead-letter stream,
// so that no replay can bring them back.
//
// ctx's deadline bounds the database transaction only: once it has
// committed, the rest runs under bounds of its own even when the deadline
// passes. ctx being cancelled (a shutdown, Ctrl-C) stops the rest too.
//
// Forget answers success only when all of it is done. A forget that failed
// half-way (the documents or the stream purge failed, or were cancelled,
// after the database side committed: an *IncompleteError) can simply be
// run again. With an empty prefix or stream the defaults apply;
// the dead-letter stream is events.DeadLetterStream(stream), as Worker
// creates it by default.
func Forget(ctx context.Context, js jetstream.JetStream, s *store.Store, prefix, stream, userID string) (ForgetResult, error) {
	return ForgetLogged(ctx, js, s, prefix, stream, userID, nil)
}

// ForgetLogged is Forget logging to logger (nil: slog.Default()): a
// command's forget logs in its own --log-format.
func ForgetLogged(ctx context.Context, js jetstream.JetStream, s *store.Store, prefix, stream, userID string, logger *slog.Logger) (ForgetResult, error) {
	if stream == "" {
		stream = events.DefaultStream
	}
	if logger == nil {
		logger = slog.Default()
	}
	return forget(ctx, js, s, prefix, stream, events.DeadLetterStream(stream), userID, nil, logger)
}

// Forget deletes a user as the package-level Forget does, with the worker's
// stream settings. It lets the enrich service's forget endpoint use it.
func (w *Worker) Forget(ctx context.Context, userID string) (ForgetResult, error) {
	return forget(ctx, w.js, w.cfg.Store, w.cfg.Prefix, w.cfg.Stream, w.cfg.DeadLetterStream, userID, nil, w.logger)
}

// forgetAttempts bounds how often the database side is tried when it meets
// a lock timeout or a deadlock (with a statement that does not take the
// user's lock, e.g. a prune).
const forgetAttempts = 3

// purgeTimeout and purgePerEvent bound the stream side once the database
// side committed: 30s to read the user's events, then 30s and 50ms more for
// each of them to delete them (each is deleted on its own; about 1,900 a
// second on 2 cores on 2.9.10, see BenchmarkForgetStreamSide; nats-server
// 2.15.2 rewrites the message's whole block for each secure delete: 47 a
// second in a 30 MB stream, where 2 ms each gave a forget of 2,000 events
// 34 s for about 42).
const (
	purgeTimeout  = 30 * time.Second
	purgePerEvent = 50 * time.Millisecond
)

// forgetDocsTimeout bounds the deletion of a user's document collections
// once the database side committed: 10 MB of documents took 3.6 s on 2
// cores, and the documents cap (--max-docs-size) may let one user hold
// gigabytes.
const forgetDocsTimeout = 10 * time.Minute

// reapplied is a forget recorded in NATS being applied again (see
// reapplyForgets): the stream position it covered, and when it was made.
type reapplied struct {
	through store.StreamPosition
	at      time.Time
}

// forget is Forget, or, with again, a recorded forget applied again: it
// covers again.through instead of the stream's last message now, and
// deletes nothing when the database knows it by now or the user has memory
// written since (store.ReapplyForget).
func forget(ctx context.Context, js jetstream.JetStream, s *store.Store, prefix, stream, deadLetters, userID string,
	again *reapplied, logger *slog.Logger) (ForgetResult, error) {
	var r ForgetResult
	if userID == "" {
		return r, errors.New("forget: user id is required")
	}
	if prefix == "" {
		prefix = events.DefaultPrefix
	}
	if stream == "" {
		stream = events.DefaultStream
	}
	token := events.UserToken(userID)
	// Held while it runs (shared: a retry of it may run beside it), so
	// that a worker starting meanwhile leaves the record it writes
	// unfinished to it, rather than taking it for one cut short and
	// finishing it beside it (finishForget). Without the hold (the
	// database did not answer, or a start finishing an earlier forget of
	// the user holds it alone) it runs all the same: a forget does not wait.
	switch release, ok, err := s.Hold(ctx, forgetHold(token), false); {
	case err != nil:
		logger.Warn("forget: not marked running in Postgres: a worker starting meanwhile may take it for one cut short and finish it beside this one",
			"user_token", token, "error", err)
	case ok:
		defer release()
	}
	ictx, cancel := events.InfoContext(ctx, js)
	turns, err := js.Stream(ictx, stream)
	cancel()
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return r, &NoTurnStreamError{Stream: stream}
	}
	if err != nil {
		return r, fmt.Errorf("forget: stream %s: %w", stream, events.NoJetStream(err))
	}
	var (
		info *jetstream.StreamInfo
		tomb store.Tombstone
	)
	for attempt := 1; ; attempt++ {
		// Read again at each attempt: the turns published while the
		// last one waited on a lock are before this one.
		// Each its own bound: the attempts before may have waited long
		// on locks.
		ictx, cancel := events.InfoContext(ctx, js)
		info, err = turns.Info(ictx)
		cancel()
		if err != nil {
			return r, fmt.Errorf("forget: stream %s: %w", stream, err)
		}
		if again != nil {
			r.Removed, tomb, err = s.ReapplyForget(ctx, userID, token, again.through, again.at, extractJobs, embedJobs)
		} else {
			r.Removed, tomb, err = s.ForgetUser(ctx, userID, token, streamPosition(info), extractJobs, embedJobs)
		}
		if err == nil || !store.IsLockWait(err) || attempt == forgetAttempts {
			break
		}
	}
	if err != nil {
		return ForgetResult{}, &DatabaseSideError{Err: err}
	}
	// The database side has committed and nothing of the user's older
	// events can be written again. The rest runs to its end past ctx's
	// deadline, under bounds of its own: it is what makes the forget final.
	// Only ctx being cancelled (a shutdown) stops it. First the user's own
	// document collections (not shared scopes'), which can be far more than
	// the memory (megabytes of chunks and their terms).
	sctx, release := pastDeadline(ctx)
	defer release()
	var (
		recorded uint64             // the unfinished record's revision
		bucket   jetstream.KeyValue // its handle, for the last write
	)
	if again == nil {
		// Recorded unfinished first: a process stopped from here on (killed
		// by its supervisor, or a failure below nobody retries) leaves it
		// so, and the next worker start purges the streams
		// (finishForget). Not cancelled by a shutdown (bounded by
		// recordTimeout): a stop that ends the rest is what it is for.
		// Best effort: the forget goes on without it.
		if recorded, bucket, err = putForgetIn(context.WithoutCancel(ctx), js, nil, stream, tomb, true, 0); err != nil {
			logger.Warn("forget: not recorded in NATS before the rest: if this process stops before the forget is done, no restart finishes it (tried again at the end)",
				"bucket", ForgetsBucket(stream), "error", err)
		}
	}
	// One bound for the attempts: a transaction Postgres rolled back to
	// break a deadlock (40P01) is redone, as the database side is; left
	// to the next start, the documents stayed until then and the forget
	// answered "incomplete".
	dctx, cancel := context.WithTimeout(sctx, forgetDocsTimeout)
	for attempt := 1; ; attempt++ {
		r.Documents, err = s.ForgetCollections(dctx, userID, tomb.ForgottenAt, indexDocumentJobs, chunkEmbedJobs)
		if err == nil || !store.IsRolledBack(err) || attempt == forgetAttempts {
			break
		}
	}
	cancel()
	if err != nil {
		return r, &IncompleteError{What: "documents", Err: err}
	}
	if r.StreamEvents, err = purgeTurns(sctx, js, turns, userSubjects(prefix, token), tomb, info.State.Msgs, logger); err != nil {
		return r, streamSideError(err)
	}
	var moved uint64
	r.DeadLetters, moved, err = purgeDeadLetters(sctx, js, turns, deadLetters, prefix, token, tomb, logger)
	r.StreamEvents += moved
	if err != nil {
		return r, streamSideError(err)
	}
	// Last, the record that outlives a restore of the database from before
	// this forget, now finished. Best effort: the forget itself is done. A recorded
	// forget applied again (through) keeps its record as it is: rewritten
	// with this forget's time, it would stand for a forget later than the
	// user's memory written after the first one, and a backup taken in
	// between (which knows the first forget) would lose that memory.
	if again != nil {
		return r, nil
	}
	if recorded == 0 {
		// The bucket did not answer before: once more, now that the
		// streams did (a blip at the commit must not lose the record a
		// restore needs; a credential without the bucket's permission
		// waits recordTimeout twice).
		if err := recordForget(sctx, js, stream, tomb); err != nil {
			logger.Warn("forget: done, but not recorded in NATS: a restore of a database backup from before it would bring the user's memory back unnoticed",
				"bucket", ForgetsBucket(stream), "error", err)
		}
		return r, nil
	}
	// Only over its own unfinished record: a later forget of the user
	// recorded meanwhile (a retry of the request, while this one's stream
	// side ran) stays, unfinished as it may be.
	if _, _, err := putForgetIn(sctx, js, bucket, stream, tomb, false, recorded); err != nil {
		logger.Warn("forget: done, but still recorded in NATS as unfinished: the next start reads the streams for it again",
			"bucket", ForgetsBucket(stream), "error", err)
	}
	return r, nil
}

// pastDeadline returns a context with ctx's values that is cancelled when
// ctx is cancelled, or when the stop context WithStop put in ctx ends, but
// not when ctx's deadline passes; release frees it. (A deadline that has
// passed hides a later cancellation of ctx's parents: the stop context is
// what reaches a forget past its deadline.)
func pastDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	rest, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel(context.Cause(ctx))
		}
	})
	stopped := func() bool { return false }
	if sc, ok := ctx.Value(stopKey{}).(context.Context); ok {
		stopped = context.AfterFunc(sc, func() { cancel(context.Cause(sc)) })
	}
	return rest, func() {
		stop()
		stopped()
		cancel(nil)
	}
}

type stopKey struct{}

// WithStop returns ctx carrying stop, the caller's shutdown: a forget run
// with it stops the part that follows the memory's transaction (documents,
// streams) when stop ends, even after ctx's deadline has passed, which
// otherwise leaves that part to run to its end under bounds of its own.
func WithStop(ctx, stop context.Context) context.Context {
	return context.WithValue(ctx, stopKey{}, stop)
}

// NoTurnStreamError is a forget refused, nothing deleted, because the turn
// stream does not exist (deleted: a serve start or a publish creates it
// again): where it stands is what the tombstone records.
type NoTurnStreamError struct{ Stream string }

func (e *NoTurnStreamError) Error() string {
	return fmt.Sprintf("forget: the turn stream %s does not exist, so nothing was deleted: create it again (a serve start or a publish does), then send the forget again", e.Stream)
}

// IncompleteError is a forget that failed after the database side
// committed: the memory is gone, but the user's documents or some of their
// events (in the streams, where the tombstone keeps them from being
// recorded again) may be left, and running the forget again completes it.
// Its own deadlines running out are not the caller's: errors.Is(err,
// context.DeadlineExceeded) does not hold, so that a service does not
// answer that its store timed out.
//
// A forget whose database side failed returns a *DatabaseSideError
// instead: nothing of the user's was deleted (unless its commit was not
// confirmed: see there).
type IncompleteError struct {
	// What was not deleted: "documents", or "events from the streams".
	What string
	Err  error
}

func (e *IncompleteError) Error() string {
	return fmt.Sprintf("forget: the user's memory is deleted, but deleting their %s did not finish (%v): run the forget again to complete it", e.What, e.Err)
}

// DatabaseSideError is a forget whose database transaction failed (Postgres
// went away, a lock wait past forgetAttempts): it rolled back, nothing of
// the user's was deleted, and the forget can be run again; but for Err
// wrapping store.ErrCommitUnconfirmed (its commit's connection lost), when
// the memory may be deleted already and the stream's events not: run
// again, the forget completes. Its message is Err's (the store's says
// "forget" already); it unwraps to Err.
type DatabaseSideError struct{ Err error }

func (e *DatabaseSideError) Error() string { return e.Err.Error() }
func (e *DatabaseSideError) Unwrap() error { return e.Err }

func streamSideError(err error) error {
	return &IncompleteError{What: "events from the streams", Err: err}
}

// forgetHold is the name a forget of the user whose token is token holds
// (store.Hold) while it runs.
func forgetHold(token string) string { return "forget." + token }

// userSubjects returns the subjects of the turn stream that may hold the
// user's events: the user's subject and those under it (a frontend's
// "<prefix>.turns.<token>.v2"). Both are read, whatever the stream's
// per-subject counts say: nats-server 2.9.10 reports none on a subject
// whose first messages were deleted while others were published, and a
// forget that trusted it left the user's later events in the stream.
func userSubjects(prefix, token string) []string {
	subject := prefix + ".turns." + token
	return []string{subject, subject + ".>"}
}

// purgeTurns deletes the events on subjects that tomb covers (up to its
// sequence, stored no later than its event), one message at a time, each
// overwritten (as an opted-out event is). Events published after the
// forget stay, also those under the tombstone's sequence in a stream
// created again (a tombstone's sequence may come from the user's turns of
// the stream before). It returns how many it deleted.
//
// Not a subject-filtered stream purge: nats-server before 2.10.11 (Debian
// 12 ships 2.9.10) moves every consumer whose filter is wider than the
// purged subject, as ingest's durable consumer's is, past the purge, so
// other users' events not yet delivered were skipped and never recorded.
// Deleting a message moves no consumer.
//
// The read is bounded by purgeTimeout plus readPerStreamMsg for each of
// the streamMsgs the stream holds (the server scans the blocks that hold
// the user's messages, which can be all of them), the deletes by
// purgeTimeout plus purgePerEvent for each event read.
func purgeTurns(ctx context.Context, js jetstream.JetStream, st jetstream.Stream, subjects []string, tomb store.Tombstone, streamMsgs uint64, logger *slog.Logger) (uint64, error) {
	rctx, cancel := context.WithTimeout(ctx, purgeTimeout+time.Duration(streamMsgs)*readPerStreamMsg)
	defer cancel()
	var seqs []uint64
	for _, subj := range subjects {
		var err error
		if seqs, err = appendSeqs(rctx, st, subj, max(tomb.SeqAlone, tomb.Through.Seq), tomb.Covers, seqs); err != nil {
			return 0, fmt.Errorf("forget: read %s: %w", subj, err)
		}
	}
	dctx, cancel := context.WithTimeout(ctx, purgeTimeout+time.Duration(len(seqs))*purgePerEvent)
	defer cancel()
	return deleteMsgs(dctx, js, st, seqs, logger)
}

// appendSeqs appends to seqs the sequences of subj's messages up to through
// (those at a position keep accepts, when keep is not nil), read with an
// ordered consumer that delivers headers only. The read ends
// on the last one (or on through), or when it stalls and the stream holds
// no message on subj after the last one read: a delete by someone else
// during the read (another forget of the user, an opted-out event erased)
// leaves the consumer's pending count too high to tell the end.
func appendSeqs(ctx context.Context, st jetstream.Stream, subj string, through uint64, keep func(store.StreamPosition) bool, seqs []uint64) ([]uint64, error) {
	err := events.ReadThrough(ctx, st, subj, through, false, forgetReadStall, func(_ jetstream.Msg, md *jetstream.MsgMetadata) bool {
		if keep == nil || keep(store.StreamPosition{Seq: md.Sequence.Stream, Stored: md.Timestamp}) {
			seqs = append(seqs, md.Sequence.Stream)
		}
		return true
	})
	return seqs, err
}

// forgetReadStall is how long reading a subject's sequences waits for the
// next message before it checks whether the stream holds one more.
const forgetReadStall = 5 * time.Second

// deleteInFlight bounds the delete requests a forget has in flight: the
// round trips overlap, the server still applies them one by one. Every
// deleteDrainEvery deletes it lets them all be answered before it sends
// more: nats-server 2.11 and later answer info requests (stream and
// consumer info, stream lookups) only when no other API request waits,
// and 8 in flight without a pause kept one waiting (up to 9.7 s beside
// 5,000 deletes on 2.15.2, secure deletes about 8 ms each there), past
// nats.go's 5 s: a replay's or a clear's lookup beside a forget failed.
// Waiting after every 8 instead halved the deletes a second on 2.9.10.
const (
	deleteInFlight   = 8
	deleteDrainEvery = 32
)

// deleteMsgs overwrites and deletes the messages at seqs, and returns how
// many it deleted itself: one already gone (another forget of the user, or
// ingest erasing an opted-out event, got there first) is no error, and is
// not counted (protocol.md: each forget's counts are what it deleted
// itself). It acknowledges the messages gone on the stream's consumers
// (releaseErased; a failure there is logged). On an error it stops sending
// and returns the first error once the requests in flight are answered.
func deleteMsgs(ctx context.Context, js jetstream.JetStream, st jetstream.Stream, seqs []uint64, logger *slog.Logger) (uint64, error) {
	var (
		mu      sync.Mutex
		erased  []uint64
		deleted uint64
		first   error
		wg      sync.WaitGroup
		slots   = make(chan struct{}, deleteInFlight)
	)
	defer func() { releaseErasedOrWarn(ctx, js, st, erased, logger) }()
	failed := func() bool { mu.Lock(); defer mu.Unlock(); return first != nil }
	for i, seq := range seqs {
		if i > 0 && i%deleteDrainEvery == 0 {
			wg.Wait() // the server's API queue empties (see deleteInFlight)
		}
		if failed() {
			break
		}
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			gone, err := deleteEvent(ctx, st, seq, true)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				erased = append(erased, seq)
				if !gone {
					deleted++
				}
			case first == nil:
				first = fmt.Errorf("forget: delete event %d: %w", seq, err)
			}
		}()
	}
	wg.Wait()
	return deleted, first
}

// purgeDeadLetters deletes the dead letters attributed to the user (see
// eventTokens) of events tomb covers (deadLetterCovered), wherever the
// event was published, and the rejected events themselves from the turn
// stream. The
// dead-letter stream holds rejects only, and one may be of the user
// whatever its subject, so it is read whole, with an ordered consumer
// (within purgeTimeout plus deadLetterReadPerMsg for each dead letter it
// holds: one request per message read 6,000 a second and never finished
// 220,000), and nothing is deleted before the read ends (the deletes within
// purgeTimeout plus purgePerEvent each). It returns the dead letters
// deleted and the turn-stream events deleted.
func purgeDeadLetters(ctx context.Context, js jetstream.JetStream, turns jetstream.Stream, name, prefix, token string, tomb store.Tombstone, logger *slog.Logger) (dead, moved uint64, err error) {
	// ctx has no deadline (pastDeadline): nats.go's 5 s would apply, and
	// other forgets' deletes can hold an info request longer.
	ictx, cancel := events.InfoContext(ctx, js)
	dl, err := js.Stream(ictx, name)
	cancel()
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("forget: stream %s: %w", name, err)
	}
	info := dl.CachedInfo()
	if info.State.Msgs == 0 {
		return 0, 0, nil
	}
	type deadLetter struct {
		seq     uint64
		header  nats.Header
		data    []byte
		subject string // the original subject
	}
	var doomed []deadLetter
	rctx, cancel := context.WithTimeout(ctx, purgeTimeout+time.Duration(info.State.Msgs)*deadLetterReadPerMsg)
	defer cancel()
	err = events.ReadThrough(rctx, dl, events.DeadLetterSubjects(prefix), info.State.LastSeq, true, forgetReadStall, func(m jetstream.Msg, md *jetstream.MsgMetadata) bool {
		h := m.Headers()
		orig := h.Get(events.HeaderOriginalSubject)
		before := deadLetterCovered(tomb, h, md)
		if before && slices.Contains(eventTokens(prefix, orig, h, m.Data()), token) {
			doomed = append(doomed, deadLetter{seq: md.Sequence.Stream, header: h, data: slices.Clone(m.Data()), subject: orig})
		}
		return true
	})
	if err != nil {
		return 0, 0, fmt.Errorf("forget: read dead letters: %w", err)
	}
	dctx, cancel := context.WithTimeout(ctx, purgeTimeout+time.Duration(2*len(doomed))*purgePerEvent)
	defer cancel()
	var erased []uint64
	defer func() { releaseErasedOrWarn(dctx, js, turns, erased, logger) }()
	for _, m := range doomed {
		// The event itself first: when it was published on a subject the
		// purge did not cover (another user's, a malformed one) it is still
		// in the turn stream. Only the same event: same subject and data.
		if seq := originalSeq(m.header); seq > 0 {
			ev, err := turns.GetMsg(dctx, seq)
			switch {
			case errors.Is(err, jetstream.ErrMsgNotFound):
			case err != nil:
				return dead, moved, fmt.Errorf("forget: read turn stream: %w", err)
			case ev.Subject == m.subject && bytes.Equal(ev.Data, m.data):
				gone, err := deleteEvent(dctx, turns, seq, true)
				if err != nil {
					return dead, moved, fmt.Errorf("forget: delete turn event %d: %w", seq, err)
				}
				erased = append(erased, seq)
				if !gone {
					moved++
				}
			}
		}
		gone, err := deleteEvent(dctx, dl, m.seq, false)
		if err != nil {
			return dead, moved, fmt.Errorf("forget: delete dead letter %d: %w", m.seq, err)
		}
		if !gone {
			dead++
		}
	}
	return dead, moved, nil
}

// readPerStreamMsg is what purgeTurns allows for each message of the turn
// stream when it reads a user's subjects, on top of purgeTimeout: 200 s
// more for 10 million messages.
const readPerStreamMsg = 20 * time.Microsecond

// deadLetterReadPerMsg is what purgeDeadLetters allows for reading each
// message of the dead-letter stream, on top of purgeTimeout: far more than
// an ordered consumer takes.
const deadLetterReadPerMsg = 500 * time.Microsecond

// deleteEvent deletes the message at seq from st (overwriting it first when
// secure), and succeeds when it is already gone; gone says so (another
// forget of the user, or ingest erasing an opted-out event, got there
// first), so that a forget counts only what it deleted itself. The
// delete's own error does not tell: nats.go wraps the server's answer
// ("sequence N not found", code 10043) into ErrMsgDeleteUnsuccessful as
// text, so a failed delete asks whether the message is still there (a
// delete that failed on its way back, the message deleted, is counted
// gone: a count too low by one, never one counted twice).
func deleteEvent(ctx context.Context, st jetstream.Stream, seq uint64, secure bool) (gone bool, err error) {
	if secure {
		err = st.SecureDeleteMsg(ctx, seq)
	} else {
		err = st.DeleteMsg(ctx, seq)
	}
	if err == nil {
		return false, nil
	}
	if _, gerr := st.GetMsg(ctx, seq); errors.Is(gerr, jetstream.ErrMsgNotFound) {
		return true, nil
	}
	return false, err
}

// deadLetterCovered reports whether tomb covers the event of the dead
// letter with header h, stored in the dead-letter stream as md says: by the
// event's place in the turn stream (Tombstone.Covers) when the dead letter
// records it (HeaderStreamStored), by its sequence, or because the dead
// letter itself was stored before the tombstone's event (so was its event,
// whatever the sequence it names: a stream deleted and created again
// numbers from 1 anew). Any of them will do: a dead letter holds the
// event's text, and one of an event published after the forget that goes
// too is less harm than one of before that stays.
func deadLetterCovered(tomb store.Tombstone, h nats.Header, md *jetstream.MsgMetadata) bool {
	if stored, err := time.Parse(time.RFC3339Nano, h.Get(events.HeaderStreamStored)); err == nil &&
		tomb.Covers(store.StreamPosition{Seq: originalSeq(h), Stored: stored}) {
		return true
	}
	return originalSeq(h) <= max(tomb.SeqAlone, tomb.Through.Seq) || md.Timestamp.Before(tomb.Through.Stored)
}

// originalSeq is the turn-stream sequence a dead letter records, 0 when it
// has none.
func originalSeq(h nats.Header) uint64 {
	seq, _ := strconv.ParseUint(h.Get(events.HeaderStreamSeq), 10, 64)
	return seq
}

// eventTokens returns the user tokens an event, or the dead letter of one,
// is attributed to: the token of the turn subject it was published on (for
// a malformed subject such as "<prefix>.turns.dave.v2", the token after
// "turns"), the Memoryd-User-Token header of a dead letter, and the token of
// the body's user_id when it can be read. A forget of any of them takes it.
func eventTokens(prefix, subject string, h nats.Header, data []byte) []string {
	var out []string
	add := func(t string) {
		if t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if rest, ok := strings.CutPrefix(subject, prefix+".turns."); ok {
		t, _, _ := strings.Cut(rest, ".")
		add(t)
	}
	add(h.Get(events.HeaderUserToken))
	add(bodyToken(data))
	return out
}

// bodyToken is the user token of an event body's user_id, "" when the body
// has none that can be read.
func bodyToken(data []byte) string {
	var body struct {
		UserID string `json:"user_id"`
	}
	if json.Unmarshal(data, &body) != nil || body.UserID == "" {
		return ""
	}
	return events.UserToken(body.UserID)
}

// dropForgotten sets the transaction's lock timeout, takes the locks of
// the turns' users and returns the turns no forget covers, in one round
// trip (store.LockUsersWithin). Call it first in the transaction that
// writes them.
func dropForgotten(ctx context.Context, q *store.Store, lockTimeout time.Duration, turns []store.Turn) ([]store.Turn, error) {
	tokenOf, tokens := userTokens(turns)
	tombs, err := q.LockUsersWithin(ctx, lockTimeout, tokens)
	if err != nil || len(tombs) == 0 {
		return turns, err
	}
	return uncovered(turns, tokenOf, tombs, nil), nil
}

// uncovered returns the turns that no tombstone of tombs covers and that
// are not of a user in busy.
func uncovered(turns []store.Turn, tokenOf map[string]string, tombs map[string]store.Tombstone, busy map[string]bool) []store.Turn {
	keep := make([]store.Turn, 0, len(turns))
	for _, t := range turns {
		if busy[t.UserID] {
			continue
		}
		if tomb, ok := tombs[tokenOf[t.UserID]]; ok && tomb.Covers(t.Placed) {
			continue
		}
		keep = append(keep, t)
	}
	return keep
}

// userTokens returns the token of each user of turns, and the tokens.
func userTokens(turns []store.Turn) (tokenOf map[string]string, tokens []string) {
	tokenOf = make(map[string]string, 1)
	tokens = make([]string, 0, 1)
	for _, t := range turns {
		if _, ok := tokenOf[t.UserID]; !ok {
			tokenOf[t.UserID] = events.UserToken(t.UserID)
			tokens = append(tokens, tokenOf[t.UserID])
		}
	}
	return tokenOf, tokens
}

// dropForgottenOrBusy is dropForgotten for ingest, which must not wait for
// one user's forget with every other user's turns: it also leaves out the
// turns of users a forget holds now, and returns those users (by user id).
func dropForgottenOrBusy(ctx context.Context, q *store.Store, turns []store.Turn) (keep []store.Turn, busy map[string]bool, err error) {
	tokenOf, tokens := userTokens(turns)
	tombs, busyTokens, err := q.TryLockUsers(ctx, tokens)
	if err != nil {
		return nil, nil, err
	}
	if len(busyTokens) > 0 {
		busy = make(map[string]bool, len(busyTokens))
		for user, token := range tokenOf {
			if slices.Contains(busyTokens, token) {
				busy[user] = true
			}
		}
	}
	return uncovered(turns, tokenOf, tombs, busy), busy, nil
}

// keepRemembered is dropForgotten for extraction results and the usage of
// the model calls that gave them (nil for none): it returns the results no
// forget covers, their event ids, and the tokens of every call, each on
// its own (with its id), those spent on turns a forget covers marked
// Forgotten (counted in everyone's count alone: the model server spent
// them).
func keepRemembered(ctx context.Context, q *store.Store, lockTimeout time.Duration, done []extracted, usage *jobUsage) ([]extracted, []string, []store.UsageCall, error) {
	turns := make([]store.Turn, 0, len(done)+usage.len())
	for _, d := range done {
		turns = append(turns, d.turn)
	}
	if usage != nil {
		turns = append(turns, usage.turns...)
	}
	keep, err := dropForgotten(ctx, q, lockTimeout, turns)
	if err != nil {
		return nil, nil, nil, err
	}
	kept := make(map[store.TurnKey]bool, len(keep))
	for _, t := range keep {
		kept[t.Key()] = true
	}
	out := make([]extracted, 0, len(keep))
	ids := make([]string, 0, len(keep))
	for _, d := range done {
		if kept[d.turn.Key()] {
			out = append(out, d)
			ids = append(ids, d.turn.EventID)
		}
	}
	var calls []store.UsageCall
	if usage != nil {
		for i, t := range usage.turns {
			calls = append(calls, store.UsageCall{ID: usage.ids[i], UserID: t.UserID, Used: usage.used[i], Forgotten: !kept[t.Key()]})
		}
	}
	return out, ids, calls, nil
}
