package systest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
)

// The chaos test's workload. Users and their roles:
//
//	plain0, plain1   ingest, replays (one with --reset), kills
//	fclear           facts.clear of location in round 2; round 3 sets it again with a turn stamped after the clear
//	cclear           memory clear --question (round 1), clear --all (round 2); round 3 turns stamped after the clear
//	prune0, prune1   25 turns a round against --max-context-per-user 40: pruned from round 2 on
//	forget2          facts.clear (round 1), a dead-lettered event and a forget through the service mid-ingest (round 2), a new memory (round 3)
//	forget3          forgotten by the CLI in round 3 while a replay --reset that names it runs
const (
	chaosRounds      = 3
	chaosCap         = 40 // --max-context-per-user
	chaosPlainTurns  = 10 // turns of a user a round (3 rounds stay under the cap)
	chaosPrunedTurns = 25 // turns of prune0 and prune1 a round (over the cap from round 2)
)

var chaosUsers = []string{"plain0", "plain1", "fclear", "cclear", "prune0", "prune1", "forget2", "forget3"}

// chaosPast is the base time of the turns stamped in the past: a clear (dated
// now) covers every one of them, whenever it runs relative to their ingest,
// so the memory after a clear does not depend on the interleaving.
var chaosPast = time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)

// chaosCities, chaosEmployers and chaosColors are the values of the
// self-statements the rules extractor picks up as facts (location, employer,
// favorite_color); each turn makes one.
var (
	chaosCities    = []string{"Lisbon", "Porto", "Berlin", "Madrid", "Paris", "Oslo", "Vienna", "Dublin", "Prague", "Rome", "Warsaw"}
	chaosEmployers = []string{"Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Wonka"}
	chaosColors    = []string{"green", "blue", "orange", "purple", "teal", "yellow"}
)

// chaosTurn is turn i of user u in round r, stamped at.
func chaosTurn(u, r, i int, at time.Time) events.Turn {
	user := chaosUsers[u]
	id := fmt.Sprintf("%s-r%d-%02d", user, r, i)
	var s string
	switch k := r*5 + i + u; i % 3 {
	case 0:
		s = "I live in " + chaosCities[k%len(chaosCities)] + "."
	case 1:
		s = "I work at " + chaosEmployers[k%len(chaosEmployers)] + "."
	default:
		s = "My favorite color is " + chaosColors[k%len(chaosColors)] + "."
	}
	return events.Turn{ID: id, UserID: user, UserMessage: fmt.Sprintf("Note %s: %s", id, s),
		AssistantResponse: "Noted " + id, Timestamp: at}
}

// chaosRoundTurns returns round r's turns by user. Past stamps are not in
// publish order; fresh stamps (cclear's and one of fclear's in round 3) are
// later than every clear made before fresh was taken.
func chaosRoundTurns(r int, fresh time.Time) map[string][]events.Turn {
	out := map[string][]events.Turn{}
	for u, user := range chaosUsers {
		n := chaosPlainTurns
		if strings.HasPrefix(user, "prune") {
			n = chaosPrunedTurns
		}
		for i := range n {
			slot := (i*7 + u) % n // a permutation: gcd(7, n) = 1
			at := chaosPast.Add(time.Duration(r)*time.Hour + time.Duration(slot)*time.Second)
			if r == 3 && user == "cclear" {
				at = fresh.Add(time.Duration(slot) * time.Second)
			}
			out[user] = append(out[user], chaosTurn(u, r, i, at))
		}
		if r == 3 && user == "fclear" {
			out[user] = append(out[user], events.Turn{ID: "fclear-r3-moved", UserID: user,
				UserMessage: "Note fclear-r3-moved: I moved to Reykjavik.", AssistantResponse: "Noted", Timestamp: fresh})
		}
	}
	return out
}

// chaosOp is one lifecycle operation of a round, run the same way on the
// chaos system and on the reference.
type chaosOp struct {
	name string
	run  func(e *relEnv, c *events.Client) (string, error)
	// service is set for requests to the service (through the Go client or
	// a client command): a kill waits for them, as for the probers' enrich,
	// since a SIGKILLed process cannot answer what it received.
	service bool
}

func chaosCLI(args ...string) func(e *relEnv, c *events.Client) (string, error) {
	return func(e *relEnv, _ *events.Client) (string, error) {
		out, err := e.relRun(args...)
		return strings.TrimSpace(out), err
	}
}

func chaosForgetByService(user string) func(e *relEnv, c *events.Client) (string, error) {
	return func(_ *relEnv, c *events.Client) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, err := c.Forget(ctx, user)
		return fmt.Sprintf("%+v", r), err
	}
}

func chaosClearFactByService(user, key string) func(e *relEnv, c *events.Client) (string, error) {
	return func(_ *relEnv, c *events.Client) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		n, err := c.ClearFact(ctx, user, key)
		return fmt.Sprintf("%d deleted", n), err
	}
}

func chaosClearAllByService(user string) func(e *relEnv, c *events.Client) (string, error) {
	return func(_ *relEnv, c *events.Client) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		n, err := c.Clear(ctx, events.ClearRequest{UserID: user, All: true})
		return fmt.Sprintf("%d deleted", n), err
	}
}

// chaosRound is what a round does besides ingest and the kill.
type chaosRound struct {
	ops        []chaosOp
	forgotten  string // the user forgotten this round, "" for none
	deadLetter bool   // publish an invalid event of forgotten before the forget
}

func chaosRoundPlan(r int, turns map[string][]events.Turn) chaosRound {
	switch r {
	case 1:
		return chaosRound{ops: []chaosOp{
			{"replay --user plain0,plain1", chaosCLI("replay", "--user", "plain0,plain1", "--workers", "4"), false},
			{"facts clear forget2 employer (service)", chaosClearFactByService("forget2", "employer"), true},
			{"memory clear cclear --question (CLI)", chaosCLI("memory", "clear", "--user", "cclear", "--question", turns["cclear"][4].UserMessage), true},
		}}
	case 2:
		return chaosRound{forgotten: "forget2", deadLetter: true, ops: []chaosOp{
			{"forget forget2 (service)", chaosForgetByService("forget2"), true},
			{"replay (all users)", chaosCLI("replay", "--workers", "4"), false},
			{"facts clear fclear location (CLI)", chaosCLI("facts", "clear", "--user", "fclear", "location"), true},
			{"memory clear cclear --all (service)", chaosClearAllByService("cclear"), true},
		}}
	default:
		return chaosRound{forgotten: "forget3", ops: []chaosOp{
			{"replay --reset --user plain0,plain1,fclear,cclear,forget3", chaosCLI("replay", "--reset", "--user", "plain0,plain1,fclear,cclear,forget3", "--workers", "4"), false},
			{"forget forget3 (CLI)", chaosCLI("forget", "--user", "forget3"), false},
		}}
	}
}

// chaosBadEvent publishes an event of user on their subject that ingest
// dead-letters (no user_message).
func (e *relEnv) chaosBadEvent(user string, r int) error {
	body, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("%s-r%d-bad", user, r), "user_id": user,
		"timestamp": chaosPast.Format(time.RFC3339)})
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	_, err := e.js.Publish(ctx, events.TurnSubject(e.prefix, user), body)
	return err
}

// chaosSettle waits until e has handled everything: the ingest consumer has
// no backlog, every user not forgotten has exactly the recorded turns want
// says, no turn is pending, and no user has more context items than the cap
// (the pruner has run).
func (e *relEnv) chaosSettle(what string, want map[string]int, limit time.Duration, procs ...*proc) {
	e.t.Helper()
	waitFor(e.t, what+" settled", limit, func() (bool, string) {
		backlog, err := e.consumerBacklog()
		if err != nil {
			return false, err.Error()
		}
		rows, err := e.store.Pool().Query(e.ctx, `SELECT u, coalesce(t.n, 0), coalesce(t.pending, 0), coalesce(c.n, 0)
			FROM unnest($1::text[]) AS u
			LEFT JOIN (SELECT user_id, count(*) AS n, count(*) FILTER (WHERE status = 'pending') AS pending FROM turns GROUP BY user_id) t ON t.user_id = u
			LEFT JOIN (SELECT user_id, count(*) AS n FROM context GROUP BY user_id) c ON c.user_id = u`, chaosUsers)
		if err != nil {
			return false, err.Error()
		}
		var (
			u                 string
			n, pending, items int
			ok                = backlog == 0
			state             = []string{fmt.Sprintf("consumer backlog %d", backlog)}
		)
		if backlog != 0 {
			state = append(state, e.consumerState())
		}
		_, err = pgx.ForEachRow(rows, []any{&u, &n, &pending, &items}, func() error {
			// A forgotten user's leftovers are the invariants' to report.
			if want[u] != 0 && n != want[u] || pending != 0 || items > chaosCap {
				ok = false
				state = append(state, fmt.Sprintf("%s: %d of %d turns recorded, %d pending, %d context items", u, n, want[u], pending, items))
			}
			return nil
		})
		if err != nil {
			return false, err.Error()
		}
		return ok, strings.Join(state, "; ")
	}, procs...)
}

// chaosMemory is a user's memory, ids and timestamps aside: facts as
// "key=value" and context items as "Q: …\nA: …", sorted.
type chaosMemory struct{ facts, context []string }

func (e *relEnv) chaosMemoryOf(user string) (chaosMemory, error) {
	var m chaosMemory
	rows, err := e.store.Pool().Query(e.ctx, `SELECT key || '=' || value FROM facts WHERE user_id = $1 ORDER BY 1`, user)
	if err != nil {
		return m, err
	}
	if m.facts, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return m, err
	}
	rows, err = e.store.Pool().Query(e.ctx, `SELECT 'Q: ' || question || E'\nA: ' || answer FROM context WHERE user_id = $1 ORDER BY 1`, user)
	if err != nil {
		return m, err
	}
	m.context, err = pgx.CollectRows(rows, pgx.RowTo[string])
	return m, err
}

// chaosDiff describes how got differs from want (empty when equal).
func chaosDiff(kind string, got, want []string) string {
	var missing, extra []string
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			extra = append(extra, g)
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return ""
	}
	short := func(s []string) []string {
		if len(s) > 4 {
			return append(s[:4:4], fmt.Sprintf("… %d more", len(s)-4))
		}
		return s
	}
	return fmt.Sprintf("%s: %d, reference %d; missing %q; extra %q", kind, len(got), len(want), short(missing), short(extra))
}

// chaosForgottenLeftovers returns what e still holds of a forgotten user:
// rows of data per table (a tombstone holds none and is not counted), events
// on their subjects in the turn stream, their dead letters, and River jobs
// whose arguments name them or any of ids (their event ids).
func (e *relEnv) chaosForgottenLeftovers(user string, ids []string) (map[string]int64, error) {
	left := map[string]int64{}
	for _, table := range []string{"turns", "facts", "fact_history", "context", "llm_usage", "fact_clears", "context_clears", "fact_items", "fact_value_clears", "fact_direct_clears"} {
		var n int64
		if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM `+table+` WHERE user_id = $1`, user).Scan(&n); err != nil {
			return nil, err
		}
		left[table] = n
	}
	var jobs int64
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job
		WHERE args->>'user_id' = $1 OR args->'event_ids' ?| $2::text[]`, user, ids).Scan(&jobs); err != nil {
		return nil, err
	}
	left["river_job"] = jobs
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	st, err := e.js.Stream(ctx, e.stream)
	if err != nil {
		return nil, err
	}
	subject := events.TurnSubject(e.prefix, user)
	for _, subj := range []string{subject, subject + ".>"} {
		n, err := eventstest.SubjectMsgs(ctx, st, subj)
		if err != nil {
			return nil, err
		}
		left["turn_stream"] += int64(n)
	}
	dl, err := e.js.Stream(ctx, events.DeadLetterStream(e.stream))
	if err != nil {
		return nil, err
	}
	n, err := chaosDeadLettersOf(ctx, dl, e.prefix, user)
	left["dead_letters"] = n
	return left, err
}

// chaosDeadLettersOf counts the dead letters attributed to user: by the
// user-token header, the original subject or the body's user_id.
func chaosDeadLettersOf(ctx context.Context, dl jetstream.Stream, prefix, user string) (int64, error) {
	info, err := dl.Info(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	token, subject := events.UserToken(user), events.TurnSubject(prefix, user)
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := dl.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return n, err
		}
		var body struct {
			UserID string `json:"user_id"`
		}
		_ = json.Unmarshal(m.Data, &body)
		orig := m.Header.Get(events.HeaderOriginalSubject)
		if m.Header.Get(events.HeaderUserToken) == token || orig == subject || strings.HasPrefix(orig, subject+".") || body.UserID == user {
			n++
		}
	}
	return n, nil
}

// chaosProber sends enrich requests for the chaos system's users from the
// start of the test to its end and counts the replies. A kill holds gate
// (see TestChaos), so no request to the service (the probers' or an
// operation's) is in flight in the process killed.
type chaosProber struct {
	gate                     sync.RWMutex
	sent, answered, degraded atomic.Int64
	mu                       sync.Mutex
	errs                     []string
}

func (p *chaosProber) run(ctx context.Context, c *events.Client, first int) {
	// 20 requests a second from the two probers: several hundred a round,
	// across every kill, at a quarter of the CPU of 80 a second (the
	// machine is shared with the rest of the suite).
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := first; ; i += 2 {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		user := chaosUsers[i%len(chaosUsers)]
		p.gate.RLock()
		p.sent.Add(1)
		rctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		r, err := c.Enrich(rctx, events.EnrichRequest{UserID: user, Message: "Where do I live and where do I work?"})
		cancel()
		p.gate.RUnlock()
		switch {
		case err != nil:
			p.mu.Lock()
			p.errs = append(p.errs, fmt.Sprintf("%s at %s: %v", user, time.Now().Format(time.TimeOnly), err))
			p.mu.Unlock()
		case r.Degraded:
			p.answered.Add(1)
			p.degraded.Add(1)
		default:
			p.answered.Add(1)
		}
	}
}

func (p *chaosProber) unanswered() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.errs)
}

// TestChaos interleaves ingest, forget, replay, clears, pruning and SIGKILL of
// a serve process for 8 users over 3 rounds, on two serve processes (offline
// rules extractor, --max-context-per-user 40, --prune-interval 1s) and on
// nats-server 2.10.29 (compose.yaml's line; the reference on the machine's
// 2.9.10: on 2.10.29 it found forgets leaving erased events pending for
// good, worker.releaseErased), and after each round, once everything is
// handled (the ingest consumer with nothing pending included), checks:
//
//   - the user forgotten that round has 0 rows in turns, facts, fact_history,
//     context, llm_usage, fact_clears, context_clears, fact_items and
//     fact_value_clears (a tombstone is
//     allowed: it holds no data), 0 events on their subjects in the turn
//     stream, 0 dead letters attributed to them (one of theirs was
//     dead-lettered around the forget in round 2), and no River job whose
//     arguments name the user or any of their event ids (a job mixing users
//     counts);
//   - every turn recorded is processed or failed, none pending, and each
//     user has exactly the turns published since their last forget;
//   - every other user's memory equals that of a crash-free reference
//     exactly: the same set of facts (key=value) and the same set of context
//     items (question and answer), ids and timestamps aside. The reference is
//     a separate serve with its own schema and stream that gets the same
//     events and the same operations one after the other, each once the
//     previous one is done, without kills. The workload makes the expected
//     memory independent of the interleaving: turns that a clear covers are
//     stamped before it (a clear holds against every older source, whenever
//     their extraction runs), turns meant to outlive a clear are stamped after
//     every clear made before them, forgotten users' turns are all published
//     before the forget, and only prune0 and prune1 exceed the per-user cap
//     and get no clear, so both systems keep their 40 newest items;
//   - no enrich goes unanswered: two probers send requests throughout and
//     every one gets a reply (degraded allowed). A kill waits for the
//     requests in flight, so none is lost with the killed process.
//
// Each round SIGKILLs one of the two serve processes once a quarter of the
// round's turns are processed, and starts it again.
func TestChaos(t *testing.T) {
	t.Parallel()
	eventstest.ReleaseBin(t, eventstest.ReleaseCompose) // built (the first time) while another heavy test runs
	heavy(t)
	began := time.Now()
	// The chaos system on compose.yaml's nats-server line, the reference
	// on the machine's (Debian 12's 2.9.10): the same memory whichever
	// server a user runs.
	chaos, ref := newRelEnv(t, startNATSRelease(t, eventstest.ReleaseCompose)), newRelEnv(t, "")
	args := []string{"--max-context-per-user", fmt.Sprint(chaosCap), "--prune-interval", "1s"}
	serves := []*proc{chaos.startServe(chaos.dbURL, args...), chaos.startServe(chaos.dbURL, args...)}
	refServe := ref.startServe(ref.dbURL, args...)
	chaosClient, refClient := events.NewClient(chaos.nc, chaos.prefix), events.NewClient(ref.nc, ref.prefix)

	// The probers start once both systems answer.
	for i, c := range []*events.Client{chaosClient, refClient} {
		waitFor(t, fmt.Sprintf("system %d answering enrich", i), 2*time.Minute, func() (bool, string) {
			_, err := relEnrich(c, "plain0")
			return err == nil, fmt.Sprint(err)
		}, append(slices.Clone(serves), refServe)...)
	}
	prober := new(chaosProber)
	probeCtx, stopProbes := context.WithCancel(context.Background())
	var probes sync.WaitGroup
	for w := range 2 {
		probes.Add(1)
		go func() { defer probes.Done(); prober.run(probeCtx, chaosClient, w) }()
	}
	t.Cleanup(func() { stopProbes(); probes.Wait() })
	// A round's operations, which a failure ending the test early leaves
	// running: the test waits for them (they end by their own bounds), so
	// none reports to a test that has ended or outlives the systems.
	var opsWG sync.WaitGroup
	t.Cleanup(opsWG.Wait)

	want := map[string]int{}     // turns recorded per user, once settled
	ids := map[string][]string{} // every event id published per user
	var published, kills, forgets int
	for r := 1; r <= chaosRounds; r++ {
		roundBegan := time.Now()
		byUser := chaosRoundTurns(r, time.Now().Truncate(time.Millisecond))
		plan := chaosRoundPlan(r, byUser)
		var all []events.Turn
		for _, u := range chaosUsers {
			if u != plan.forgotten {
				all = append(all, byUser[u]...)
			}
			for _, turn := range byUser[u] {
				ids[u] = append(ids[u], turn.ID)
			}
			want[u] += len(byUser[u])
		}
		roundTurns := len(all) + len(byUser[plan.forgotten])
		published += roundTurns
		if plan.deadLetter {
			ids[plan.forgotten] = append(ids[plan.forgotten], fmt.Sprintf("%s-r%d-bad", plan.forgotten, r))
		}

		// The reference: the same events, then the same operations one by
		// one, each on a settled system.
		if _, err := ref.publishAll(append(slices.Clone(byUser[plan.forgotten]), all...), 4); err != nil {
			t.Fatal(err)
		}
		if plan.deadLetter {
			if err := ref.chaosBadEvent(plan.forgotten, r); err != nil {
				t.Fatal(err)
			}
		}
		ref.chaosSettle(fmt.Sprintf("reference round %d ingest", r), want, 2*time.Minute, refServe)
		if plan.deadLetter {
			dl, err := ref.js.Stream(ref.ctx, events.DeadLetterStream(ref.stream))
			if err != nil {
				t.Fatal(err)
			}
			if n, err := chaosDeadLettersOf(ref.ctx, dl, ref.prefix, plan.forgotten); err != nil || n != 1 {
				t.Fatalf("reference: %d dead letters of %s before the forget, %v; want 1", n, plan.forgotten, err)
			}
		}
		refWant := want
		if plan.forgotten != "" {
			refWant = maps.Clone(want)
			refWant[plan.forgotten] = 0
		}
		for _, op := range plan.ops {
			if out, err := op.run(ref, refClient); err != nil {
				t.Fatalf("reference round %d: %s: %v (%s)", r, op.name, err, out)
			}
		}
		ref.chaosSettle(fmt.Sprintf("reference round %d", r), refWant, 2*time.Minute, refServe)

		// The chaos system: the forgotten user's events first (so that the
		// forget covers all of them), then the others while the operations
		// run and a serve process is killed.
		if _, err := chaos.publishAll(byUser[plan.forgotten], 4); err != nil {
			t.Fatal(err)
		}
		if plan.deadLetter {
			if err := chaos.chaosBadEvent(plan.forgotten, r); err != nil {
				t.Fatal(err)
			}
		}
		pubDone := make(chan error, 1)
		go func() { _, err := chaos.publishAll(all, 4); pubDone <- err }()
		var (
			opsMu  sync.Mutex
			opsOut []string
		)
		running := slices.Clone(serves) // the processes the operations meet
		for _, op := range plan.ops {
			opsWG.Add(1)
			go func() {
				defer opsWG.Done()
				if op.service {
					prober.gate.RLock()
				}
				out, err := op.run(chaos, chaosClient)
				if op.service {
					prober.gate.RUnlock()
				}
				opsMu.Lock()
				defer opsMu.Unlock()
				if err != nil {
					t.Errorf("round %d: %s failed: %v (%s)", r, op.name, err, out)
					for i, p := range running {
						t.Logf("serve %d log tail:\n%s", i, p.tail())
					}
				}
				if strings.HasPrefix(out, "{") { // forget's JSON counts
					out = strings.Join(strings.Fields(out), " ")
				} else if i := strings.LastIndexByte(out, '\n'); i >= 0 {
					out = out[i+1:]
				}
				opsOut = append(opsOut, op.name+": "+out)
			}()
		}
		waitFor(t, fmt.Sprintf("a quarter of round %d processed", r), 2*time.Minute, func() (bool, string) {
			var n int
			err := chaos.store.Pool().QueryRow(chaos.ctx, `SELECT count(*) FROM turns WHERE status = 'processed' AND event_id LIKE $1`,
				fmt.Sprintf("%%-r%d-%%", r)).Scan(&n)
			return err == nil && n >= roundTurns/4, fmt.Sprint(n, err)
		}, serves...)
		victim := r % 2
		var atKill relFigures
		func() {
			// The gate opens however this ends: a waitFor failing here
			// held it shut, and the probers and the service operations
			// blocked on it kept the test's cleanup waiting until the
			// package's timeout (the surviving serve had exited, Postgres
			// out of connections, at load 15-20).
			prober.gate.Lock()
			defer prober.gate.Unlock()
			atKill, _ = chaos.figures(published)
			serves[victim].kill()
			kills++
			// Requests sent once the gate opens must not reach the killed
			// process's subscriptions: wait until the surviving one answers.
			waitFor(t, "enrich answered after the kill", time.Minute, func() (bool, string) {
				_, err := relEnrich(chaosClient, "plain0")
				return err == nil, fmt.Sprint(err)
			}, serves[1-victim])
		}()
		serves[victim] = chaos.startServe(chaos.dbURL, args...)
		if err := <-pubDone; err != nil {
			t.Fatal(err)
		}
		opsWG.Wait()
		if plan.forgotten != "" {
			forgets++
			want[plan.forgotten] = 0
		}
		chaos.chaosSettle(fmt.Sprintf("chaos round %d", r), want, 3*time.Minute, serves...)
		settled := time.Since(roundBegan)

		// The invariants.
		recorded := 0
		for _, n := range want {
			recorded += n
		}
		f, err := chaos.figures(recorded)
		if err != nil {
			t.Fatal(err)
		}
		if f.Pending != 0 {
			t.Errorf("round %d: %d turns pending after settling", r, f.Pending)
		}
		if plan.forgotten != "" {
			left, err := chaos.chaosForgottenLeftovers(plan.forgotten, ids[plan.forgotten])
			if err != nil {
				t.Fatal(err)
			}
			for what, n := range left {
				if n != 0 {
					t.Errorf("round %d: forgotten %s still has %d in %s (all leftovers: %v)", r, plan.forgotten, n, what, left)
				}
			}
		}
		compared := 0
		for _, u := range chaosUsers {
			if want[u] == 0 {
				continue
			}
			got, err := chaos.chaosMemoryOf(u)
			if err != nil {
				t.Fatal(err)
			}
			exp, err := ref.chaosMemoryOf(u)
			if err != nil {
				t.Fatal(err)
			}
			// The workload exercises what it claims: facts and context for
			// every user (cclear's context is cleared in round 2), and the
			// cap reached by the pruned users from round 2 on.
			if len(exp.facts) == 0 || len(exp.context) == 0 && !(u == "cclear" && r == 2) {
				t.Fatalf("reference round %d: %s has %d facts and %d context items: the workload is wrong", r, u, len(exp.facts), len(exp.context))
			}
			if strings.HasPrefix(u, "prune") && r >= 2 && len(exp.context) != chaosCap {
				t.Fatalf("reference round %d: %s has %d context items, want the cap %d: the workload is wrong", r, u, len(exp.context), chaosCap)
			}
			for _, d := range []string{chaosDiff("facts", got.facts, exp.facts), chaosDiff("context items", got.context, exp.context)} {
				if d != "" {
					t.Errorf("round %d: %s differs from the crash-free reference: %s", r, u, d)
				}
			}
			compared++
		}
		if errs := prober.unanswered(); len(errs) > 0 {
			t.Errorf("round %d: %d of %d enrich requests unanswered, first: %s", r, len(errs), prober.sent.Load(), errs[0])
		}
		slices.Sort(opsOut)
		t.Logf("figures: round %d: %d turns published (%d in all); SIGKILL of serve %d with %s; settled %s after the round began; "+
			"%d users compared with the reference; turns %s; operations: %s; enrich so far %d sent, %d answered (%d degraded)",
			r, roundTurns, published, victim, atKill, settled.Round(100*time.Millisecond), compared, f,
			strings.Join(opsOut, " | "), prober.sent.Load(), prober.answered.Load(), prober.degraded.Load())
		if t.Failed() {
			break
		}
	}
	stopProbes()
	probes.Wait()
	if errs := prober.unanswered(); len(errs) > 0 {
		t.Errorf("%d of %d enrich requests unanswered, first: %s", len(errs), prober.sent.Load(), errs[0])
	}
	t.Logf("figures: %d rounds, %d turns, %d SIGKILLs, %d forgets; enrich %d sent, %d answered (%d degraded), %d unanswered; %s in all",
		chaosRounds, published, kills, forgets, prober.sent.Load(), prober.answered.Load(), prober.degraded.Load(),
		len(prober.unanswered()), time.Since(began).Round(100*time.Millisecond))
}
