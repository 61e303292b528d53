package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// A forget's tombstone lives in Postgres, so a database restored from a
// backup taken before the forget has the user's memory back and no
// tombstone, and the user's events, deleted from the stream, cannot tell
// anything. So each forget is also recorded in a JetStream key-value bucket
// beside the turn stream (ForgetsBucket), and a worker starting with
// ingest applies again every recorded forget its database does not know
// (reapplyForgets).

// ForgetsBucket is the name of the key-value bucket recording the forgets
// of the turn stream's users: one key a user, the latest forget.
func ForgetsBucket(stream string) string { return stream + "_FORGETS" }

// forgetRecord is a forget as the bucket keeps it: the user's token (no
// user id: a hashed token is as much as the tombstone keeps), when, and the
// stream position it covered.
type forgetRecord struct {
	Token       string    `json:"token"`
	ForgottenAt time.Time `json:"forgotten_at"`
	Seq         uint64    `json:"seq"`
	Stored      time.Time `json:"stored,omitzero"`
	SeqAlone    uint64    `json:"seq_alone,omitempty"`
	// Unfinished marks a forget whose memory is deleted but whose documents
	// or stream events may not be: written when the memory's transaction
	// commits, cleared when the forget is done. A forget cut short (the
	// process killed, or a failure nobody retried) is finished by the next
	// worker start (finishForgets).
	Unfinished bool `json:"unfinished,omitempty"`

	revision uint64    // the entry's, as read
	written  time.Time // when the entry was written (the NATS server's clock)
}

// forgetKey is a token's key in the bucket: key names allow fewer
// characters than subject tokens.
func forgetKey(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// recordTimeout bounds recordForget: a credential without the bucket's
// permission gets no answer at all (NATS reports the violation apart), and
// the forget's reply should not wait the client's default 5 s for it.
const recordTimeout = 2 * time.Second

// recordForget writes tomb's forget to the bucket, creating it when
// missing (an existing one keeps its operator's settings: replicas,
// placement).
func recordForget(ctx context.Context, js jetstream.JetStream, stream string, tomb store.Tombstone) error {
	_, err := putForget(ctx, js, stream, tomb, false, 0)
	return err
}

// turnReplicas is the turn stream's number of replicas, which the streams
// memoryd creates beside it (dead letters, the forgets bucket) take: an
// operator who made it replicated in a cluster (docs/operations.md) gets
// them replicated alike. 1 (JetStream's default) when it cannot be read:
// the create then fails or succeeds as before.
func turnReplicas(ctx context.Context, js jetstream.JetStream, stream string) int {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 1
	}
	return max(s.CachedInfo().Config.Replicas, 1)
}

// putForget writes tomb's forget to the bucket, marked unfinished or not,
// and returns the entry's revision. With over not 0, it writes only over
// that revision (the forget's own unfinished record): a record written
// since (a later forget of the user, recorded unfinished while this one's
// stream side ran) is left as it is, not replaced by this older one.
func putForget(ctx context.Context, js jetstream.JetStream, stream string, tomb store.Tombstone, unfinished bool, over uint64) (uint64, error) {
	rev, _, err := putForgetIn(ctx, js, nil, stream, tomb, unfinished, over)
	return rev, err
}

// putForgetIn is putForget with the bucket's handle: kv when not nil (a
// forget's first write looked it up), else looked up (a stream info
// request, which nats-server 2.11+ answers only after the API requests
// queued before it: beside other forgets' deletes it may take longer than
// recordTimeout, and the forget's last write, which needs no lookup, would
// leave its record unfinished). It returns the handle for the next write.
func putForgetIn(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, stream string, tomb store.Tombstone, unfinished bool, over uint64) (uint64, jetstream.KeyValue, error) {
	ctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	var err error
	if kv != nil {
		return putForgetRecord(ctx, kv, tomb, unfinished, over)
	}
	kv, err = js.KeyValue(ctx, ForgetsBucket(stream))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      ForgetsBucket(stream),
			Description: "memoryd: the forgets of " + stream + "'s users, applied again to a database restored from before them",
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    turnReplicas(ctx, js, stream),
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, ForgetsBucket(stream)) // created meanwhile
		}
	}
	if err != nil {
		return 0, nil, fmt.Errorf("forgets bucket: %w", err)
	}
	return putForgetRecord(ctx, kv, tomb, unfinished, over)
}

func putForgetRecord(ctx context.Context, kv jetstream.KeyValue, tomb store.Tombstone, unfinished bool, over uint64) (uint64, jetstream.KeyValue, error) {
	data, err := json.Marshal(forgetRecord{Token: tomb.UserToken, ForgottenAt: tomb.ForgottenAt, Seq: tomb.Through.Seq,
		Stored: tomb.Through.Stored, SeqAlone: tomb.SeqAlone, Unfinished: unfinished})
	if err != nil {
		return 0, kv, err
	}
	var rev uint64
	if over != 0 {
		rev, err = kv.Update(ctx, forgetKey(tomb.UserToken), data, over)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return 0, kv, nil // recorded since: a later forget, or this one marked finished by a start
		}
	} else {
		rev, err = kv.Put(ctx, forgetKey(tomb.UserToken), data)
	}
	if err != nil {
		return 0, kv, fmt.Errorf("forgets bucket: put: %w", err)
	}
	return rev, kv, nil
}

// readForgets returns every forget the bucket records (none when it does
// not exist).
func readForgets(ctx context.Context, js jetstream.JetStream, stream string) ([]forgetRecord, error) {
	// Within recordTimeout: a credential without the bucket's permission
	// gets no answer at all, and a start or a reconcile would otherwise
	// wait for its whole budget.
	lctx, cancel := context.WithTimeout(ctx, recordTimeout)
	kv, err := js.KeyValue(lctx, ForgetsBucket(stream))
	cancel()
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("forgets bucket: %w", err)
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("forgets bucket: %w", err)
	}
	defer func() { _ = w.Stop() }()
	var out []forgetRecord
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("forgets bucket: %w", ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("forgets bucket: watcher closed")
			}
			if e == nil { // every current entry delivered
				return out, nil
			}
			var r forgetRecord
			if err := json.Unmarshal(e.Value(), &r); err != nil || r.Token == "" {
				continue // not a record of ours: nothing to apply
			}
			r.revision, r.written = e.Revision(), e.Created()
			out = append(out, r)
		}
	}
}

// reapplyTimeout bounds reapplyForgets at start.
const reapplyTimeout = 5 * time.Minute

// reapplyForgets applies again each forget the bucket records that the
// database does not know (no tombstone of the user, or an older one): the
// database was restored from a backup taken before it, or is new beside an
// old stream. A user with nothing in the database needs nothing. A user
// the database holds memory of is forgotten again, covering the stream
// position the forget covered (events published since are the user's new
// memory), unless something of the user was written since the forget (a
// turn published after it and replayed into the restored database: the
// forgotten memory and the new are then mixed, and only the operator can
// tell them apart): that is logged as an error to act on. It returns how
// many forgets it applied; its errors are logged, never fatal: the
// service runs, as it did before.
func (w *Worker) reapplyForgets(ctx context.Context) int {
	return reapplyForgets(ctx, w.js, w.cfg.Store, w.cfg.Prefix, w.cfg.Stream, w.cfg.DeadLetterStream, w.logger)
}

// ReapplyForgets applies again the forgets recorded in NATS that the
// database does not know, as a worker does when it starts with ingest
// (see Worker.Start); replay runs it before it reads the stream, so that
// the turns it writes back are not taken for memory written after such a
// forget. The dead-letter stream is events.DeadLetterStream(stream). It
// returns how many forgets it applied; its errors are logged.
func ReapplyForgets(ctx context.Context, js jetstream.JetStream, s *store.Store, prefix, stream string, logger *slog.Logger) int {
	return reapplyForgets(ctx, js, s, prefix, stream, events.DeadLetterStream(stream), logger)
}

func reapplyForgets(ctx context.Context, js jetstream.JetStream, st *store.Store, prefix, stream, deadLetters string, logger *slog.Logger) int {
	ctx, cancel := context.WithTimeout(ctx, reapplyTimeout)
	defer cancel()
	recs, err := readForgets(ctx, js, stream)
	if err != nil {
		logger.Warn("cannot read the forgets recorded in NATS: a forget made after this database's backup would not be applied again", "error", err)
		return 0
	}
	if len(recs) == 0 {
		return 0
	}
	tokens := make([]string, len(recs))
	for i, r := range recs {
		tokens[i] = r.Token
	}
	known, err := st.Tombstones(ctx, tokens)
	if err != nil {
		logger.Warn("cannot compare the forgets recorded in NATS with the database's", "error", err)
		return 0
	}
	missing := map[string]forgetRecord{}
	var plain []string
	hashed := false
	// The forgets cut short are finished last: the forgets a restored
	// database does not know bring memory back, and come first within
	// reapplyTimeout.
	var unfinished []cutShort
	defer func() { finishForgets(ctx, js, st, stream, deadLetters, prefix, unfinished, logger) }()
	for _, r := range recs {
		if t, ok := known[r.Token]; ok && !t.ForgottenAt.Before(r.ForgottenAt) {
			if r.Unfinished {
				unfinished = append(unfinished, cutShort{r, t})
			}
			continue
		}
		missing[r.Token] = r
		if r.Token[0] == '~' {
			hashed = true
		} else {
			plain = append(plain, r.Token)
		}
	}
	if len(missing) == 0 {
		return 0
	}
	ids, err := st.UserIDsHolding(ctx, plain, hashed)
	if err != nil {
		logger.Warn("cannot find the users of forgets this database does not know", "forgets", len(missing), "error", err)
		return 0
	}
	applied := 0
	held := make(map[string]bool, len(ids))
	for _, id := range ids {
		held[events.UserToken(id)] = true
	}
	for token, r := range missing {
		if !held[token] && r.Unfinished {
			// Nothing of the user here (a database restored from before
			// the user's first turn, or a new one to replay the stream
			// into): the events the forget covered are still in the
			// streams, and a replay would bring the memory back.
			unfinished = append(unfinished, cutShort{r, recordTombstone(r)})
		}
	}
	for _, id := range ids {
		r, ok := missing[events.UserToken(id)]
		if !ok {
			continue
		}
		again := &reapplied{through: store.StreamPosition{Seq: r.Seq, Stored: r.Stored}, at: r.ForgottenAt}
		res, err := forget(ctx, js, st, prefix, stream, deadLetters, id, again, logger)
		switch {
		case errors.Is(err, store.ErrForgetKnown):
			continue // another process applied it meanwhile
		case errors.Is(err, store.ErrWrittenSince):
			logger.Error("the database holds memory of a user forgotten at a time it does not know of (restored from a backup taken before the forget), "+
				"and memory of that user written since: not forgotten again, since the new memory would go too; delete what predates the forget, or forget the user",
				"user_token", r.Token, "forgotten_at", r.ForgottenAt)
			continue
		}
		if err != nil {
			logger.Error("cannot apply a recorded forget again: the user's memory from before it is still here; run memoryd forget for the user",
				"user_token", r.Token, "forgotten_at", r.ForgottenAt, "error", err)
			continue
		}
		applied++
		if r.Unfinished {
			// Its streams are purged now: not again at the next start.
			if err := markFinished(ctx, js, stream, r); err != nil {
				logger.Warn("applied a forget again, but could not mark it finished: the next start reads the streams for it again",
					"user_token", r.Token, "error", err)
			}
		}
		logger.Warn("applied a forget again: the database did not know it (restored from a backup taken before it)",
			"user_token", r.Token, "forgotten_at", r.ForgottenAt, "facts", res.Facts, "context", res.Context, "turns", res.Turns,
			"documents", res.Documents)
	}
	return applied
}

// finishForget finishes a forget the bucket records as unfinished (its
// process stopped, or its documents or stream side failed, after the
// memory's transaction committed: the user's documents, and events in the
// turn and dead-letter streams, could be left, and no restart looked at
// them), with the database's tombstone tomb, which covers at least as
// much: the events first (a replay would bring the memory back from
// them), then the user's documents as they were at tomb's time
// (finishDocuments). It marks the record finished unless
// it changed meanwhile, and only when both parts are done.
//
// A forget still running in a process that lives (a CLI forget, or
// another serve's, while this one starts) holds the user's forget
// (forgetHold), and is left to it, as is one another start is finishing:
// the record, unfinished until its end, is read again at the next start
// or by the stale forgets' sweep should that process die first.
func finishForget(ctx context.Context, js jetstream.JetStream, st *store.Store, stream, deadLetters, prefix string, r forgetRecord,
	tomb store.Tombstone, logger *slog.Logger) {
	release, ok, err := st.Hold(ctx, forgetHold(r.Token), true)
	switch {
	case err != nil:
		// Unknown: finished all the same, as before holds (at worst beside
		// its own process, each counting what it deleted itself).
		logger.Warn("cannot tell whether a forget left unfinished is still running: finishing it", "user_token", r.Token, "error", err)
	case !ok:
		logger.Info("a forget recorded unfinished is running in a live process: left to it",
			"user_token", r.Token, "forgotten_at", r.ForgottenAt)
		return
	default:
		defer release()
	}
	fail := func(what string, err error) {
		logger.Error("cannot finish a forget cut short: the user's "+what+" are still here; run memoryd forget for the user",
			"user_token", r.Token, "forgotten_at", r.ForgottenAt, "error", err)
	}
	// The events first: left in the streams, a replay brings the memory
	// back. The documents can take long (a user may hold gigabytes), and
	// this start's budget (reapplyTimeout) would then be gone before the
	// events at every start.
	var n, dead, moved uint64
	eventsDone := func() bool {
		turns, err := js.Stream(ctx, stream)
		if err != nil {
			fail("events", err)
			return false
		}
		info, err := turns.Info(ctx)
		if err != nil {
			fail("events", err)
			return false
		}
		if n, err = purgeTurns(ctx, js, turns, userSubjects(prefix, r.Token), tomb, info.State.Msgs, logger); err != nil {
			fail("events", err)
			return false
		}
		if dead, moved, err = purgeDeadLetters(ctx, js, turns, deadLetters, prefix, r.Token, tomb, logger); err != nil {
			fail("events", err)
			return false
		}
		return true
	}()
	// The documents all the same. The record stays unfinished unless both
	// are done.
	docs, err := finishDocuments(ctx, st, r.Token, tomb.ForgottenAt)
	if err != nil {
		fail("documents", err)
		return
	}
	if !eventsDone {
		return
	}
	markErr := markFinished(ctx, js, stream, r)
	if markErr != nil {
		logger.Warn("finished a forget cut short, but could not mark it finished: the next start reads the streams for it again",
			"user_token", r.Token, "error", markErr)
	}
	if docs == 0 && n+moved == 0 && dead == 0 {
		// Nothing was left: another process finished it at the same start
		// (each reads the record; a walk restarting two serves at once got
		// this warning twice, one saying 0 events were "still here").
		if markErr == nil {
			logger.Info("marked a forget cut short finished: nothing of it was left",
				"user_token", r.Token, "forgotten_at", r.ForgottenAt)
		}
		return
	}
	logger.Warn("finished a forget cut short: its memory was deleted, its documents or events were still here",
		"user_token", r.Token, "forgotten_at", r.ForgottenAt, "documents", docs, "stream_events", n+moved, "dead_letters", dead)
}

// finishDocuments deletes the documents of the user whose token is token,
// as they were at the forget's time at (store.DeleteDocumentsBefore): what
// the user wrote after the forget stays. The bucket keeps tokens, not user
// ids: the user is the owner of collections of that time whose token it
// is. It returns the number of documents deleted.
func finishDocuments(ctx context.Context, st *store.Store, token string, at time.Time) (int64, error) {
	users := []string{token} // a plain token is the user's id
	if strings.HasPrefix(token, "~") {
		var err error
		if users, err = st.CollectionUsers(ctx, at); err != nil {
			return 0, err
		}
	}
	var n int64
	for _, u := range users {
		if events.UserToken(u) != token {
			continue
		}
		// Within this start's budget; what it deleted stays deleted, and
		// the next start goes on (store.DeleteDocumentsBefore).
		d, err := st.DeleteDocumentsBefore(ctx, u, at, indexDocumentJobs, chunkEmbedJobs)
		n += d
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// finishStaleForgets finishes the forgets the bucket has recorded as
// unfinished for longer than Config.StaleForgetAge (looking every third of
// it) that the database knows
// (finishForget, with the database's tombstone): their process died and
// none restarted (a replica scaled away), which left the user's documents
// searchable and events in the streams until an operator sent the forget
// again. A start finishes the others (reapplyForgets). Errors are logged;
// the next reconcile tries again.
//
// It runs in the reconcile, on the one-worker maintenance queue, with the
// job's timeout: it takes at most half of what the job has left (the
// rest of the reconcile, and the prune and embed sweep queued behind it,
// must still run), and the bucket must answer within recordTimeout (a
// credential without its permission gets no answer at all). A bucket it
// cannot read is warned of once every staleForgetWarnEvery.
func (w *Worker) finishStaleForgets(ctx context.Context) {
	// Every third of StaleForgetAge, not every reconcile: the bucket holds
	// a key for every user ever forgotten, read whole each time.
	now := time.Now().UnixNano()
	if last := w.staleForgetScanned.Load(); now-last < int64(w.cfg.StaleForgetAge/3) || !w.staleForgetScanned.CompareAndSwap(last, now) {
		return
	}
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Until(dl)/2)
		defer cancel()
	}
	recs, err := readForgets(ctx, w.js, w.cfg.Stream)
	if err != nil {
		now := time.Now().UnixNano()
		if last := w.staleForgetWarned.Load(); now-last >= int64(staleForgetWarnEvery) && w.staleForgetWarned.CompareAndSwap(last, now) {
			w.logger.Warn("cannot read the forgets recorded in NATS to finish those cut short (logged once an hour)",
				"bucket", ForgetsBucket(w.cfg.Stream), "error", err)
		}
		return
	}
	var stale []forgetRecord
	var tokens []string
	for _, r := range recs {
		// The age of the unfinished record, written as the forget's
		// memory transaction committed: not ForgottenAt, the time its
		// transaction began, which a forget waiting on locks leaves
		// behind.
		if r.Unfinished && time.Since(r.written) > w.cfg.StaleForgetAge {
			stale, tokens = append(stale, r), append(tokens, r.Token)
		}
	}
	if len(stale) == 0 {
		return
	}
	known, err := w.cfg.Store.Tombstones(ctx, tokens)
	if err != nil {
		w.logger.Warn("cannot read the tombstones of the forgets cut short", "error", err)
		return
	}
	var list []cutShort
	for _, r := range stale {
		if t, ok := known[r.Token]; ok && !t.ForgottenAt.Before(r.ForgottenAt) {
			list = append(list, cutShort{r, t})
		}
	}
	finishForgets(ctx, w.js, w.cfg.Store, w.cfg.Stream, w.cfg.DeadLetterStream, w.cfg.Prefix, list, w.logger)
}

// staleForgetWarnEvery is the shortest time between two warnings that
// finishStaleForgets cannot read the forgets bucket (every reconcile, every
// minute, tries).
const staleForgetWarnEvery = time.Hour

// cutShort is a forget the bucket records as unfinished, and the
// tombstone its stream side is finished with.
type cutShort struct {
	r    forgetRecord
	tomb store.Tombstone
}

// finishForgets finishes the forgets cut short, until ctx ends: then the
// next start finishes the rest.
func finishForgets(ctx context.Context, js jetstream.JetStream, st *store.Store, stream, deadLetters, prefix string, list []cutShort, logger *slog.Logger) {
	for i, c := range list {
		if ctx.Err() != nil {
			logger.Warn("forgets cut short not finished at this start: the next start finishes them",
				"forgets", len(list)-i, "error", ctx.Err())
			return
		}
		finishForget(ctx, js, st, stream, deadLetters, prefix, c.r, c.tomb, logger)
	}
}

// recordTombstone is the tombstone a record stands for: what its forget
// covered.
func recordTombstone(r forgetRecord) store.Tombstone {
	return store.Tombstone{UserToken: r.Token, Through: store.StreamPosition{Seq: r.Seq, Stored: r.Stored},
		SeqAlone: r.SeqAlone, ForgottenAt: r.ForgottenAt}
}

// markFinished rewrites r's record finished, unless the record changed
// since it was read (a forget of the user recorded meanwhile, or another
// process finished it).
func markFinished(ctx context.Context, js jetstream.JetStream, stream string, r forgetRecord) error {
	_, err := putForget(ctx, js, stream, recordTombstone(r), false, r.revision)
	return err
}
