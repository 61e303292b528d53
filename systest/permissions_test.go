package systest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/internal/app"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// permMarker introduces a NATS permissions block in the docs: the fenced
// code block right after a line "<!-- nats-permissions: frontend -->" (the
// permissions of a frontend serving alice, NATS user alice_frontend) or
// "<!-- nats-permissions: memoryd -->" (memoryd's own); or, after
// "<!-- nats-accounts -->", the accounts of a nats-server configuration
// with placeholders for those users (permAccounts).
var permMarker = regexp.MustCompile(`^<!--\s*nats-(?:permissions:\s*(frontend|memoryd)|(accounts))\s*-->\s*$`)

// permBlockLike finds text that looks like a permissions block, so that no
// unmarked, untested one can appear in the docs.
var permBlockLike = regexp.MustCompile(`permissions\s*:\s*\{`)

type permBlock struct {
	file string // relative to the repository root
	line int    // of the opening fence
	kind string // "frontend", "memoryd" or "accounts"
	text string // the block's content, exactly as written
}

// permDocBlocks reads every marked permissions block of README.md and
// docs/*.md and fails on a block that looks like permissions but carries no
// marker.
func permDocBlocks(t *testing.T) []permBlock {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "README.md"))
	var blocks []permBlock
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel("..", path)
		lines := strings.Split(string(data), "\n")
		kind := ""
		for i := 0; i < len(lines); i++ {
			if m := permMarker.FindStringSubmatch(lines[i]); m != nil {
				kind = m[1] + m[2]
				continue
			}
			if !strings.HasPrefix(lines[i], "```") {
				if strings.TrimSpace(lines[i]) != "" {
					kind = ""
				}
				continue
			}
			start := i
			var body []string
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				body = append(body, lines[i])
			}
			text := strings.Join(body, "\n") + "\n"
			switch {
			case kind != "":
				blocks = append(blocks, permBlock{file: name, line: start + 1, kind: kind, text: text})
			case permBlockLike.MatchString(text):
				t.Errorf("%s:%d: a NATS permissions block without a <!-- nats-permissions: frontend|memoryd --> marker; mark it so that this test checks it", name, start+1)
			}
			kind = ""
		}
	}
	return blocks
}

// TestDocumentedPermissionsIsolateFrontends starts a nats-server with each
// documented frontend permissions block as written, for alice's frontend and
// (alice replaced by bob) bob's, and memoryd's documented block, runs
// memoryd's worker and service with them, and shows that alice's frontend
// works while bob's can neither publish to alice's subjects nor receive any
// byte of alice's replies, turns or dead letters.
func TestDocumentedPermissionsIsolateFrontends(t *testing.T) {
	t.Parallel()
	blocks := permDocBlocks(t)
	var memoryd []permBlock
	frontendFiles := map[string]bool{}
	for _, b := range blocks {
		if b.kind == "memoryd" {
			memoryd = append(memoryd, b)
		} else {
			frontendFiles[b.file] = true
		}
	}
	for _, want := range []string{"docs/protocol.md", "docs/operations.md"} {
		if !frontendFiles[want] {
			t.Errorf("%s has no marked frontend permissions block", want)
		}
	}
	if len(memoryd) == 0 {
		t.Fatal("the docs have no marked memoryd permissions block")
	}
	for _, fe := range blocks {
		if fe.kind != "frontend" {
			continue
		}
		for _, md := range memoryd {
			t.Run(fmt.Sprintf("%s:%d+%s:%d", fe.file, fe.line, md.file, md.line), func(t *testing.T) {
				// Each its own nats-server, schema and app.
				t.Parallel()
				light(t)
				permCheck(t, md.text, fe.text)
			})
		}
	}
}

// permInbox is the reply prefix a frontend block lets its user subscribe to:
// the frontend connects with it, as the docs tell frontend authors.
var permInbox = regexp.MustCompile(`"(_INBOX[A-Za-z0-9_-]*)\.>"`)

// permErrors records a connection's permission violations.
type permErrors struct {
	mu   sync.Mutex
	errs []string
}

func (p *permErrors) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, err.Error())
}

func (p *permErrors) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.errs)
}

// has reports whether the server refused op ("Publish" or "Subscription")
// on subject.
func (p *permErrors) has(op, subject string) bool {
	want := fmt.Sprintf("Permissions Violation for %s to %q", op, subject)
	for _, e := range p.all() {
		if strings.Contains(e, want) {
			return true
		}
	}
	return false
}

// waitRefused fails the test unless the server refuses op on every subject
// within a generous bound.
func (p *permErrors) waitRefused(t *testing.T, op string, subjects []string) {
	t.Helper()
	var missing []string
	ok, _ := eventstest.Poll(10*time.Second, func() (bool, string) {
		missing = missing[:0]
		for _, subj := range subjects {
			if !p.has(op, subj) {
				missing = append(missing, subj)
			}
		}
		return len(missing) == 0, ""
	})
	if !ok {
		t.Errorf("the server did not refuse bob's frontend %s on %q", strings.ToLower(op), missing)
	}
}

// permWait polls cond until it holds or a generous bound passes.
func permWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventstest.Eventually(t, what, 30*time.Second, func() (bool, string) { return cond(), "" })
}

func permCheck(t *testing.T, memorydBlock, frontendBlock string) {
	if !strings.Contains(frontendBlock, "alice") {
		t.Fatalf("the frontend block does not mention alice, so it cannot be made bob's:\n%s", frontendBlock)
	}
	bobBlock := strings.ReplaceAll(frontendBlock, "alice", "bob")
	inboxOf := func(block string) string {
		m := permInbox.FindStringSubmatch(block)
		if m == nil {
			t.Fatalf("the frontend block grants no inbox (\"_INBOX….>\"):\n%s", block)
		}
		return m[1]
	}
	aliceInbox, bobInbox := inboxOf(frontendBlock), inboxOf(bobBlock)
	if aliceInbox == bobInbox {
		t.Errorf("alice's and bob's frontends share the reply prefix %q: each must have its own", aliceInbox)
	}

	dir := t.TempDir()
	conf := permConf(t, dir, memorydBlock, permUser{"alice_frontend", "alice-pw", frontendBlock}, permUser{"bob_frontend", "bob-pw", bobBlock})
	url := permStartNATS(t, dir, conf)

	// memoryd: the worker (ingest, dead letters, extraction) and the service.
	ctx := context.Background()
	mdErrs := &permErrors{}
	md, err := nats.Connect(url, nats.UserInfo("memoryd", "memoryd-pw"), nats.ErrorHandler(mdErrs.handler))
	if err != nil {
		t.Fatalf("memoryd cannot connect with its documented permissions: %v", err)
	}
	t.Cleanup(md.Close)
	// A migrated schema of the pool: the permissions tested are NATS's,
	// and the migrations touch no subject.
	dbURL := storetest.Migrated(t)
	svc, err := app.New(app.Config{Conn: md, Store: store.Config{URL: dbURL}, Logger: slog.New(slog.DiscardHandler),
		Worker: worker.Config{Workers: 2, FetchPollInterval: 50 * time.Millisecond}, Enricher: enricher.Config{Timeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatalf("memoryd cannot start with its documented permissions: %v (violations %q)", err, mdErrs.all())
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	st, err := svc.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A forget with memoryd's credential is recorded in NATS, where a serve
	// on a restored database finds it (before the permission: a warning
	// at each forget, the record missing).
	mdjs, err := jetstream.New(md)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := worker.Forget(ctx, mdjs, st, "", "", "zed"); err != nil {
		t.Fatal(err)
	}
	if kv, err := mdjs.KeyValue(ctx, worker.ForgetsBucket(events.DefaultStream)); err != nil {
		t.Errorf("the forgets bucket with memoryd's documented permissions: %v (violations %q)", err, mdErrs.all())
	} else {
		sum := sha256.Sum256([]byte("zed"))
		if _, err := kv.Get(ctx, hex.EncodeToString(sum[:])); err != nil {
			t.Errorf("a forget with memoryd's documented permissions is not recorded: %v (violations %q)", err, mdErrs.all())
		}
	}

	// bob's frontend listens wherever it can before alice does anything.
	bobErrs := &permErrors{}
	bob, err := nats.Connect(url, nats.UserInfo("bob_frontend", "bob-pw"), nats.CustomInboxPrefix(bobInbox),
		nats.ErrorHandler(bobErrs.handler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bob.Close)
	eavesdrop := []string{">", "_INBOX.>", aliceInbox + ".>", "memory.>", "memory.*.alice", "memory.turns.alice",
		"memory.enrich.alice", "memory.facts.>", "memory.deadletter.>", "memory.deadletter.alice", "$JS.>", "$JS.API.>", "$SRV.>",
		"memory.changes.alice", "memory.changes.>", "memory.changes.*"}
	var spies []*nats.Subscription
	for _, subj := range slices.Compact(slices.Sorted(slices.Values(slices.Concat(eavesdrop, []string{bobInbox + ".>"})))) {
		sub, err := bob.SubscribeSync(subj)
		if err != nil {
			t.Fatal(err)
		}
		spies = append(spies, sub)
	}
	if err := bob.Flush(); err != nil {
		t.Fatal(err)
	}

	// alice's frontend: turns, a dead letter, and every request its block
	// allows; its replies carry the marker.
	const marker = "tealmarker7f3a"
	aliceErrs := &permErrors{}
	// The Go client's way, when the block grants a frontend inbox.
	inboxOpt := nats.CustomInboxPrefix(aliceInbox)
	if name, ok := strings.CutPrefix(aliceInbox, "_INBOX_"); ok {
		inboxOpt = events.FrontendInbox(name)
	}
	// The handler before the inbox option, as FrontendInbox's doc says, so
	// that its violations are kept (TrackViolations) and passed on.
	alice, err := nats.Connect(url, nats.UserInfo("alice_frontend", "alice-pw"), nats.ErrorHandler(aliceErrs.handler), inboxOpt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(alice.Close)
	// alice's frontend follows alice's memory changes (issue 20 item 4).
	aliceChanges, err := alice.SubscribeSync("memory.changes.alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.Flush(); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(alice)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Now().UTC().Add(-time.Minute)
	if _, err := events.NewPublisher(js, "").Publish(ctx, events.Turn{ID: "a1", UserID: "alice",
		UserMessage: "My favorite color is " + marker + ".", AssistantResponse: "Noted, " + marker + ".", Timestamp: ts}); err != nil {
		t.Fatalf("alice's frontend cannot publish alice's turn: %v (violations %q)", err, aliceErrs.all())
	}
	// An invalid event: memoryd dead-letters it to memory.deadletter.alice.
	if _, err := js.Publish(ctx, "memory.turns.alice", []byte(`{"id":"a-bad","user_id":"alice","note":"`+marker+`"}`)); err != nil {
		t.Fatalf("alice's frontend cannot publish to alice's turn subject: %v", err)
	}
	permWait(t, "alice's turn to be processed", func() bool {
		s, err := st.Stats(ctx, "alice")
		return err == nil && s.TurnsProcessed == 1
	})
	mdJS, err := jetstream.New(md)
	if err != nil {
		t.Fatal(err)
	}
	permWait(t, "alice's invalid event to be dead-lettered", func() bool {
		s, err := mdJS.Stream(ctx, events.DefaultDeadLetterStream)
		if err != nil {
			return false
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(events.DeadLetterSubject(events.DefaultPrefix, "alice")))
		return err == nil && info.State.Msgs == 1
	})

	client := events.NewClient(alice, "")
	reply, err := client.Enrich(ctx, events.EnrichRequest{UserID: "alice", Message: "what is my favorite color " + marker})
	if err != nil || reply.Degraded || !strings.Contains(reply.Injection, marker) {
		t.Fatalf("alice's enrich = %+v, %v (violations %q)", reply, err, aliceErrs.all())
	}
	for _, r := range []struct{ subject, body, want string }{
		{"memory.facts.set.alice", `{"user_id":"alice","key":"color","value":"` + marker + `"}`, `"ok":true`},
		{"memory.facts.get.alice", `{"user_id":"alice","key":"color"}`, marker},
		{"memory.facts.list.alice", `{"user_id":"alice"}`, marker},
		{"memory.facts.history.alice", `{"user_id":"alice","key":"color"}`, marker},
		{"memory.store.alice", `{"user_id":"alice","question":"dog ` + marker + `","answer":"Rex"}`, `"stored":true`},
		{"memory.search.alice", `{"user_id":"alice","query":"` + marker + `"}`, marker},
		{"memory.stats.alice", `{"user_id":"alice"}`, `"turns_processed":1`},
		{"memory.clear.alice", `{"user_id":"alice","question":"dog ` + marker + `"}`, `"deleted":1`},
		{"memory.export.alice", `{"user_id":"alice"}`, marker},
		{"memory.import.alice", `{"user_id":"alice","lines":[` + events.ExportHeader + `]}`, `"imported"`},
		// Knowledge bases (issue 19): alice's own collections.
		{"memory.docs.put.alice", `{"user_id":"alice","collection":"notes","doc_id":"a","content":"the ` + marker + ` handbook"}`, `"searchable":true`},
		{"memory.docs.list.alice", `{"user_id":"alice","collection":"notes"}`, `"doc_id":"a"`},
		{"memory.docs.search.alice", `{"user_id":"alice","query":"` + marker + `"}`, marker},
		{"memory.docs.defaults.alice", `{"user_id":"alice","collections":["notes"]}`, `"collections":["notes"]`},
		{"memory.language.alice", `{"user_id":"alice","language":"en"}`, `"config":"english"`},
	} {
		msg, err := alice.Request(r.subject, []byte(r.body), 5*time.Second)
		if err != nil {
			if aliceErrs.has("Publish", r.subject) {
				// Every endpoint the docs offer a frontend is in the block.
				t.Errorf("the block does not grant alice's frontend %s", r.subject)
				continue
			}
			t.Fatalf("alice's request on %s: %v (violations %q)", r.subject, err, aliceErrs.all())
		}
		if !strings.Contains(string(msg.Data), r.want) {
			t.Fatalf("alice's request on %s answered %s (headers %v), want %s", r.subject, msg.Data, msg.Header, r.want)
		}
	}

	// The facts.set above reached alice's frontend as a change.
	permWait(t, "alice's frontend to receive the change of her fact", func() bool {
		m, err := aliceChanges.NextMsg(100 * time.Millisecond)
		if err != nil && aliceErrs.has("Subscription", "memory.changes.alice") {
			t.Fatalf("the block does not let alice's frontend subscribe to memory.changes.alice: %q", aliceErrs.all())
		}
		return err == nil && strings.Contains(string(m.Data), `"value":"`+marker+`"`)
	})

	// bob's frontend writes to alice's subjects and to the JetStream API.
	before, err := st.Stats(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	beforeFacts, err := st.Facts(ctx, "alice", 1000)
	if err != nil {
		t.Fatal(err)
	}
	forged := []struct{ subject, body string }{
		{"memory.turns.alice", `{"id":"b-forged","user_id":"alice","user_message":"I am bob","timestamp":"2026-11-21T10:00:00Z"}`},
		{"memory.enrich.alice", `{"user_id":"alice","message":"color"}`},
		{"memory.facts.set.alice", `{"user_id":"alice","key":"color","value":"set-by-bob"}`},
		{"memory.facts.list.alice", `{"user_id":"alice"}`},
		{"memory.facts.history.alice", `{"user_id":"alice","key":"color"}`},
		{"memory.search.alice", `{"user_id":"alice","query":"color"}`},
		{"memory.store.alice", `{"user_id":"alice","question":"set by bob"}`},
		{"memory.clear.alice", `{"user_id":"alice","all":true}`},
		{"memory.forget.alice", `{"user_id":"alice"}`},
		{"memory.export.alice", `{"user_id":"alice"}`},
		{"memory.import.alice", `{"user_id":"alice","lines":[` + events.ExportHeader +
			`,{"type":"fact","key":"color","value":"set-by-bob","source_at":"2026-11-21T10:00:00Z","event_id":"","conversation_id":"","extractor":"","model":"","prompt_version":"","updated_at":"2026-11-21T10:00:00Z"}]}`},
		{"memory.deadletter.alice", `{"forged":true}`},
		{"memory.docs.search.alice", `{"user_id":"alice","query":"handbook"}`},
		{"memory.docs.put.alice", `{"user_id":"alice","collection":"notes","doc_id":"a","content":"set by bob"}`},
		{"memory.docs.delete.alice", `{"user_id":"alice","collection":"notes","doc_id":"a"}`},
		{"memory.docs.defaults.alice", `{"user_id":"alice","collections":[]}`},
		{"memory.shared.docs.put.team-x", `{"user_id":"team-x","collection":"handbook","doc_id":"h","content":"set by bob"}`},
		{"$JS.API.STREAM.INFO.MEMORY_TURNS", ``},
		{"$JS.API.STREAM.MSG.GET.MEMORY_TURNS", `{"last_by_subj":"memory.turns.alice"}`},
		{"$JS.API.DIRECT.GET.MEMORY_TURNS", `{"last_by_subj":"memory.turns.alice"}`},
		{"$JS.API.CONSUMER.CREATE.MEMORY_TURNS_DEADLETTER", `{"stream_name":"MEMORY_TURNS_DEADLETTER","config":{"deliver_subject":"` + bobInbox + `.dl"}}`},
	}
	for _, f := range forged {
		if err := bob.PublishRequest(f.subject, bob.NewRespInbox(), []byte(f.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := bob.Flush(); err != nil {
		t.Fatal(err)
	}
	// bob's own memory works, and bob's token cannot carry alice's user_id.
	bobClient := events.NewClient(bob, "")
	if r, err := bobClient.Enrich(ctx, events.EnrichRequest{UserID: "bob", Message: "hello"}); err != nil || r.Degraded {
		t.Fatalf("bob's enrich = %+v, %v (violations %q)", r, err, bobErrs.all())
	}
	msg, err := bob.Request("memory.enrich.bob", []byte(`{"user_id":"alice","message":"color"}`), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get("Nats-Service-Error-Code") != "400" {
		t.Fatalf("alice's user_id on bob's subject answered %s", msg.Data)
	}
	// Everything routed before this round trip has reached bob's connection.
	if err := bob.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, sub := range spies {
		for {
			m, err := sub.NextMsg(0)
			if err != nil {
				break
			}
			if sub.Subject != bobInbox+".>" {
				t.Errorf("bob's subscription %q received %s: %q", sub.Subject, m.Subject, m.Data)
			} else if strings.Contains(string(m.Data), marker) || strings.Contains(string(m.Data), "alice") {
				t.Errorf("bob's own inbox received alice's data on %s: %q", m.Subject, m.Data)
			}
		}
	}
	// Each attempt was refused by the server, not merely left unanswered.
	var published []string
	for _, f := range forged {
		published = append(published, f.subject)
	}
	bobErrs.waitRefused(t, "Publish", published)
	bobErrs.waitRefused(t, "Subscription", eavesdrop)
	after, err := st.Stats(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	afterFacts, err := st.Facts(ctx, "alice", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := fmt.Sprint(after), fmt.Sprint(before); a != b {
		t.Errorf("bob's frontend changed alice's stats: %s, was %s", a, b)
	}
	if a, b := permJSON(t, afterFacts), permJSON(t, beforeFacts); a != b {
		t.Errorf("bob's frontend changed alice's facts: %s, was %s", a, b)
	}
	permCheckDocs(t, ctx, st, alice, bob, marker)
	permCheckCLI(t, url, aliceInbox, bobInbox)
	// The changes of the two turns the commands published (one whose
	// acknowledgement was refused) have reached alice's frontend before
	// permCheckReplySubjects listens for changes of alice that are not
	// hers (a change is published after its turn is processed: waiting
	// for the turns alone let one arrive in that window, ci3).
	seen := map[string]bool{}
	permWait(t, "the changes of the turns the commands published", func() bool {
		if m, err := aliceChanges.NextMsg(100 * time.Millisecond); err == nil {
			var ch events.Change
			if json.Unmarshal(m.Data, &ch) == nil && ch.IsChangeOf("alice") {
				seen[ch.EventID] = true
			}
		}
		return seen["cli-lisbon"] && seen["no-inbox-1"]
	})
	permCheckReplySubjects(t, ctx, md, alice, bob)
	permCheckEveryEndpoint(t, url, alice, bob, aliceErrs, bobErrs)
	if v := mdErrs.all(); len(v) > 0 {
		t.Errorf("memoryd's documented permissions refused some of its work: %q", v)
	}
}

// permCheckCLI runs the memoryd commands a frontend's operator runs with a
// frontend's credential: publish with --ensure-stream=false uses nothing
// but the turn's subject (before: it asked the JetStream API for the
// stream, waited 5 s and printed a permissions violation); without it, and
// a request to another user's subject, say that the server refused them,
// not that memoryd is slow or the stream missing.
func permCheckCLI(t *testing.T, url, aliceInbox, bobInbox string) {
	as := func(user, inbox string) []string {
		return []string{"MEMORYD_NATS_URL=" + url, "MEMORYD_NATS_USER=" + user + "_frontend", "MEMORYD_NATS_PASSWORD=" + user + "-pw", "MEMORYD_INBOX_PREFIX=" + inbox}
	}
	dir := t.TempDir()
	doc := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(doc, []byte("# Notes\nbob's zebra"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env      []string
		args     []string
		code     int
		want     string // in stdout when code is 0, else in stderr (docs put: stdout, a line per file)
		unwanted string // in neither
	}{
		{as("alice", aliceInbox), []string{"publish", "--ensure-stream=false", "--user", "alice", "--id", "cli-lisbon", "--message", "I live in Lisbon"}, 0, " seq=", "permissions violation"},
		{as("alice", aliceInbox), []string{"publish", "--user", "alice", "--message", "I live in Lisbon"}, 1, "--ensure-stream=false", "deadline exceeded"},
		// A turn of another user's subject is refused, not stored: no
		// "send it again", which the same credential refuses again (a
		// newcomer's walk).
		{as("alice", aliceInbox), []string{"publish", "--ensure-stream=false", "--user", "bob", "--id", "not-mine", "--message", "I live in Oslo"}, 1, "the NATS server refused it", "send it again"},
		// --timeout beyond runMemoryd's minute: the refusal must end the
		// request (before, it waited out its timeout).
		{as("bob", bobInbox), []string{"enrich", "--timeout", "10m", "--user", "alice", "where do I live?"}, 1, "the NATS server refused it", "did not reply"},
		// A put of each file bounds its own request (before: each waited
		// out --timeout, the refusal's end lost; found by a security walk).
		{as("alice", aliceInbox), []string{"docs", "put", "--timeout", "10m", "--user", "bob", "--collection", "notes", doc}, 1, "the NATS server refused it", "did not reply"},
		// An operator's command run with a frontend's credential (before:
		// "context deadline exceeded").
		{as("alice", aliceInbox), []string{"deadletters"}, 1, "the NATS server refused it", "deadline exceeded"},
		// Without its inbox prefix only the reply's subscription is
		// refused: the request went out and was done (before: "the NATS
		// server refused it", and an operator sent a turn twice).
		{as("alice", ""), []string{"facts", "set", "--timeout", "10m", "--user", "alice", "hobby", "chess"}, 1, "memoryd may have carried it out", "deadline exceeded"},
		{as("alice", ""), []string{"publish", "--ensure-stream=false", "--user", "alice", "--id", "no-inbox-1", "--message", "I play chess"}, 1, "send it again with --id no-inbox-1", "deadline exceeded"},
		// Another frontend's prefix (one left in the environment): the
		// advice names the prefix refused, not "give the frontend's".
		{as("alice", bobInbox), []string{"facts", "set", "--timeout", "10m", "--user", "alice", "hobby", "chess"}, 1, "under the inbox prefix " + bobInbox, "give the frontend's inbox prefix"},
		// A proxy whose credential may not receive its replies does not
		// start (before: it served, enrich timed out, and turns it had
		// published were counted failed).
		{as("alice", ""), []string{"proxy", "--upstream", "http://127.0.0.1:9/v1", "--trusted-user-header", "X-User", "--listen", "127.0.0.1:0"}, 1, "may not receive replies on its inbox", "deadline exceeded"},
	} {
		r := runMemoryd(dir, c.env, time.Minute, c.args...)
		out := r.stderr
		if c.code == 0 || c.args[0] == "docs" {
			out = r.stdout
		}
		if r.code != c.code || !strings.Contains(out, c.want) || strings.Contains(r.stdout+r.stderr, c.unwanted) {
			t.Errorf("memoryd %s as %s: exit %d, stdout %q, stderr %q; want exit %d, %q and no %q", strings.Join(c.args, " "), c.env[1], r.code, r.stdout, r.stderr, c.code, c.want, c.unwanted)
		}
	}
}

// permCheckDocs checks knowledge base access through the documented
// permissions: a shared scope's collection (written by an operator, here
// through the store: frontends are not given the scope's subjects) is read
// by the users granted it, each from their own subject, and neither reads
// the other's private collection.
func permCheckDocs(t *testing.T, ctx context.Context, st *store.Store, alice, bob *nats.Conn, marker string) {
	t.Helper()
	if _, err := st.PutDocument(ctx, store.DocumentPut{Owner: store.Owner{Shared: "team-x"}, Collection: "handbook", DocID: "h",
		Content: "the team zebra policy", Chunk: enricher.ChunkDocument}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "bob"} {
		if _, err := st.GrantReader(ctx, "team-x", u); err != nil {
			t.Fatal(err)
		}
	}
	ac, bc := events.NewClient(alice, ""), events.NewClient(bob, "")
	if _, err := ac.PutDocument(ctx, events.DocsPutRequest{UserID: "alice", Collection: "notes", DocID: "z", Content: "alice's zebra " + marker}); err != nil {
		if cs, _ := st.Collections(ctx, store.Owner{User: "alice"}); len(cs) == 0 {
			t.Logf("the block does not grant alice's frontend memory.docs.put.alice: %v", err)
			return
		}
		t.Fatal(err)
	}
	if _, err := bc.PutDocument(ctx, events.DocsPutRequest{UserID: "bob", Collection: "notes", DocID: "z", Content: "bob's private zebra"}); err != nil {
		t.Fatal(err)
	}
	found := func(c *events.Client, user string) []string {
		t.Helper()
		r, err := c.SearchDocuments(ctx, events.DocsSearchRequest{UserID: user, Query: "zebra"})
		if err != nil {
			t.Fatalf("%s's docs search: %v", user, err)
		}
		var out []string
		for _, ch := range r.Chunks {
			out = append(out, ch.Collection+":"+ch.DocID+":"+ch.Text)
		}
		slices.Sort(out)
		return out
	}
	if got, want := found(ac, "alice"), []string{"notes:z:alice's zebra " + marker, "team-x/handbook:h:the team zebra policy"}; !slices.Equal(got, want) {
		t.Errorf("alice's docs search found %q, want %q", got, want)
	}
	if got, want := found(bc, "bob"), []string{"notes:z:bob's private zebra", "team-x/handbook:h:the team zebra policy"}; !slices.Equal(got, want) {
		t.Errorf("bob's docs search found %q, want %q", got, want)
	}
	// A user cannot name another user's collection: "bob/notes" would be a
	// shared scope named bob, which does not exist.
	if _, err := ac.SearchDocuments(ctx, events.DocsSearchRequest{UserID: "alice", Query: "zebra", Collections: []string{"bob/notes"}}); err == nil {
		t.Error("alice's search of bob/notes succeeded")
	}
}

func permJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// permStartNATS runs a private nats-server with conf (eventstest.PrivateServer,
// which picks the port) and returns its client URL. It is killed when the
// test ends.
// permUser is a NATS user of permConf's account, with its permissions
// block.
type permUser struct{ name, password, block string }

// permAccountsMemoryd and permAccountsFrontend are the lines of the
// documented accounts block that stand for memoryd's user and a
// frontend's, with their permissions blocks.
const (
	permAccountsMemoryd  = `{ user: memoryd, password: "...", <memoryd's permissions below> }`
	permAccountsFrontend = `{ user: alice_frontend, password: "...", <the frontend's permissions below> }`
)

// permConf is a nats-server configuration with JetStream storing in dir and
// the accounts of docs/operations.md's accounts block as written: memoryd
// (password "memoryd-pw", permissions memorydBlock) in place of its line,
// and the given users in place of the frontend's.
func permConf(t *testing.T, dir, memorydBlock string, users ...permUser) string {
	t.Helper()
	var tmpl string
	for _, b := range permDocBlocks(t) {
		if b.kind == "accounts" {
			if tmpl != "" {
				t.Fatalf("%s:%d: a second accounts block; the docs show one layout", b.file, b.line)
			}
			tmpl = b.text
		}
	}
	if tmpl == "" || !strings.Contains(tmpl, permAccountsMemoryd) || !strings.Contains(tmpl, permAccountsFrontend) {
		t.Fatalf("docs/operations.md has no marked accounts block with the lines\n%s\n%s\n%s", permAccountsMemoryd, permAccountsFrontend, tmpl)
	}
	user := func(u permUser) string {
		return fmt.Sprintf("{ user: %s, password: %q,\n%s\n}", u.name, u.password, u.block)
	}
	var fe []string
	for _, u := range users {
		fe = append(fe, user(u))
	}
	conf := strings.Replace(tmpl, permAccountsMemoryd, user(permUser{"memoryd", "memoryd-pw", memorydBlock})+"\n"+permOpsUser(t), 1)
	conf = strings.Replace(conf, permAccountsFrontend, strings.Join(fe, "\n"), 1)
	return fmt.Sprintf("jetstream { store_dir: %q }\n", filepath.Join(dir, "js")) + conf
}

// permOpsRe finds the operator's user that docs/operations.md ("Service
// discovery") tells to add to memoryd's account for `nats micro`.
var permOpsRe = regexp.MustCompile("`(\\{ user: ops, password: \"\\.\\.\\.\", [^`]*\\})`")

// permOpsUser is that user as written, with the password "ops-pw".
func permOpsUser(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := permOpsRe.FindSubmatch(data)
	if m == nil {
		t.Fatalf("docs/operations.md shows no operator's user for service discovery (%s)", permOpsRe)
	}
	return strings.Replace(string(m[1]), `password: "..."`, `password: "ops-pw"`, 1)
}

func permStartNATS(t *testing.T, dir, conf string) string {
	t.Helper()
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return eventstest.PrivateServer(t, func(port int) []string {
		return []string{"-c", path, "-a", "127.0.0.1", "-p", strconv.Itoa(port)}
	})
}

// permCheckReplySubjects: a frontend's request on its own subject that
// names, as its reply subject, a JetStream API subject or one of memoryd's
// own gets no reply there. memoryd publishes replies with its credential,
// which allows the JetStream API, dead letters and memory changes: an
// operators' walk purged and deleted the turn stream, deleted the ingest
// consumer, and forged alice's dead letters and memory changes from bob's
// frontend this way.
func permCheckReplySubjects(t *testing.T, ctx context.Context, md, alice, bob *nats.Conn) {
	t.Helper()
	js, err := jetstream.New(md)
	if err != nil {
		t.Fatal(err)
	}
	// The streams' first sequences and (with counts) message counts, and
	// the ingest consumer.
	state := func(counts bool) string {
		var parts []string
		for _, name := range []string{events.DefaultStream, events.DefaultDeadLetterStream} {
			st, err := js.Stream(ctx, name)
			if err != nil {
				parts = append(parts, name+": "+err.Error())
				continue
			}
			info, err := st.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, fmt.Sprintf("%s: first %d", name, info.State.FirstSeq))
			if counts {
				parts = append(parts, fmt.Sprintf("%d messages", info.State.Msgs))
			}
		}
		if _, err := js.Consumer(ctx, events.DefaultStream, worker.DefaultDurable); err != nil {
			parts = append(parts, "consumer: "+err.Error())
		}
		return strings.Join(parts, "; ")
	}
	before := state(true)
	changes, err := alice.SubscribeSync("memory.changes.alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, reply := range []string{
		"$JS.API.STREAM.PURGE." + events.DefaultStream,
		"$JS.API.CONSUMER.DELETE." + events.DefaultStream + "." + worker.DefaultDurable,
		"$JS.API.STREAM.DELETE." + events.DefaultStream,
		"memory.turns.alice", "memory.deadletter.alice", "memory.changes.alice",
	} {
		// A bad body too: an error reply has an empty body, which the
		// JetStream API reads as a request.
		for _, body := range []string{`{"user_id":"bob"}`, `x`} {
			if err := bob.PublishRequest("memory.stats.bob", reply, []byte(body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// bob's own request after them, answered: the endpoint has had them.
	if _, err := events.NewClient(bob, "").Stats(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	if after := state(true); after != before {
		t.Errorf("requests naming memoryd's subjects as their reply changed the streams: %s, was %s", after, before)
	}
	// Through the frontends' account's imports memoryd sees a reply
	// subject under _R_. and answers it: bob's reply may reach alice's
	// change subscription, but is no change of alice's (protocol.md,
	// "Memory changes": subscribers check each message).
	permNoChangeOf(t, changes, "alice")

	// Turns published with JetStream API subjects as their reply: the
	// stream's acknowledgement ({"stream":..,"seq":N}) goes there with the
	// server's rights; in one account with memoryd, nats-server 2.9 read
	// it as a purge below N, a purge of every stream of the account, or
	// the delete of the message N, which a duplicate Nats-Msg-Id makes
	// another user's. Through the imports it goes back to the frontends'
	// account, which has no JetStream.
	aliceJS, err := jetstream.New(alice)
	if err != nil {
		t.Fatal(err)
	}
	aliceTurn, err := aliceJS.Publish(ctx, "memory.turns.alice", []byte(`{"id":"a-target","user_id":"alice","user_message":"hello","timestamp":"`+time.Now().UTC().Format(time.RFC3339)+`"}`),
		jetstream.WithMsgID(events.MsgID("alice", "a-target")))
	if err != nil {
		t.Fatal(err)
	}
	// Only the first sequences, the consumer and alice's turn: the turns
	// below add messages.
	streams := func() string {
		out := state(false)
		st, err := js.Stream(ctx, events.DefaultStream)
		if err == nil {
			_, err = st.GetMsg(ctx, aliceTurn.Sequence)
		}
		if err != nil {
			out += fmt.Sprintf("; alice's turn %d: %v", aliceTurn.Sequence, err)
		}
		return out
	}
	before = streams()
	bobJS, err := jetstream.New(bob)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range []struct{ reply, msgID string }{
		{"$JS.API.STREAM.PURGE." + events.DefaultStream, ""},
		{"$JS.API.STREAM.PURGE." + events.DefaultDeadLetterStream, ""},
		{"$JS.API.STREAM.MSG.DELETE." + events.DefaultStream, events.MsgID("alice", "a-target")},
		{"$JS.API.STREAM.MSG.DELETE." + events.DefaultDeadLetterStream, ""},
		{"$JS.API.ACCOUNT.PURGE.MEMORY", ""},
		{"$JS.API.STREAM.DELETE." + events.DefaultStream, ""},
	} {
		m := nats.NewMsg("memory.turns.bob")
		m.Reply = r.reply
		m.Data = []byte(fmt.Sprintf(`{"id":"b-ack-%d","user_id":"bob","user_message":"hello","timestamp":%q}`, i, time.Now().UTC().Format(time.RFC3339)))
		if r.msgID != "" {
			m.Header.Set(nats.MsgIdHdr, r.msgID)
		}
		if err := bob.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	// bob's own turn after them, acknowledged: the stream has stored them
	// and sent their acknowledgements.
	if _, err := events.NewPublisher(bobJS, "").Publish(ctx, events.Turn{ID: "b-ack-after", UserID: "bob", UserMessage: "hello", Timestamp: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if after := streams(); after != before {
		t.Errorf("turns naming the JetStream API as their reply changed the streams: %s, was %s", after, before)
	}

	// Through the Go client, a request or turn the server refuses says so
	// (nats.ErrPermissionViolation), not only that it timed out: a
	// frontend following Publish's advice for a timeout would send it
	// again for ever (found by an audit of a Go frontend).
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = events.NewClient(bob, "").Stats(rctx, "alice")
	cancel()
	if !errors.Is(err, events.ErrRequestRefused) || !errors.Is(err, nats.ErrPermissionViolation) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("bob's Go client asking alice's stats: %v; want the request refused and the timeout", err)
	}
	rctx, cancel = context.WithTimeout(ctx, 3*time.Second)
	_, err = events.NewPublisher(bobJS, "").Publish(rctx, events.Turn{ID: "b-as-alice", UserID: "alice", UserMessage: "hello", Timestamp: time.Now()})
	cancel()
	if !errors.Is(err, events.ErrRequestRefused) {
		t.Errorf("bob's Go publisher publishing alice's turn: %v; want the request refused", err)
	}
	// A violation reported before a request is not that request's: a
	// refused subscription, then bob's own request timing out, is a
	// timeout (a review saw it called refused, which Publish's doc calls
	// final: a frontend following it would drop a turn never refused).
	if _, err := bob.SubscribeSync("memory.stats.bob"); err != nil {
		t.Fatal(err)
	}
	permWait(t, "the server to refuse bob's subscription", func() bool {
		err := bob.LastError()
		return err != nil && strings.Contains(err.Error(), `Subscription to "memory.stats.bob"`)
	})
	rctx, cancel = context.WithDeadline(ctx, time.Now()) // times out at once
	_, err = events.NewClient(bob, "").Stats(rctx, "bob")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrPermissionViolation) {
		t.Errorf("bob's own request timing out after an unrelated violation: %v; want a plain timeout", err)
	}
	// The reply's inbox refused: bob's credential without its inbox
	// prefix. The request went out, so it is told apart.
	wrong, err := nats.Connect(bob.ConnectedUrl(), nats.UserInfo("bob_frontend", "bob-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	rctx, cancel = context.WithTimeout(ctx, 3*time.Second)
	_, err = events.NewClient(wrong, "").Stats(rctx, "bob")
	cancel()
	if !errors.Is(err, events.ErrReplyRefused) || errors.Is(err, events.ErrRequestRefused) {
		t.Errorf("bob's Go client without its inbox prefix: %v; want the reply refused", err)
	}
}

// permNoChangeOf drains sub (a subscription to user's memory changes) of
// what arrived and fails on any message that is a change of user.
func permNoChangeOf(t *testing.T, sub *nats.Subscription, user string) {
	t.Helper()
	for {
		m, err := sub.NextMsg(100 * time.Millisecond)
		if err != nil {
			return
		}
		var ch events.Change
		if json.Unmarshal(m.Data, &ch) == nil && ch.IsChangeOf(user) {
			t.Errorf("%s's memory changes received a change of %s from another frontend's request: %q", user, user, m.Data)
		}
	}
}

// permCheckEveryEndpoint asks memoryd, with the operator's documented
// discovery credential, which subjects it serves ($SRV.INFO), and checks
// each against the documented blocks: alice's frontend reaches every
// endpoint on alice's subject (through the accounts block's imports) but
// those the docs leave out on purpose (forget, a shared scope's), which
// the server refuses it; bob's frontend is refused every one of alice's.
// The lists above are written by hand: an endpoint added since (or a
// block widened by a wildcard, "memory.*.alice" granting forget) is
// caught here.
func permCheckEveryEndpoint(t *testing.T, url string, alice, bob *nats.Conn, aliceErrs, bobErrs *permErrors) {
	t.Helper()
	ops, err := nats.Connect(url, nats.UserInfo("ops", "ops-pw"), nats.CustomInboxPrefix("_INBOX_ops"))
	if err != nil {
		t.Fatalf("the documented operator's credential cannot connect: %v", err)
	}
	defer ops.Close()
	m, err := ops.Request("$SRV.INFO."+enricher.ServiceName, nil, 5*time.Second)
	if err != nil {
		t.Fatalf("service discovery with the documented operator's credential: %v", err)
	}
	var info micro.Info
	if err := json.Unmarshal(m.Data, &info); err != nil {
		t.Fatalf("$SRV.INFO answered %q: %v", m.Data, err)
	}
	if len(info.Endpoints) == 0 {
		t.Fatalf("$SRV.INFO lists no endpoints: %s", m.Data)
	}
	var refusedAlice, refusedBob []string
	for _, ep := range info.Endpoints {
		base, ok := strings.CutSuffix(ep.Subject, ".*")
		if !ok || strings.ContainsAny(base, "*>") {
			t.Errorf("endpoint %s serves %q, whose last token is not the user's (or the scope's): subject permissions cannot confine it", ep.Name, ep.Subject)
			continue
		}
		subj := base + ".alice"
		// Left out of the frontend block on purpose (docs/protocol.md,
		// "Reply subjects"; "Documents": a shared scope's subjects go to
		// its writers only).
		leftOut := subj == events.DefaultPrefix+".forget.alice" || strings.HasPrefix(subj, events.DefaultPrefix+".shared.")
		refusedBob = append(refusedBob, subj)
		if err := bob.PublishRequest(subj, bob.NewRespInbox(), []byte(`{"user_id":"alice"}`)); err != nil {
			t.Fatal(err)
		}
		if leftOut {
			refusedAlice = append(refusedAlice, subj)
			if err := alice.PublishRequest(subj, alice.NewRespInbox(), []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		// No user_id: a 400, nothing done; answered at all shows the
		// block grants it and the accounts block carries it.
		if _, err := alice.Request(subj, []byte(`{}`), 5*time.Second); err != nil {
			if aliceErrs.has("Publish", subj) {
				t.Errorf("memoryd serves %s (endpoint %s), which the documented frontend block does not grant alice's frontend and the docs do not leave out", subj, ep.Name)
			} else {
				t.Errorf("alice's frontend on %s (endpoint %s): %v: not refused, not answered (is it in the accounts block's exports and imports?)", subj, ep.Name, err)
			}
		}
	}
	if err := bob.Flush(); err != nil {
		t.Fatal(err)
	}
	bobErrs.waitRefused(t, "Publish", refusedBob)
	var missing []string
	ok, _ := eventstest.Poll(10*time.Second, func() (bool, string) {
		missing = missing[:0]
		for _, subj := range refusedAlice {
			if !aliceErrs.has("Publish", subj) {
				missing = append(missing, subj)
			}
		}
		return len(missing) == 0, ""
	})
	if !ok {
		t.Errorf("the documented frontend block grants alice's frontend %q, which the docs leave out", missing)
	}
}
