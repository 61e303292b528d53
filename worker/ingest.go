package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// ingestRun is one Start's ingest channels, handed to its loop: a Start
// after a Stop makes new ones, which the loop of the run before (its
// goroutines, still ending after a Stop that did not wait for it) must
// never read. Read from the worker's fields, they raced with the next
// Start's writes.
type ingestRun struct {
	msgs <-chan jetstream.Msg
	stop <-chan struct{}
	done chan<- struct{}
}

// ingestLoop batches buffered messages opportunistically: it blocks for the
// first one, then takes whatever else is already there, up to BatchSize, so a
// lone turn is recorded at once and a burst shares one transaction.
func (w *Worker) ingestLoop(ctx context.Context, run ingestRun) {
	defer close(run.done)
	// Ends a wait for a turn (see pace.enter) when Stop is called.
	paceCtx, cancelPace := context.WithCancel(ctx)
	defer cancelPace()
	go func() {
		<-run.stop
		cancelPace()
	}()
	batch := make([]jetstream.Msg, 0, w.cfg.BatchSize)
	backoff := time.Duration(0)
	failed := 0 // batches failed since the current outage (w.ingestFailing) began
	for {
		batch = batch[:0]
		select {
		case <-run.stop:
			return
		case m := <-run.msgs:
			batch = append(batch, m)
		}
		// Held back while enrich is slow (Config.Pacer): the batch waits
		// for its turn among the batches and jobs running; messages
		// arriving meanwhile make it larger. Stop ends the wait.
		leave := w.pace.enter(paceCtx)
	fill:
		for len(batch) < w.cfg.BatchSize {
			select {
			case m := <-run.msgs:
				batch = append(batch, m)
			default:
				break fill
			}
		}
		stored, err := w.ingest(ctx, batch)
		leave()
		if isDataError(err) {
			// Postgres refused an event's content (something validation let
			// through). Record the events one by one so the bad one is
			// dead-lettered and the others are not held back with it.
			for _, m := range batch {
				var one bool
				one, err = w.ingest(ctx, []jetstream.Msg{m})
				stored = stored || one
				if isDataError(err) {
					w.reject(ctx, m, fmt.Errorf("invalid turn event: postgres refused it: %w", err))
					err = nil
				}
				if err != nil {
					break
				}
			}
		}
		if err != nil && ctx.Err() != nil {
			// Stop's deadline passed during the batch: nothing of it was
			// acknowledged; hand it back for the next process. The loop
			// goes on until Stop says (each batch now fails at once), so
			// that the consumer's handler never blocks on a full channel.
			w.logger.Info("ingest: batch cancelled by shutdown; handed back", "events", len(batch))
			for _, m := range batch {
				_ = m.Nak()
			}
			continue
		}
		if err != nil {
			// Postgres is unavailable: nothing was acknowledged. Hand the
			// batch back with a delay and pause pulling for as long, doubling
			// up to maxIngestBackoff× RetryBackoff, so that an outage is
			// not a hot loop; its lines are held back (OutageRepeats).
			backoff = min(max(backoff*2, w.cfg.RetryBackoff), maxIngestBackoff*w.cfg.RetryBackoff)
			failed++
			w.ingestFailing.fail(err)
			w.logger.Error(msgIngestFailing, "error", err, "events", len(batch), "retry_in", backoff)
			for _, m := range batch {
				_ = m.NakWithDelay(backoff)
			}
			if w.waitOutage(ctx, run.stop, err, backoff) {
				return
			}
			continue
		}
		if !stored {
			// Nothing reached the turns table (events dead-lettered or
			// opted out): it says nothing about whether turns can be
			// recorded again, so the outage, its count and its backoff go
			// on.
			continue
		}
		if o := w.ingestFailing.load(); o != nil {
			// Said once, so that an operator reading the log after an
			// outage sees where it ended (the errors above only say
			// that it went on).
			w.logger.Info("ingest: recording turns again", "failed_batches", failed,
				"failed_for", time.Since(o.Since).Round(time.Millisecond).String())
			failed = 0
			w.ingestFailing.end()
		}
		backoff = 0
	}
}

// ingestTxAttempts bounds the transactions one batch tries when Postgres
// rolls them back for a lock conflict (store.IsRolledBack), before the
// batch goes the way of a failure (logged, handed back, waited out).
const ingestTxAttempts = 3

// msgIngestFailing is logged at each batch that cannot be recorded.
const msgIngestFailing = "ingest: cannot record turns; will redeliver"

// maxIngestBackoff bounds the ingest's backoff after failed batches, in
// RetryBackoffs (5 s by default): a failure a ping cannot see end (a full
// disk freed, a lock released) is retried within it. At 30, turns waited
// up to 30 s after the space was freed (a disk-full walk), and the
// batches of a connection outage came back up to 30 s after Postgres did.
const maxIngestBackoff = 5

// IngestFailing reports the ingest's current outage: the batches it read
// since its Since all failed (Postgres refused or could not take them; the
// events stay in the stream), nil while it records turns. A database that
// answers pings but refuses writes (a full disk) shows here only: the
// health checks' ping passes.
func (w *Worker) IngestFailing() *Outage { return w.ingestFailing.load() }

// waitOutage waits d after a batch failed with err, or until Stop (then
// it reports true). When err says the database could not be reached (a
// connection refused or cut, the server shutting down), it ends
// the wait as soon as the database answers a ping, tried every
// RetryBackoff (at most every second): the backoff bounds how often a
// failing batch is retried and logged, and turns published meanwhile need
// not wait out its last 30 s once Postgres is back. The failed batch itself
// comes back when its delay ends. Any other error (a lock timeout, a batch
// out of time, a disk full) waits d: a ping answers while writes still
// fail.
func (w *Worker) waitOutage(ctx context.Context, stop <-chan struct{}, err error, d time.Duration) (stopped bool) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	var probe <-chan time.Time
	if unreachable(err) {
		t := time.NewTicker(min(w.cfg.RetryBackoff, time.Second))
		defer t.Stop()
		probe = t.C
	}
	for {
		select {
		case <-stop:
			return true
		case <-deadline.C:
			return false
		case <-probe:
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			err := w.cfg.Store.Ping(pctx)
			cancel()
			if err == nil {
				return false
			}
		}
	}
}

// unreachable reports whether err says the database could not be reached
// (no Postgres error: a connection refused or cut) or is going away
// (SQLSTATE class 08 connection exception, 57P admin shutdown or cannot
// connect now), or takes no writes (25006). A batch that ran out of time
// (its AckWait/2) is not: it may have waited on a lock of a database that
// answers pings (an operator's ALTER TABLE or VACUUM FULL of turns): it
// waits its backoff, as it did before pings ended waits.
func unreachable(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return !pgconn.Timeout(err) && !errors.Is(err, context.DeadlineExceeded)
	}
	// 25006: the database takes no writes (a standby, or set read-only):
	// probed as an outage, so that ingest resumes within a second of it
	// taking writes again instead of after its doubled backoff (up to
	// 30 s; a dependency walk).
	return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P") || store.IsReadOnly(err)
}

// ingest records one batch. It returns an error only when the batch could not
// be stored and must be redelivered; invalid events are dead-lettered and
// terminated here, valid ones acknowledged after the commit. stored reports
// whether the batch's turns were committed (false when it held none).
func (w *Worker) ingest(ctx context.Context, batch []jetstream.Msg) (stored bool, err error) {
	ctx, span := w.startIngestSpan(ctx, batch)
	defer func() { endSpan(span, err, "store_unavailable") }()
	w.received.Add(int64(len(batch)))
	turns := make([]store.Turn, 0, len(batch))
	valid := make([]jetstream.Msg, 0, len(batch))
	var badMsgID []int // indexes in turns of events with a Nats-Msg-Id other than MsgID
	for _, m := range batch {
		turn, err := w.decode(m)
		if err != nil {
			w.reject(ctx, m, err)
			continue
		}
		if !turn.MemoryEnabled() {
			w.optOut(ctx, m, turn)
			continue
		}
		if msgIDMismatch(m, turn) {
			badMsgID = append(badMsgID, len(turns))
		}
		st, clamped, redacted := storeTurn(turn, m, w.cfg.MaxClockSkew)
		for _, k := range redacted {
			w.cfg.Observer.Redacted(string(k), RedactedInTurn)
		}
		if clamped {
			w.clamped.Add(1)
			w.logger.Warn("turn timestamp is in the future; using the time the stream stored it",
				"event_id", turn.ID, "user_id", turn.UserID, "timestamp", turn.Timestamp, "stored_at", st.TurnAt,
				"max_clock_skew", w.cfg.MaxClockSkew.String())
		}
		turns = append(turns, st)
		valid = append(valid, m)
	}
	if len(turns) == 0 {
		return false, nil
	}
	if w.tracer != nil {
		ctx = withTurnTraces(ctx, batchTurnTraces(turns, valid))
	}
	var (
		outcomes []store.TurnOutcome
		keep     []store.Turn
		busy     map[string]bool // users a forget holds: their events wait
		held     int             // their events, handed back
	)
	// Bounded so that a hung database cannot hold the batch (and Stop)
	// forever; the events are then redelivered like on any other failure.
	txCtx, cancel := context.WithTimeout(ctx, w.cfg.AckWait/2)
	defer cancel()
	record := func(tx pgx.Tx, q *store.Store) error {
		// Turns of a forgotten user published before the forget are
		// dropped (and acknowledged): the forget is final. Those of a user
		// being forgotten now are handed back, not waited for: the forget
		// may take a minute, and the batch holds other users' turns.
		var err error
		keep, busy, err = dropForgottenOrBusy(txCtx, q, turns)
		if err != nil {
			return err
		}
		if outcomes, err = q.InsertTurns(txCtx, keep); err != nil {
			return err
		}
		return w.enqueue(txCtx, tx, inserted(keep, outcomes))
	}
	// Redone at once, a few times, when Postgres rolled it back to break a
	// deadlock or a serialization conflict: the other side has gone on,
	// and the batch is not an outage to log, hand back and wait out. Only
	// the transaction is redone: the events rejected or opted out above
	// are dealt with.
	for attempt := 1; ; attempt++ {
		err = w.cfg.Store.InTx(txCtx, record)
		if err == nil || !store.IsRolledBack(err) || attempt == ingestTxAttempts || txCtx.Err() != nil {
			break
		}
		w.logger.Debug("ingest: batch rolled back for a lock conflict; redone", "attempt", attempt, "error", err)
	}
	if err != nil {
		return false, err
	}
	// A conflicting duplicate (the user's event id recorded with other
	// content) is dead-lettered, never taken for the recorded turn; the
	// other events are acknowledged. A lost ack only means a redelivery,
	// which inserts nothing.
	// A message is known by its stream sequence (0 only when its metadata
	// cannot be read: then by its key).
	type msgKey struct {
		seq uint64
		key store.TurnKey
	}
	msgOf := func(t store.Turn) msgKey {
		if t.Placed.Seq != 0 {
			return msgKey{seq: t.Placed.Seq}
		}
		return msgKey{key: t.Key()}
	}
	conflict := make(map[msgKey]bool)
	recorded := 0
	for i, t := range keep {
		switch outcomes[i] {
		case store.TurnInserted:
			recorded++
		case store.TurnConflict:
			conflict[msgOf(t)] = true
		}
	}
	for i, m := range valid {
		t := turns[i]
		if busy[t.UserID] {
			// Redelivered once the forget has committed, which then
			// drops it, or records it when published after the forget.
			// Later each time, up to 30 backoffs: a long forget's events
			// wait without a transaction a second each.
			delay := w.cfg.RetryBackoff
			if md, err := m.Metadata(); err == nil {
				delay *= time.Duration(min(max(md.NumDelivered, 1), 30))
			}
			_ = m.NakWithDelay(delay)
			held++
			continue
		}
		if conflict[msgOf(t)] {
			w.reject(ctx, m, fmt.Errorf("%w: user %q already has event id %q with other content", errConflict, t.UserID, t.EventID))
			continue
		}
		_ = m.Ack()
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("memoryd.turns.recorded", recorded), attribute.Int("memoryd.turns.conflicts", len(conflict)))
	}
	w.recorded.Add(int64(recorded))
	// Counted once a turn, when it is recorded: a batch handed back (an
	// outage) or tried again event by event comes back through here.
	recordedMsg := make(map[msgKey]bool, recorded)
	for i, t := range keep {
		if outcomes[i] == store.TurnInserted {
			recordedMsg[msgOf(t)] = true
		}
	}
	for _, i := range badMsgID {
		if recordedMsg[msgOf(turns[i])] {
			w.warnMsgID(valid[i], turns[i])
		}
	}
	w.duplicates.Add(int64(len(keep) - recorded - len(conflict)))
	w.logger.Debug("ingested turns", "events", len(batch), "recorded", recorded, "conflicts", len(conflict), "forgotten", len(turns)-len(keep)-held,
		"held_for_a_forget", held)
	return true, nil
}

// msgIDWarnEvery is the least time between two warnings of checkMsgID:
// a frontend with the mistake makes it on every event.
const msgIDWarnEvery = time.Minute

// msgIDMismatch reports whether m's Nats-Msg-Id is set but not to
// events.MsgID(user, id). The event is recorded as any other: the header
// is the stream's business. But the
// duplicate window is one for the whole stream and event ids are unique
// per user only, so such a frontend's event of one user is dropped as a
// duplicate of another user's with the same id (a counter, say): the
// stream acknowledges it with "duplicate":true and memoryd never sees it.
// This is the only place the mistake can be seen from memoryd's side.
func msgIDMismatch(m jetstream.Msg, turn events.Turn) bool {
	got := m.Headers().Get(jetstream.MsgIDHeader)
	return got != "" && got != events.MsgID(turn.UserID, turn.ID)
}

// warnMsgID counts a turn recorded with a mismatched Nats-Msg-Id
// (msgIDMismatch) and warns of it at most once a msgIDWarnEvery.
func (w *Worker) warnMsgID(m jetstream.Msg, st store.Turn) {
	got := m.Headers().Get(jetstream.MsgIDHeader)
	w.msgIDMismatch.Add(1)
	now := time.Now().UnixNano()
	last := w.msgIDWarned.Load()
	if now-last < int64(msgIDWarnEvery) || !w.msgIDWarned.CompareAndSwap(last, now) {
		return
	}
	w.logger.Warn("turn published with a Nats-Msg-Id other than <user-token>:<id>: events of two users with the same id "+
		"within the stream's duplicate window lose the later one (see docs/protocol.md, Publishing turns); recorded",
		"subject", m.Subject(), "event_id", st.EventID, "msg_id", got, "want_msg_id", events.MsgID(st.UserID, st.EventID),
		"mismatched_total", w.msgIDMismatch.Load())
}

// errConflict rejects an event whose (user, id) is recorded with different
// content: taking it for the recorded turn would silently lose it.
var errConflict = errors.New("conflicting duplicate event id")

// inserted returns the turns InsertTurns recorded.
func inserted(turns []store.Turn, outcomes []store.TurnOutcome) []store.Turn {
	var out []store.Turn
	for i, t := range turns {
		if outcomes[i] == store.TurnInserted {
			out = append(out, t)
		}
	}
	return out
}

// optOut handles a turn with memory:false: nothing is stored, and the event
// is erased from the stream (overwritten, not just marked deleted) before it
// is acknowledged, so that the text is not retained anywhere. If the erase
// fails the event is handed back and tried again; after maxOptOutDeliveries
// it is acknowledged anyway, with an error logged and counted, rather than
// retried forever (e.g. when memoryd's NATS user may not delete from the
// stream).
func (w *Worker) optOut(ctx context.Context, m jetstream.Msg, turn events.Turn) {
	w.optedOut.Add(1)
	done, err := w.erase(ctx, m)
	switch {
	case !done:
		w.logger.Warn("ingest: cannot erase opted-out event from the stream; will retry", "event_id", turn.ID, "user_id", turn.UserID, "error", err)
		return
	case err != nil:
		w.optOutKept.Add(1)
		w.logger.Error("ingest: cannot erase opted-out event from the stream; its text stays there until forget",
			"event_id", turn.ID, "user_id", turn.UserID, "error", err)
	default:
		w.logger.Debug("turn opted out of memory; erased from the stream", "event_id", turn.ID, "user_id", turn.UserID)
	}
	_ = m.Ack()
}

// maxOptOutDeliveries bounds the deliveries erase tries an event in.
const maxOptOutDeliveries = 5

// erase overwrites and deletes m's event from the turn stream (one already
// gone, an earlier delivery having erased it and its ack lost, counts as
// erased) and reports done. When it cannot, it hands m back to be tried
// again and reports not done, for maxOptOutDeliveries deliveries; on the
// last it reports done with the error, and the text stays in the stream
// (memoryd's NATS user may not delete), rather than the event coming back
// forever.
func (w *Worker) erase(ctx context.Context, m jetstream.Msg) (done bool, err error) {
	md, err := m.Metadata()
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err = deleteEvent(ctx, w.ingestStream(), md.Sequence.Stream, true)
	}
	if err != nil && md != nil && md.NumDelivered < maxOptOutDeliveries {
		_ = m.NakWithDelay(w.cfg.RetryBackoff)
		return false, err
	}
	return true, err
}

// enqueue inserts one extraction job per newly recorded turn, or per
// JobSize of them; with ExtractDebounce, one per turn, scheduled later.
// The jobs of a user with a backlog of BacklogTurns pending turns (those
// just recorded included) go behind the other users' (backlogPriority).
func (w *Worker) enqueue(ctx context.Context, tx pgx.Tx, inserted []store.Turn) error {
	var behind map[string]bool
	if w.cfg.BacklogTurns > 0 && len(inserted) > 0 {
		var users []string
		seen := map[string]bool{}
		for _, t := range inserted {
			if !seen[t.UserID] {
				seen[t.UserID] = true
				users = append(users, t.UserID)
			}
		}
		var err error
		if behind, err = w.cfg.Store.WithTx(tx).UsersWithBacklog(ctx, users, w.cfg.BacklogTurns); err != nil {
			return err
		}
		w.logBacklog(behind)
	}
	if w.cfg.ExtractDebounce <= 0 {
		return w.enq.enqueueTurns(ctx, tx, inserted, w.cfg.JobSize, sourceIngest, behind)
	}
	return w.enq.enqueueDebounced(ctx, tx, inserted, w.cfg.Store.Clock().Now().Add(w.cfg.ExtractDebounce), behind)
}

// backlogLogEvery is how often a user whose backlog puts their extraction
// behind the other users' is logged again while it lasts.
const backlogLogEvery = 10 * time.Minute

// logBacklog logs each user of behind, once every backlogLogEvery: the
// queue metrics give totals only, and an operator asks who floods.
func (w *Worker) logBacklog(behind map[string]bool) {
	if len(behind) == 0 {
		return
	}
	now := time.Now()
	w.backlogMu.Lock()
	defer w.backlogMu.Unlock()
	if w.backlogLogged == nil {
		w.backlogLogged = map[string]time.Time{}
	}
	for _, u := range slices.Sorted(maps.Keys(behind)) {
		if at, ok := w.backlogLogged[u]; ok && now.Sub(at) < backlogLogEvery {
			continue
		}
		w.backlogLogged[u] = now
		w.logger.Info("ingest: a user has a backlog of turns waiting for extraction; their new jobs run after other users' (--backlog-turns)",
			"user_id", u, "pending_turns_at_least", w.cfg.BacklogTurns)
	}
	if len(w.backlogLogged) > 1000 {
		for u, at := range w.backlogLogged {
			if now.Sub(at) >= backlogLogEvery {
				delete(w.backlogLogged, u)
			}
		}
	}
}

// Rejection reasons that name no field; see RejectReasons.
const (
	reasonTokenMismatch   = "token_mismatch"
	reasonSubject         = "subject"
	reasonConflictingID   = "conflicting_id"
	reasonPostgresRefused = "postgres_refused"
	reasonMalformed       = "malformed"
	reasonOther           = "other"
)

// RejectReasons are the reasons Observer.TurnRejected reports, so that a
// metrics layer can show them at 0 before they first happen: those that
// name no field, and a field's, "invalid_" and the field's JSON name, for
// each of a turn event's fields.
func RejectReasons() []string {
	reasons := []string{reasonTokenMismatch, reasonSubject, reasonConflictingID, reasonPostgresRefused, reasonMalformed, reasonOther}
	for _, f := range events.TurnFields() {
		reasons = append(reasons, "invalid_"+f)
	}
	return reasons
}

// rejectReason labels a rejection for metrics: the invalid field, or the kind
// of problem; a small, fixed set of values.
func rejectReason(err error) string {
	var ve *events.ValidationError
	switch {
	case errors.Is(err, errTokenMismatch):
		return reasonTokenMismatch
	case errors.Is(err, errSubjectShape):
		return reasonSubject
	case errors.Is(err, errConflict):
		return reasonConflictingID
	case isDataError(err):
		return reasonPostgresRefused
	case errors.As(err, &ve) && ve.Field != "":
		return "invalid_" + ve.Field
	case errors.As(err, &ve):
		return reasonMalformed
	}
	return reasonOther
}

// isDataError reports whether Postgres rejected the data itself (SQLSTATE
// class 22, data exception: e.g. a JSON escape jsonb cannot hold), which no
// retry can fix, as opposed to the database being unavailable.
func isDataError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22")
}

// errTokenMismatch rejects an event whose user_id does not belong to its
// subject, which would let one user's frontend write another user's memory.
var errTokenMismatch = errors.New("invalid turn event: user_id does not match the subject's user token")

// errSubjectShape rejects an event published under the user's subject
// rather than on it ("<prefix>.turns.<token>.v2"): the stream stores it,
// but a turn's subject is exactly "<prefix>.turns.<token>".
var errSubjectShape = errors.New("invalid turn subject")

func (w *Worker) decode(m jetstream.Msg) (events.Turn, error) {
	turn, err := events.Decode(m.Data())
	if err != nil {
		return turn, err
	}
	token := events.TokenFromSubject(w.cfg.Prefix, m.Subject())
	if token == "" && strings.HasPrefix(m.Subject(), events.TurnSubject(w.cfg.Prefix, turn.UserID)+".") {
		// The user's own subject with more after it: the token matches,
		// the subject's shape does not.
		return turn, fmt.Errorf("%w: %s has tokens after the user token; publish on %s",
			errSubjectShape, m.Subject(), events.TurnSubject(w.cfg.Prefix, turn.UserID))
	}
	if token != events.UserToken(turn.UserID) {
		return turn, errTokenMismatch
	}
	return turn, nil
}

// reject copies an invalid event to the dead-letter stream with the reason,
// then terminates it. If the copy cannot be stored the event is handed back
// instead, so that nothing is lost. An event of a user forgotten since it was
// published (see eventTokens) is erased from the stream and terminated
// without a copy; the copy is
// published holding the users' locks, so that a concurrent forget finds it.
// eraseRejected erases a rejected event's text from the turn stream (what
// names it in the log). retry: the erase could not be made and the event is
// left unacknowledged, to come back; kept: the erase failed for good and
// the text stays until a forget.
func (w *Worker) eraseRejected(ctx context.Context, m jetstream.Msg, seq uint64, what string) (retry, kept bool) {
	done, err := w.erase(ctx, m)
	switch {
	case !done:
		w.logger.Warn("ingest: cannot erase "+what+" from the stream; will retry", "stream_seq", seq, "error", err)
		return true, false
	case err != nil:
		w.logger.Error("ingest: cannot erase "+what+" from the stream; its text stays there until forget", "stream_seq", seq, "error", err)
		return false, true
	}
	w.logger.Debug("erased "+what, "stream_seq", seq)
	return false, false
}

// deadLetterReason is a dead letter's reason: err's text, but for an event
// sent with memory off none of its body (a metadata number is quoted in
// its reason otherwise).
func deadLetterReason(err error, optedOut bool) string {
	var ve *events.ValidationError
	if optedOut && errors.As(err, &ve) && ve.Field == "metadata" && strings.HasPrefix(ve.Reason, "number ") {
		return (&events.ValidationError{Field: ve.Field, Reason: "a number is out of range"}).Error()
	}
	return err.Error()
}

// An event sent with memory off (events.OptedOutCopy, which reads that
// leniently) is opted out however else it is invalid: its copy holds its ids
// and sizes, not its text, and once the copy is stored the event is erased
// from the turn stream as a valid opted-out one is (optOut).
func (w *Worker) reject(ctx context.Context, m jetstream.Msg, reason error) {
	var placed store.StreamPosition // zero when the metadata cannot be read
	if md, err := m.Metadata(); err == nil {
		placed = store.StreamPosition{Seq: md.Sequence.Stream, Stored: md.Timestamp}
	}
	seq := placed.Seq
	data, optedOut := m.Data(), false
	if c, ok := events.OptedOutCopy(m.Data()); ok {
		data, optedOut = c, true
	}
	dl := &nats.Msg{Subject: deadLetterSubject(w.cfg.Prefix, m.Subject()), Data: data, Header: nats.Header{}}
	dl.Header.Set(events.HeaderReason, deadLetterReason(reason, optedOut))
	dl.Header.Set(events.HeaderOriginalSubject, m.Subject())
	dl.Header.Set(events.HeaderStreamSeq, strconv.FormatUint(seq, 10))
	if !placed.Stored.IsZero() {
		dl.Header.Set(events.HeaderStreamStored, placed.Stored.UTC().Format(time.RFC3339Nano))
	}
	if t := bodyToken(m.Data()); t != "" {
		dl.Header.Set(events.HeaderUserToken, t)
	}
	if optedOut {
		dl.Header.Set(events.HeaderOptedOut, "true")
		if seq != 0 {
			// Published again when the erase below fails and the event
			// comes back: stored once within the duplicate window.
			dl.Header.Set(jetstream.MsgIDHeader, "memoryd-opted-out:"+strconv.FormatUint(seq, 10))
		}
	} else if seq != 0 {
		// A publish whose acknowledgement was lost (NATS restarting) is
		// redelivered and published again: store it once.
		dl.Header.Set(jetstream.MsgIDHeader, "memoryd-dead-letter:"+strconv.FormatUint(seq, 10)+":"+placed.Stored.UTC().Format(time.RFC3339Nano))
	}
	pubCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	forgotten := false
	publish := func() error {
		_, err := w.js.PublishMsg(pubCtx, dl)
		if errors.Is(err, jetstream.ErrNoStreamResponse) {
			// No stream takes the dead-letter subject: deleted while
			// serve ran. Created again as a start would, or the event
			// comes back until the next restart.
			created, cerr := w.ensureDeadLetterStream(pubCtx)
			if cerr != nil {
				return errors.Join(err, cerr)
			}
			if created {
				w.logger.Warn("dead-letter stream gone; created it again", "stream", w.cfg.DeadLetterStream)
			}
			_, err = w.js.PublishMsg(pubCtx, dl)
		}
		return err
	}
	var err error
	if tokens := eventTokens(w.cfg.Prefix, m.Subject(), nil, m.Data()); len(tokens) == 0 {
		err = publish()
	} else {
		err = w.cfg.Store.InTx(pubCtx, func(_ pgx.Tx, q *store.Store) error {
			tombs, err := q.LockUsers(pubCtx, tokens)
			if err != nil {
				return err
			}
			for _, t := range tombs {
				forgotten = forgotten || t.Covers(placed)
			}
			if forgotten {
				return nil
			}
			return publish()
		})
	}
	if err != nil {
		// Later each time, up to 30 backoffs, as a batch that cannot be
		// recorded: a dead-letter stream that stays full (its store's
		// limit) costs a line every 30 s, not every second.
		delay := w.cfg.RetryBackoff
		if md, err := m.Metadata(); err == nil {
			delay *= time.Duration(min(max(md.NumDelivered, 1), 30))
		}
		w.logger.Error("ingest: cannot dead-letter invalid event; will redeliver", "stream_seq", seq, "stream", w.cfg.DeadLetterStream, "retry_in", delay, "error", err)
		_ = m.NakWithDelay(delay)
		return
	}
	if forgotten {
		// The forget's own deletes may have missed it: published on
		// another user's subject, and with no dead letter yet to lead
		// them to it. Its text goes now, or the event comes back.
		if retry, _ := w.eraseRejected(ctx, m, seq, "invalid event of a forgotten user"); !retry {
			_ = m.Term()
		}
		return
	}
	if optedOut {
		// Its text must not stay in the turn stream either; the dead
		// letter, stored first, holds none.
		retry, kept := w.eraseRejected(ctx, m, seq, "invalid opted-out event")
		if retry {
			return
		}
		if kept {
			w.optOutKept.Add(1)
		}
	}
	w.rejected.Add(1)
	w.cfg.Observer.TurnRejected(rejectReason(reason))
	w.logger.Warn("rejected invalid turn event", "stream_seq", seq, "subject", m.Subject(), "reason", reason.Error(), "opted_out", optedOut)
	_ = m.Term()
}
