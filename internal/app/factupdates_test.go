package app

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// fuRow is what the suite compares of a stored fact, across runs too.
type fuRow struct {
	Value, EventID, ConversationID string
	SourceAt                       time.Time
}

func (r fuRow) String() string {
	return fmt.Sprintf("%q (%s, %s, %s)", r.Value, r.EventID, r.ConversationID, r.SourceAt.UTC().Format(time.RFC3339Nano))
}

// fuFacts is user → key → row.
type fuFacts map[string]map[string]fuRow

// fuRun is one way of feeding the set to a fresh app.
type fuRun struct {
	name string
	// rules: the offline rules extractor instead of the scripted model,
	// over the turns it reads (fuUser.rulesView).
	rules bool
	// seed shuffles all turns of all users together; 0 publishes each
	// user's turns one at a time in file order, waiting for each (the
	// users in parallel), so that history is deterministic.
	seed uint64
	// publishers publish the shuffled turns concurrently.
	publishers int
	// debounce is Worker.ExtractDebounce: with it a conversation's pending
	// turns are extracted together, through the batch prompt.
	debounce time.Duration
}

// TestFactUpdates replays the fact-update test set (testdata/factupdates)
// through whole apps (real Postgres and NATS, the scripted model) in file
// order and in seeded shuffles, and requires every run to leave exactly the
// expected facts: no stale value, none lost, no duplicated list item, and
// the same rows in every run. The in-order run also checks each key's
// history and then replays the stream with reset; one shuffled run is
// published concurrently and then replayed with the other extractor (the
// rules) for the users whose turns the rules read; a rules run feeds those
// users' turns to the rules extractor alone.
func TestFactUpdates(t *testing.T) {
	t.Parallel()
	users := loadFactUpdates(t)
	var (
		mu      sync.Mutex
		results = map[string]fuFacts{}
	)
	record := func(name string, f fuFacts) {
		mu.Lock()
		defer mu.Unlock()
		results[name] = f
	}
	runs := []fuRun{
		{name: "in-order"},
		{name: "shuffle-1", seed: 1, publishers: 1},
		{name: "shuffle-2-concurrent", seed: 2, publishers: 4},
		{name: "shuffle-3-bursts", seed: 3, publishers: 1, debounce: 300 * time.Millisecond},
		{name: "rules-shuffle-4", seed: 4, publishers: 1, rules: true},
	}
	t.Run("runs", func(t *testing.T) {
		for _, r := range runs {
			t.Run(r.name, func(t *testing.T) {
				t.Parallel()
				fuExecute(t, users, r, record)
			})
		}
	})
	// Every run, replay and extractor left the same rows (the rules run
	// only for the users whose every turn it read). Checked also when a
	// run missed its expectations: runs that disagree with each other
	// point at an order-dependent result.
	base, ok := results["in-order"]
	if !ok {
		return // the in-order run failed before reading facts
	}
	rulesAll := map[string]bool{}
	for _, u := range rulesUsers(users) {
		rulesAll[u.User] = true
	}
	for name, got := range results {
		for user, facts := range got {
			if strings.HasPrefix(name, "rules") && !rulesAll[user] {
				continue
			}
			for _, d := range rowDiff(facts, base[user]) {
				t.Errorf("%s: %s.%s differs from the in-order run's", name, user, d)
			}
		}
	}
}

// rowDiff lists the keys whose rows differ between a and b, each with
// both rows.
func rowDiff(a, b map[string]fuRow) []string {
	var out []string
	for k := range mergeKeys(a, b) {
		ra, aok := a[k]
		rb, bok := b[k]
		if aok != bok || !maps2Equal(map[string]fuRow{k: ra}, map[string]fuRow{k: rb}) {
			out = append(out, fmt.Sprintf("%s: %v (present %v) vs %v (present %v)", k, ra, aok, rb, bok))
		}
	}
	slices.Sort(out)
	return out
}

func maps2Equal(a, b map[string]fuRow) bool {
	if len(a) != len(b) {
		return false
	}
	for k, r := range a {
		o, ok := b[k]
		if !ok || o.Value != r.Value || o.EventID != r.EventID || o.ConversationID != r.ConversationID || !o.SourceAt.Equal(r.SourceAt) {
			return false
		}
	}
	return true
}

// fuExecute runs r on a fresh app and records the facts each phase left
// under the phase's name.
func fuExecute(t *testing.T, all []fuUser, r fuRun, record func(string, fuFacts)) {
	users := all
	if r.rules {
		users = nil
		for _, u := range all {
			if view, ok := u.rulesView(); ok {
				users = append(users, view)
			}
		}
	}
	cfg := testConfig(t)
	var model *scriptedModel
	if !r.rules {
		model = newScriptedModel(t, users)
		cfg.LLM.BaseURL, cfg.LLM.Model = model.URL(), "scripted"
	}
	cfg.Worker.ExtractDebounce = r.debounce
	// The ingest consumer and the workers only: the suite reads the store,
	// never asks enrich (whose pool and prepared statements, opened on
	// start, cost Postgres CPU in each of the runs' apps).
	cfg.Role = RoleIngest
	a := fuStart(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	if r.seed == 0 {
		fuPublishInOrder(t, ctx, a, users)
	} else {
		fuPublishShuffled(t, ctx, a, users, r.seed, r.publishers)
	}
	facts := fuRead(t, ctx, a, users)
	fuScore(t, r.name, users, facts)
	if r.seed == 0 {
		fuCheckHistory(t, ctx, a, users)
	} else {
		fuCheckProvenance(t, ctx, a, users)
	}
	if model != nil {
		defer model.check(t, users, r.debounce > 0) // after the replay too
	}
	record(r.name, facts)

	switch {
	case r.seed == 0:
		// A replay with reset rebuilds the same facts, in whatever order
		// its jobs run.
		if _, err := a.Replay(ctx, ReplayOptions{Reset: true}); err != nil {
			t.Fatalf("replay: %v", err)
		}
		if err := a.WaitExtracted(ctx, nil, nil); err != nil {
			t.Fatalf("replay: %v", err)
		}
		fuNoneFailed(t, ctx, a, "")
		replayed := fuRead(t, ctx, a, users)
		fuScore(t, r.name+"+replay", users, replayed)
		fuCheckProvenance(t, ctx, a, users)
		record(r.name+"+replay", replayed)
	case r.publishers > 1:
		// The same stream replayed with the other extractor: the rules
		// users' memory rebuilt by the rules must be the model's, row for
		// row, and nobody else's may change.
		if err := a.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		rcfg := cfg
		rcfg.LLM.BaseURL, rcfg.LLM.Model = "", ""
		b := fuStart(t, rcfg)
		ru := rulesUsers(users)
		names := make([]string, len(ru))
		for i, u := range ru {
			names[i] = u.User
		}
		if _, err := b.Replay(ctx, ReplayOptions{Users: names, Reset: true}); err != nil {
			t.Fatalf("replay with the rules: %v", err)
		}
		if err := b.WaitExtracted(ctx, names, nil); err != nil {
			t.Fatalf("replay with the rules: %v", err)
		}
		fuNoneFailed(t, ctx, b, "")
		after := fuRead(t, ctx, b, users)
		fuScore(t, r.name+"+rules-replay", ru, after)
		for _, u := range users {
			if !maps2Equal(after[u.User], facts[u.User]) {
				t.Errorf("after the rules replay of %v, %s's facts are %v; the model left %v", names, u.User, after[u.User], facts[u.User])
			}
		}
	}
}

// fuStart starts an app on cfg; the test's cleanup stops it.
func fuStart(t *testing.T, cfg Config) *App {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop(context.Background()) })
	return a
}

func rulesUsers(users []fuUser) []fuUser {
	var out []fuUser
	for _, u := range users {
		if u.Rules {
			out = append(out, u)
		}
	}
	return out
}

func fuPublisher(t *testing.T, a *App) *events.Publisher {
	t.Helper()
	js, err := jetstream.New(a.nc)
	if err != nil {
		t.Fatal(err)
	}
	return events.NewPublisher(js, a.cfg.Prefix)
}

// fuPublishInOrder publishes each user's turns in file order, one at a
// time, waiting until each is processed before the next; users run in
// parallel.
func fuPublishInOrder(t *testing.T, ctx context.Context, a *App, users []fuUser) {
	t.Helper()
	pub := fuPublisher(t, a)
	errs := make(chan error, len(users))
	var wg sync.WaitGroup
	for _, u := range users {
		wg.Go(func() {
			for i, tr := range u.Turns {
				if _, err := pub.Publish(ctx, u.turnEvent(tr)); err != nil {
					errs <- fmt.Errorf("publish %s: %w", tr.ID, err)
					return
				}
				if err := a.WaitProcessed(ctx, u.User, i+1, nil); err != nil {
					errs <- fmt.Errorf("%s after %s: %w", u.User, tr.ID, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// fuPublishShuffled publishes all turns of all users in one seeded
// shuffle, each user's on one of publishers goroutines (users dealt
// round-robin), then waits until every user's turns are processed. Turns
// of one user stamped with the same time keep their file order: a tie is
// decided by the order a frontend published them in (as a frontend does,
// the statement made later published later), which the shuffle must not
// invert; every other turn arrives out of order.
func fuPublishShuffled(t *testing.T, ctx context.Context, a *App, users []fuUser, seed uint64, publishers int) {
	t.Helper()
	var (
		turns []events.Turn
		owner = map[string]int{} // user → publisher
	)
	for i, u := range users {
		owner[u.User] = i % publishers
		for _, tr := range u.Turns {
			turns = append(turns, u.turnEvent(tr))
		}
	}
	rng := rand.New(rand.NewPCG(seed, seed))
	rng.Shuffle(len(turns), func(i, j int) { turns[i], turns[j] = turns[j], turns[i] })
	fuKeepTieOrder(turns, users)
	pub := fuPublisher(t, a)
	errs := make(chan error, publishers)
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for i := range turns {
				if owner[turns[i].UserID] != p {
					continue
				}
				if _, err := pub.Publish(ctx, turns[i]); err != nil {
					errs <- fmt.Errorf("publish %s: %w", turns[i].ID, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, u := range users {
		if err := a.WaitProcessed(ctx, u.User, len(u.Turns), nil); err != nil {
			t.Fatalf("%s: %v", u.User, err)
		}
	}
}

// fuKeepTieOrder puts the turns of each user stamped with the same time
// back in their file order, in the places the shuffle gave them.
func fuKeepTieOrder(turns []events.Turn, users []fuUser) {
	type group struct {
		user string
		at   time.Time
	}
	rank := map[string]int{} // event id → place in its user's file
	for _, u := range users {
		for i, tr := range u.Turns {
			rank[u.turnEvent(tr).ID] = i
		}
	}
	places := map[group][]int{}
	for i, tr := range turns {
		g := group{tr.UserID, tr.Timestamp.UTC()}
		places[g] = append(places[g], i)
	}
	for _, at := range places {
		members := make([]events.Turn, len(at))
		for j, i := range at {
			members[j] = turns[i]
		}
		slices.SortFunc(members, func(a, b events.Turn) int { return rank[a.ID] - rank[b.ID] })
		for j, i := range at {
			turns[i] = members[j]
		}
	}
}

// fuNoneFailed fails the test when any turn of user (every user's when
// "") failed extraction: WaitExtracted counts only pending turns.
func fuNoneFailed(t *testing.T, ctx context.Context, a *App, user string) {
	t.Helper()
	s, err := a.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	if st.TurnsFailed > 0 {
		t.Fatalf("%d turn(s) failed extraction", st.TurnsFailed)
	}
}

// fuRead reads every user's facts from the store.
func fuRead(t *testing.T, ctx context.Context, a *App, users []fuUser) fuFacts {
	t.Helper()
	s, err := a.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := fuFacts{}
	for _, u := range users {
		facts, err := s.Facts(ctx, u.User, 0)
		if err != nil {
			t.Fatal(err)
		}
		out[u.User] = map[string]fuRow{}
		for _, f := range facts {
			out[u.User][f.Key] = fuRow{Value: f.Value, EventID: f.EventID, ConversationID: f.ConversationID, SourceAt: f.SourceAt}
		}
	}
	return out
}

// fuScore compares the facts with the expected ones and with the
// reference resolver's sources, prints the run's summary line and fails
// the test on any difference. A value present but expected gone or
// replaced is stale, an expected value missing is lost (a wrong value of a
// single-valued key is both), a list item stored more than once is
// duplicated; anything else that differs (item order, a fact's source
// event) is an error of its own.
func fuScore(t *testing.T, run string, users []fuUser, got fuFacts) {
	t.Helper()
	var stale, lost, dup, turns int
	for _, u := range users {
		turns += len(u.Turns)
		ref := refFinal(u)
		keys := map[string]bool{}
		for k := range u.Expect.Facts {
			keys[k] = true
		}
		for k := range got[u.User] {
			keys[k] = true
		}
		for key := range keys {
			want, wok := u.Expect.Facts[key]
			row, gok := got[u.User][key]
			s, l, d := valueDiff(key, want, wok, row.Value, gok)
			stale, lost, dup = stale+s, lost+l, dup+d
			if want != row.Value || wok != gok {
				t.Errorf("%s: %s.%s = %v (present %v), want %q (present %v)", run, u.User, key, row, gok, want, wok)
				continue
			}
			if !gok {
				continue
			}
			// The source of a single value is the latest turn that set
			// it; of a list, a turn that added or set one of its items.
			tr, ok := u.event(row.EventID)
			switch {
			case !fuListKeys[key] && row.EventID != ref[key].event:
				t.Errorf("%s: %s.%s cites event %q, want %q", run, u.User, key, row.EventID, ref[key].event)
			case !ok || !states(tr, key, "add", "set"):
				t.Errorf("%s: %s.%s cites event %q, which adds or sets no %s", run, u.User, key, row.EventID, key)
			case !row.SourceAt.Equal(tr.Timestamp) || row.ConversationID != tr.Conversation:
				t.Errorf("%s: %s.%s = %v, but its event %s is at %s in conversation %q", run, u.User, key, row, tr.ID, tr.Timestamp, tr.Conversation)
			}
		}
	}
	t.Logf("factupdates: order=%s users=%d turns=%d stale=%d lost=%d duplicated=%d", run, len(users), turns, stale, lost, dup)
	if stale+lost+dup > 0 {
		t.Errorf("%s: stale=%d lost=%d duplicated=%d, want 0/0/0", run, stale, lost, dup)
	}
}

// valueDiff counts the stale, lost and duplicated values of one key.
func valueDiff(key, want string, wok bool, got string, gok bool) (stale, lost, dup int) {
	if !fuListKeys[key] {
		if gok && (!wok || got != want) {
			stale++
		}
		if wok && (!gok || got != want) {
			lost++
		}
		return stale, lost, dup
	}
	wantItems := map[string]bool{}
	if wok {
		for _, it := range splitItems(want) {
			wantItems[itemID(it)] = true
		}
	}
	seen := map[string]int{}
	if gok {
		for _, it := range splitItems(got) {
			id := itemID(it)
			seen[id]++
			switch {
			case seen[id] > 1:
				dup++
			case !wantItems[id]:
				stale++
			}
		}
	}
	for id := range wantItems {
		if seen[id] == 0 {
			lost++
		}
	}
	return stale, lost, dup
}

// states reports whether the turn's scripted reply has one of ops on key.
func states(tr fuTurn, key string, ops ...string) bool {
	for _, it := range tr.Reply.Facts {
		if it.Key == key && slices.Contains(ops, it.Op) {
			return true
		}
	}
	return false
}

// fuCheckHistory compares each user's fact history with the expected
// one: per key, the operations and source events of its changes, oldest
// first. Consecutive entries of the same operation and event are one
// change (a turn adding two items may be recorded per item or at once).
func fuCheckHistory(t *testing.T, ctx context.Context, a *App, users []fuUser) {
	t.Helper()
	s, err := a.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		changes, err := s.FactHistory(ctx, u.User)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		for _, c := range changes {
			e := c.Op + " " + c.EventID
			if h := got[c.Key]; len(h) == 0 || h[len(h)-1] != e {
				got[c.Key] = append(h, e)
			}
		}
		for key := range mergeKeys(got, u.Expect.History) {
			if !slices.Equal(got[key], u.Expect.History[key]) {
				t.Errorf("in-order: %s.%s history = %v, want %v", u.User, key, got[key], u.Expect.History[key])
			}
		}
	}
}

func mergeKeys[V any](a, b map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// fuCheckProvenance: whatever the order, the newest history entry of each
// fact holds its current value and cites a turn of the user that stated
// the key (not a delete).
func fuCheckProvenance(t *testing.T, ctx context.Context, a *App, users []fuUser) {
	t.Helper()
	s, err := a.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		for key, want := range u.Expect.Facts {
			h, _, err := s.KeyHistory(ctx, store.KeyHistoryQuery{UserID: u.User, Key: key, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(h) == 0 || h[0].NewValue == nil || *h[0].NewValue != want {
				t.Errorf("%s.%s: newest history entry %s, want one with the value %q", u.User, key, fmtChange(h), want)
				continue
			}
			tr, ok := u.event(h[0].EventID)
			if !ok || !states(tr, key, "set", "add", "remove") {
				t.Errorf("%s.%s: newest history entry %s cites no turn that changed %s", u.User, key, fmtChange(h), key)
			}
			if !fuListKeys[key] && !slices.Contains(tr.Reply.Facts, fuItem{Op: "set", Key: key, Value: want}) {
				t.Errorf("%s.%s: newest history entry %s cites %s, which does not set %q", u.User, key, fmtChange(h), tr.ID, want)
			}
		}
	}
}

func fmtChange(h []store.FactChange) string {
	if len(h) == 0 {
		return "none"
	}
	c := h[0]
	v := "<nil>"
	if c.NewValue != nil {
		v = *c.NewValue
	}
	return fmt.Sprintf("{%s %q %s}", c.Op, v, c.EventID)
}

// TestValueDiff: how the suite counts a key's stale, lost and duplicated
// values.
func TestValueDiff(t *testing.T) {
	for _, c := range []struct {
		name, key, want string
		wok             bool
		got             string
		gok             bool
		stale, lost     int
		dup             int
	}{
		{"single equal", "location", "Porto", true, "Porto", true, 0, 0, 0},
		{"single replaced", "location", "Porto", true, "Lisbon", true, 1, 1, 0},
		{"single kept after delete", "car", "", false, "Golf", true, 1, 0, 0},
		{"single missing", "diet", "vegan", true, "", false, 0, 1, 0},
		{"both absent", "diet", "", false, "", false, 0, 0, 0},
		{"list equal", "allergies", "peanuts, shellfish", true, "peanuts, shellfish", true, 0, 0, 0},
		{"list order only", "allergies", "peanuts, shellfish", true, "shellfish, peanuts", true, 0, 0, 0},
		{"list item kept after remove", "pets", "Miso", true, "Miso, Tofu", true, 1, 0, 0},
		{"list item lost", "pets", "Miso, Biscuit", true, "Miso", true, 0, 1, 0},
		{"list duplicate by identity", "languages", "English", true, "English, english ", true, 0, 0, 1},
		{"list gone", "children", "Mia", true, "", false, 0, 1, 0},
		{"list kept after delete", "pets", "", false, "Pixel, Clover", true, 2, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, l, d := valueDiff(c.key, c.want, c.wok, c.got, c.gok)
			if s != c.stale || l != c.lost || d != c.dup {
				t.Errorf("valueDiff = stale %d lost %d dup %d, want %d %d %d", s, l, d, c.stale, c.lost, c.dup)
			}
		})
	}
}
