package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// A forget is recorded in NATS, beside the turn stream, as its tombstone
// is in the database.
func TestForgetIsRecordedInNATS(t *testing.T) {
	e := setup(t)
	e.start(extractor.NewRules(), nil)
	e.publish(events.Turn{ID: "a1", UserID: "alice", UserMessage: "I live in Paris."})
	e.waitDone(1)
	if _, err := worker.Forget(e.ctx, e.js, e.store, e.prefix, e.stream, "alice"); err != nil {
		t.Fatal(err)
	}
	tombs, err := e.store.Tombstones(e.ctx, []string{"alice"})
	if err != nil || tombs["alice"].ForgottenAt.IsZero() {
		t.Fatalf("tombstone = %+v, %v", tombs, err)
	}
	rec := e.forgetRecord("alice")
	if rec.Token != "alice" || !rec.ForgottenAt.Equal(tombs["alice"].ForgottenAt) || rec.Seq != tombs["alice"].Through.Seq {
		t.Fatalf("recorded %+v; want the tombstone %+v", rec, tombs["alice"])
	}
}

// A database restored from a backup taken before a forget holds the user's
// memory again and no tombstone. A worker starting on it applies the forget
// recorded in NATS again: the user's memory goes, the other users' stays,
// and the user's events published after the forget are recorded. A user
// with memory written since the recorded forget is left, and logged.
func TestRestoredDatabaseForgetsAgain(t *testing.T) {
	e := setup(t)
	stop := e.start(extractor.NewRules(), nil)
	beforeCarol := time.Now()
	hashedUser := "dana@example.com" // not its own token
	for _, u := range []string{"alice", "bob", "carol", hashedUser} {
		e.publish(events.Turn{ID: u + "-1", UserID: u, UserMessage: "I live in Paris.", AssistantResponse: "Nice."})
		e.publish(events.Turn{ID: u + "-2", UserID: u, UserMessage: "My dog is called Rex.", AssistantResponse: "Good dog."})
	}
	e.waitDone(8)
	stop()

	// What forgets of alice, dana and carol made on the database before
	// it was restored left in NATS: carol's "before" her memory was written.
	at := e.streamEnd()
	for _, rec := range []struct {
		user string
		at   time.Time
	}{{"alice", time.Now()}, {hashedUser, time.Now()}, {"carol", beforeCarol}} {
		tomb := store.Tombstone{UserToken: events.UserToken(rec.user), Through: at, ForgottenAt: rec.at}
		if err := worker.RecordForget(e.ctx, e.js, e.stream, tomb); err != nil {
			t.Fatal(err)
		}
	}

	var logs lockedBuffer
	e.start(extractor.NewRules(), func(c *worker.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	for user, want := range map[string]int64{"alice": 0, hashedUser: 0, "bob": 2, "carol": 2} {
		if st := e.userStats(user); st.TurnsReceived != want || st.ContextItems != want {
			t.Errorf("%s after the start: %+v; want %d turns and items", user, st, want)
		}
	}
	tombs, err := e.store.Tombstones(e.ctx, []string{"alice", events.UserToken(hashedUser), "bob", "carol"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tombs["alice"]; !ok || tombs["alice"].Through.Seq != at.Seq || len(tombs) != 2 {
		t.Errorf("tombstones after the start: %+v; want alice's and dana's, covering sequence %d", tombs, at.Seq)
	}
	out := logs.String()
	if strings.Count(out, "applied a forget again") != 2 || !strings.Contains(out, "memory of that user written since") {
		t.Errorf("log:\n%s", out)
	}
	// alice comes back: her new turn is recorded (the forget covers only
	// what was published before it).
	e.publish(events.Turn{ID: "alice-3", UserID: "alice", UserMessage: "I live in Rome."})
	e.waitFor("alice's new turn", func() (bool, string) {
		st := e.userStats("alice")
		return st.TurnsProcessed == 1, fmt.Sprintf("alice %+v", st)
	})
}

// A user's write made on the restored database after the recorded forget
// keeps the forget from being applied again (the write would go with the
// rest), whatever it wrote: the check read only the turns received, the
// items inserted, the fact history and the documents put since, so a
// language set, a context.update, a store of a pair the user held (which
// makes it the user's own) and an import of facts or of a pair held went
// unseen, and the forget applied again deleted what the user wrote after
// it. A user who wrote nothing since is forgotten again, and so is one
// who only cleared: the forget deletes all a clear did.
func TestRestoredDatabaseKeepsEveryWriteSinceTheForget(t *testing.T) {
	e := setup(t)
	header := `{"type":"memoryd.export","version":1}` + "\n"
	importLines := func(user, lines string) error {
		_, err := e.store.Import(e.ctx, user, user, strings.NewReader(header+lines))
		return err
	}
	writes := map[string]func(user string, item store.ContextItem) error{
		"language": func(user string, _ store.ContextItem) error {
			_, err := e.store.SetLanguage(e.ctx, user, "french", "french")
			return err
		},
		"update": func(user string, item store.ContextItem) error {
			q := "What is my dog's name?"
			_, err := e.store.UpdateContext(e.ctx, store.ContextUpdate{UserID: user, ID: item.ID, Question: &q})
			return err
		},
		"recase": func(user string, item store.ContextItem) error {
			q := strings.ToUpper(item.Question)
			_, err := e.store.UpdateContext(e.ctx, store.ContextUpdate{UserID: user, ID: item.ID, Question: &q})
			return err
		},
		"clear": func(user string, item store.ContextItem) error {
			_, err := e.store.DeleteContext(e.ctx, store.ContextDelete{UserID: user, ID: item.ID})
			return err
		},
		"facts_clear": func(user string, _ store.ContextItem) error {
			_, err := e.store.DeleteFact(e.ctx, user, "pet")
			return err
		},
		"store_again": func(user string, item store.ContextItem) error {
			_, _, err := e.store.StoreContext(e.ctx, store.ContextWrite{UserID: user, Question: item.Question, Answer: item.Answer,
				Provenance: store.Provenance{Extractor: "direct"}})
			return err
		},
		"import_fact": func(user string, _ store.ContextItem) error {
			return importLines(user, `{"type":"fact","key":"pet","value":"Rex","source_at":"2026-11-01T10:00:00.000000Z","event_id":"x1",`+
				`"conversation_id":"","extractor":"llm","model":"m","prompt_version":"v3","updated_at":"2026-11-01T10:00:02.000000Z"}`)
		},
		"import_pair": func(user string, item store.ContextItem) error {
			line, err := json.Marshal(map[string]string{"type": "context", "question": item.Question, "answer": item.Answer,
				"created_at": "2026-11-01T10:00:00.000000Z", "event_id": "", "conversation_id": "", "scope": "",
				"extractor": "direct", "model": "", "prompt_version": ""})
			if err != nil {
				return err
			}
			return importLines(user, string(line))
		},
	}
	users := append(slices.Sorted(maps.Keys(writes)), "quiet")
	stop := e.start(extractor.NewRules(), nil)
	for _, u := range users {
		e.publish(events.Turn{ID: u + "-1", UserID: u, UserMessage: "My dog is called Rex.", AssistantResponse: "Good dog."})
	}
	e.waitDone(int64(len(users)))
	stop()

	// Each user's forget, made on the database before it was restored.
	at, forgotten := e.streamEnd(), time.Now()
	for _, u := range users {
		if err := worker.RecordForget(e.ctx, e.js, e.stream, store.Tombstone{UserToken: u, Through: at, ForgottenAt: forgotten}); err != nil {
			t.Fatal(err)
		}
	}
	// Then each user but quiet wrote on the restored database.
	for user, write := range writes {
		items, err := e.store.ListContext(e.ctx, user, store.ContextCursor{}, 10)
		if err != nil || len(items) != 1 {
			t.Fatalf("%s's items: %+v, %v; want the one", user, items, err)
		}
		if err := write(user, items[0]); err != nil {
			t.Fatalf("%s's write: %v", user, err)
		}
	}

	again := map[string]bool{"quiet": true, "clear": true, "facts_clear": true}
	if n := worker.ReapplyForgets(e.ctx, e.js, e.store, e.prefix, e.stream, slog.New(slog.DiscardHandler)); n != len(again) {
		t.Errorf("forgets applied again: %d, want %d (quiet's, clear's, facts_clear's)", n, len(again))
	}
	for _, u := range users {
		want := int64(1)
		if again[u] {
			want = 0
		}
		if st := e.userStats(u); st.TurnsReceived != want {
			t.Errorf("%s after the forgets were applied again: %+v; want %d turns", u, st, want)
		}
	}
}

// A recorded forget applied again keeps its record: rewritten with the
// time it was applied again, a later restore of a backup that knew the
// first forget (and holds what the user wrote after it) would take that
// memory for older than the forget and delete it.
func TestReappliedForgetKeepsItsRecord(t *testing.T) {
	e := setup(t)
	stop := e.start(extractor.NewRules(), nil)
	e.publish(events.Turn{ID: "a1", UserID: "alice", UserMessage: "I live in Paris."})
	e.waitDone(1)
	stop()
	forgotten := time.Now().UTC().Truncate(time.Microsecond) // after alice's memory, before the start
	tomb := store.Tombstone{UserToken: "alice", Through: e.streamEnd(), ForgottenAt: forgotten}
	if err := worker.RecordForget(e.ctx, e.js, e.stream, tomb); err != nil {
		t.Fatal(err)
	}
	e.start(extractor.NewRules(), nil)
	if st := e.userStats("alice"); st.TurnsReceived != 0 {
		t.Fatalf("alice after the start: %+v; want her forgotten again", st)
	}
	rec := e.forgetRecord("alice")
	if !rec.ForgottenAt.Equal(forgotten) {
		t.Fatalf("record after the forget was applied again: forgotten_at %s; want the first forget's %s", rec.ForgottenAt, forgotten)
	}
}

// A replay on a database restored from before a forget applies the
// recorded forget first: the turns the user published after the forget,
// which it reads back, are the user's only memory (before: the replayed
// turns were "memory written since", and the forgotten memory stayed
// beside them for good).
func TestReplayOnARestoredDatabaseForgetsFirst(t *testing.T) {
	e := setup(t)
	stop := e.start(extractor.NewRules(), nil)
	e.publish(events.Turn{ID: "old", UserID: "alice", UserMessage: "My dog is called Rex.", AssistantResponse: "Good dog."})
	e.waitDone(1)
	stop()
	// The forget made on the database before the restore left its record
	// (and purged the old event: here the tombstone it writes covers it).
	at := e.streamEnd()
	if err := worker.RecordForget(e.ctx, e.js, e.stream, store.Tombstone{UserToken: "alice", Through: at, ForgottenAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// alice came back after the forget.
	e.publish(events.Turn{ID: "new", UserID: "alice", UserMessage: "I live in Rome.", AssistantResponse: "Lovely."})

	if n := worker.ReapplyForgets(e.ctx, e.js, e.store, e.prefix, e.stream, slog.New(slog.DiscardHandler)); n != 1 {
		t.Fatalf("forgets applied again: %d, want 1", n)
	}
	e.replayOnly(worker.ReplayConfig{})
	e.start(extractor.NewRules(), nil)
	e.waitFor("alice's new turn", func() (bool, string) {
		st := e.userStats("alice")
		return st.TurnsProcessed == 1 && st.TurnsPending == 0, fmt.Sprintf("alice %+v", st)
	})
	if _, err := e.store.GetTurn(e.ctx, "alice", "old"); err == nil {
		t.Errorf("the forgotten turn is back")
	}
	if st := e.userStats("alice"); st.TurnsReceived != 1 || st.ContextItems != 1 {
		t.Errorf("alice after the replay: %+v; want the new turn alone", st)
	}
}

// streamEnd is where the turn stream stands now: the position a forget
// made now covers.
func (e *env) streamEnd() store.StreamPosition {
	e.t.Helper()
	stream, err := e.js.Stream(e.ctx, e.stream)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := stream.Info(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return store.StreamPosition{Seq: info.State.LastSeq, Stored: info.State.LastTime}
}

// recordJSON is a forget record as the bucket holds it.
type recordJSON struct {
	Token       string    `json:"token"`
	ForgottenAt time.Time `json:"forgotten_at"`
	Seq         uint64    `json:"seq"`
	Unfinished  bool      `json:"unfinished"`
}

// forgetRecord reads the bucket's record of token's forget.
func (e *env) forgetRecord(token string) recordJSON {
	e.t.Helper()
	kv, err := e.js.KeyValue(e.ctx, worker.ForgetsBucket(e.stream))
	if err != nil {
		e.t.Fatal(err)
	}
	entry, err := kv.Get(e.ctx, worker.ForgetKey(token))
	if err != nil {
		e.t.Fatal(err)
	}
	var rec recordJSON
	if err := json.Unmarshal(entry.Value(), &rec); err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// A forget whose memory's transaction committed but whose stream side did
// not finish (its process stopped: here its shutdown, at once) is recorded
// as unfinished, and the next worker start purges the user's events from
// the stream, and only the user's (a walk: a serve killed during a forget
// left 16,521 of a user's events in the stream, and no restart looked).
func TestForgetCutShortIsFinishedAtStart(t *testing.T) {
	e := forgetCutShort(t)
	if n := e.subjectMsgs(e.stream, e.prefix+".turns.alice"); n != 2 {
		t.Fatalf("alice's events after the cut forget: %d; want her 2 still there (else this test shows nothing)", n)
	}
	if !e.forgetRecord("alice").Unfinished {
		t.Fatal("the cut forget is not recorded as unfinished")
	}

	if docs := e.docsOf("alice"); len(docs) != 2 {
		t.Fatalf("alice's documents after the cut forget: %q; want her 2 still there (else this test shows nothing)", docs)
	}
	// Written after the forget: they stay.
	e.putDoc("alice", "notes", "later")
	e.putDoc("alice", "fresh", "x")

	var logs lockedBuffer
	e.start(extractor.NewRules(), func(c *worker.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	if n := e.subjectMsgs(e.stream, e.prefix+".turns.alice"); n != 0 {
		t.Errorf("alice's events after a start: %d; want none", n)
	}
	e.checkOnlyAlicePurged()
	if !strings.Contains(logs.String(), "finished a forget cut short") {
		t.Errorf("log:\n%s", logs.String())
	}
	if st := e.userStats("bob"); st.ContextItems != 2 {
		t.Errorf("bob after the start: %+v", st)
	}
	// Her documents of before the forget are gone (before: all left, the
	// record marked finished), those put after it stay, and bob's.
	if got, want := e.docsOf("alice"), []string{"fresh/x", "notes/later"}; !slices.Equal(got, want) {
		t.Errorf("alice's documents after a start: %q; want %q", got, want)
	}
	if got, want := e.docsOf("bob"), []string{"notes/a"}; !slices.Equal(got, want) {
		t.Errorf("bob's documents after a start: %q; want %q", got, want)
	}

	// Another process reading the record before the first marked it
	// finished (two serves started together) finds nothing left: it says
	// so at info, not that events or documents were still here.
	rec := e.forgetRecord("alice")
	rec.Unfinished = true
	kv, err := e.js.KeyValue(e.ctx, worker.ForgetsBucket(e.stream))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(e.ctx, worker.ForgetKey("alice"), b); err != nil {
		t.Fatal(err)
	}
	var logs2 lockedBuffer
	e.start(extractor.NewRules(), func(c *worker.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs2, nil)) })
	if !strings.Contains(logs2.String(), "marked a forget cut short finished: nothing of it was left") || strings.Contains(logs2.String(), "finished a forget cut short:") {
		t.Errorf("a second start finding nothing of the forget left logged:\n%s", logs2.String())
	}
	if e.forgetRecord("alice").Unfinished {
		t.Error("the record is still unfinished after the second start")
	}
}

// A forget cut short of a user whose id is not its token (a hashed one):
// the documents are found by the owners' tokens.
func TestForgetCutShortFinishesTheDocumentsOfAHashedUser(t *testing.T) {
	e := setup(t)
	const carol = "Carol Smith <carol@example.com>"
	e.putDoc(carol, "notes", "a")
	e.putDoc("bob", "notes", "a")
	stop := e.start(extractor.NewRules(), nil)
	e.publish(events.Turn{ID: "c-1", UserID: carol, UserMessage: "I live in Paris."})
	e.waitDone(1)
	stop()
	e.cutForget(carol)
	if docs := e.docsOf(carol); len(docs) != 1 {
		t.Fatalf("carol's documents after the cut forget: %q; want hers still there", docs)
	}
	e.start(extractor.NewRules(), nil)
	if docs := e.docsOf(carol); len(docs) != 0 {
		t.Errorf("carol's documents after a start: %q; want none", docs)
	}
	if got := e.docsOf("bob"); !slices.Equal(got, []string{"notes/a"}) {
		t.Errorf("bob's documents after a start: %q", got)
	}
	if e.forgetRecord(events.UserToken(carol)).Unfinished {
		t.Error("the finished forget is still recorded as unfinished")
	}
}

// A forget cut short, and then a database that does not know it and holds
// nothing of the user (restored from before the user's first turn, or a
// new one that a replay of the stream is to fill): the events the forget
// covered are purged at start all the same. Before, only a forget the
// database knew was finished, and the replay that follows such a start
// brought the forgotten user's memory back from the events left.
func TestForgetCutShortIsFinishedForADatabaseThatDoesNotKnowIt(t *testing.T) {
	e := forgetCutShort(t)
	if !e.forgetRecord("alice").Unfinished {
		t.Fatal("the cut forget is not recorded as unfinished")
	}
	// The database does not know the forget: as one restored from before
	// alice's first turn.
	if _, err := e.store.Pool().Exec(e.ctx, `DELETE FROM tombstones`); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	e.start(extractor.NewRules(), func(c *worker.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	if n := e.subjectMsgs(e.stream, e.prefix+".turns.alice"); n != 0 {
		t.Errorf("alice's events after a start: %d; want none (a replay would bring her memory back)", n)
	}
	e.checkOnlyAlicePurged()
}

// forgetCutShort publishes two turns each of alice and bob, and forgets
// alice with her process stopping (its stop already ended): the memory's
// transaction commits, the rest does not run.
func forgetCutShort(t *testing.T) *env {
	e := setup(t)
	stop := e.start(extractor.NewRules(), nil)
	for _, u := range []string{"alice", "bob"} {
		e.publish(events.Turn{ID: u + "-1", UserID: u, UserMessage: "I live in Paris."})
		e.publish(events.Turn{ID: u + "-2", UserID: u, UserMessage: "My dog is called Rex."})
	}
	e.waitDone(4)
	stop()
	for _, u := range []string{"alice", "bob"} {
		e.putDoc(u, "notes", "a")
	}
	e.putDoc("alice", "notes", "b")
	e.cutForget("alice")
	return e
}

// cutForget forgets user with its process stopping right after the
// memory's transaction: the documents and the events are left.
func (e *env) cutForget(user string) {
	e.t.Helper()
	stopped, cancel := context.WithCancel(e.ctx)
	cancel()
	_, err := worker.Forget(worker.WithStop(e.ctx, stopped), e.js, e.store, e.prefix, e.stream, user)
	var inc *worker.IncompleteError
	if !errors.As(err, &inc) {
		e.t.Fatalf("forget with its process stopping: %v; want an *IncompleteError", err)
	}
}

// putDoc puts a short document in user's collection.
func (e *env) putDoc(user, collection, docID string) {
	e.t.Helper()
	if _, err := e.store.PutDocument(e.ctx, store.DocumentPut{Owner: store.Owner{User: user}, Collection: collection, DocID: docID,
		Content: "# " + docID + "\n\nThe herons of " + collection + " nest by the lake.", Chunk: enricher.ChunkDocument}); err != nil {
		e.t.Fatal(err)
	}
}

// docsOf lists user's documents as "collection/doc", sorted.
func (e *env) docsOf(user string) []string {
	e.t.Helper()
	rows, err := e.store.Pool().Query(e.ctx, `SELECT c.name || '/' || d.doc_id FROM documents d JOIN collections c ON c.id = d.collection_id
		WHERE c.owner_kind = 'user' AND c.owner = $1 ORDER BY 1`, user)
	if err != nil {
		e.t.Fatal(err)
	}
	docs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		e.t.Fatal(err)
	}
	return docs
}

// checkOnlyAlicePurged checks, after a start finished alice's forget, that
// bob's events stayed and alice's record is marked finished.
func (e *env) checkOnlyAlicePurged() {
	e.t.Helper()
	if n := e.subjectMsgs(e.stream, e.prefix+".turns.bob"); n != 2 {
		e.t.Errorf("bob's events after a start: %d; want his 2", n)
	}
	if e.forgetRecord("alice").Unfinished {
		e.t.Error("the finished forget is still recorded as unfinished")
	}
}

// A forget cut short whose documents cannot be deleted within the start's
// budget (here a transaction holding one of them; a user with gigabytes
// of documents does it too) has its events purged all the same, and its
// documents at a later start: the record stays unfinished until then.
// Before, the documents came first and used up the budget, the purge then
// failed on the expired context at every start, and a replay brought the
// forgotten memory back from the events left in the stream.
func TestForgetCutShortPurgesTheEventsWhenItsDocumentsTakeTheBudget(t *testing.T) {
	e := forgetCutShort(t)
	tx, err := e.store.Pool().Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(e.ctx)
	if _, err := tx.Exec(e.ctx, `SELECT 1 FROM documents d JOIN collections c ON c.id = d.collection_id
		WHERE c.owner_kind = 'user' AND c.owner = 'alice' FOR UPDATE OF d`); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	worker.ReapplyForgets(ctx, e.js, e.store, e.prefix, e.stream, logger)
	cancel()
	if n := e.subjectMsgs(e.stream, e.prefix+".turns.alice"); n != 0 {
		t.Errorf("alice's events after a start whose budget her documents used up: %d; want none (a replay would bring her memory back)\n%s", n, logs.String())
	}
	if !e.forgetRecord("alice").Unfinished {
		t.Error("the forget is recorded as finished, its documents left")
	}
	if err := tx.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	worker.ReapplyForgets(e.ctx, e.js, e.store, e.prefix, e.stream, logger)
	if docs := e.docsOf("alice"); len(docs) != 0 {
		t.Errorf("alice's documents after the next start: %q; want none", docs)
	}
	if e.forgetRecord("alice").Unfinished {
		t.Error("the finished forget is still recorded as unfinished")
	}
	e.checkOnlyAlicePurged()
}

// A forget cut short while workers keep running and none of them starts
// again (its process killed, the replica scaled away): the reconcile of a
// running worker finishes it once it has been unfinished for
// StaleForgetAge. Before, the user's documents stayed searchable and the
// events in the streams until a start, or the forget sent again (a walk:
// 2,064 documents left beside the surviving serve).
func TestForgetCutShortIsFinishedByARunningWorker(t *testing.T) {
	e := setup(t)
	e.start(extractor.NewRules(), func(c *worker.Config) {
		c.ReconcileInterval = time.Second
		c.StaleForgetAge = time.Nanosecond
	})
	for _, u := range []string{"alice", "bob"} {
		e.publish(events.Turn{ID: u + "-1", UserID: u, UserMessage: "I live in Paris."})
		e.putDoc(u, "notes", "a")
	}
	e.waitDone(2)
	e.cutForget("alice")
	e.waitFor("alice's forget to be finished by a running worker", func() (bool, string) {
		rec := e.forgetRecord("alice")
		docs := e.docsOf("alice")
		n := e.subjectMsgs(e.stream, e.prefix+".turns.alice")
		return !rec.Unfinished && len(docs) == 0 && n == 0, fmt.Sprintf("unfinished %v, documents %q, events %d", rec.Unfinished, docs, n)
	})
	if got := e.docsOf("bob"); !slices.Equal(got, []string{"notes/a"}) {
		t.Errorf("bob's documents: %q", got)
	}
	if n := e.subjectMsgs(e.stream, e.prefix+".turns.bob"); n != 1 {
		t.Errorf("bob's events: %d; want his 1", n)
	}
}

// A clear's time is when it takes effect, not when it was written: an
// import's clear of a fact keeps the exporting memoryd's time (its clock
// ahead, or a clear dated by a fact from a device ahead), which may lie
// after a forget made later. A database restored from a backup taken
// between the import and the forget counted that clear as the user's
// write since the forget (userWrittenSince read fact_direct_clears'
// cleared_at), and the forget was not applied again: the forgotten
// memory came back for good.
func TestRestoredDatabaseForgetsAgainPastAClearDatedAhead(t *testing.T) {
	e := setup(t)
	stop := e.start(extractor.NewRules(), nil)
	e.publish(events.Turn{ID: "dana-1", UserID: "dana", UserMessage: "My dog is called Rex.", AssistantResponse: "Good dog."})
	e.waitDone(1)
	stop()
	ahead := time.Now().Add(4 * time.Minute).UTC().Format("2006-01-02T15:04:05.000000Z")
	if _, err := e.store.Import(e.ctx, "dana", "dana", strings.NewReader(`{"type":"memoryd.export","version":1}`+"\n"+
		`{"type":"fact_direct_clear","key":"cat","cleared_at":"`+ahead+`"}`+"\n")); err != nil {
		t.Fatal(err)
	}
	// dana's forget, made after the import on the database before it was
	// restored; she wrote nothing since.
	if err := worker.RecordForget(e.ctx, e.js, e.stream, store.Tombstone{UserToken: "dana", Through: e.streamEnd(), ForgottenAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if n := worker.ReapplyForgets(e.ctx, e.js, e.store, e.prefix, e.stream, slog.New(slog.DiscardHandler)); n != 1 {
		t.Errorf("forgets applied again: %d, want 1 (dana wrote nothing since hers)", n)
	}
	if st := e.userStats("dana"); st.TurnsReceived != 0 {
		t.Errorf("dana after her forget was applied again: %+v; want her memory gone", st)
	}
}
