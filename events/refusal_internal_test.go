package events

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events/eventstest"
)

// refusalServer runs a private nats-server whose user u (password p) may
// publish only under "ok." and subscribe only to the default inbox, and
// whose user r answers under "ok.".
func refusalServer(t *testing.T) string {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte(`authorization { users: [
  { user: u, password: p, permissions: { publish: { allow: ["ok.>"] }, subscribe: { allow: ["_INBOX.>"] } } }
  { user: r, password: p, permissions: { publish: { allow: ["_INBOX.>"] }, subscribe: { allow: ["ok.>"] } } }
] }
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return eventstest.PrivateServer(t, func(port int) []string {
		return []string{"-c", conf, "-a", "127.0.0.1", "-p", strconv.Itoa(port)}
	})
}

// refusalWaitsLeft fails when nc's log still holds a request's wait or
// watch once every request has its answer.
func refusalWaitsLeft(t *testing.T, nc *nats.Conn) {
	t.Helper()
	l := violationsOf(nc, false)
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.waiting) != 0 || len(l.watching) != 0 {
		t.Errorf("after every request answered, %d waits and %d watched subjects are kept", len(l.waiting), len(l.watching))
	}
}

// TestRefusedRequestEndsAtOnce: on a connection made with TrackViolations,
// a request or turn whose subject the server refuses ends as soon as the
// refusal is reported, with ErrRequestRefused, rather than waiting out its
// deadline (a frontend's Forget without the forget permission returned
// after DefaultForgetTimeout, 2 minutes, the violation long printed).
func TestRefusedRequestEndsAtOnce(t *testing.T) {
	url := refusalServer(t)
	seen := &seenErrors{}
	nc, err := nats.Connect(url, nats.UserInfo("u", "p"), nats.ErrorHandler(seen.handler), TrackViolations())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const bound = 15 * time.Second // far under the deadlines the calls have

	type result struct {
		err  error
		took time.Duration
	}
	within := func(what string, call func() error) error {
		t.Helper()
		done := make(chan result, 1)
		go func() {
			start := time.Now()
			err := call()
			done <- result{err, time.Since(start)}
		}()
		select {
		case r := <-done:
			t.Logf("%s: %v after %v", what, r.err, r.took.Round(time.Millisecond))
			return r.err
		case <-time.After(bound):
			t.Fatalf("%s: still waiting %v after its subject was refused", what, bound)
			return nil
		}
	}
	refusedNow := func(what, subject string, err error) {
		t.Helper()
		if !errors.Is(err, ErrRequestRefused) || !errors.Is(err, nats.ErrPermissionViolation) || errors.Is(err, ErrReplyRefused) {
			t.Errorf("%s: %v; want ErrRequestRefused", what, err)
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v; it did not time out, nor did the caller cancel it", what, err)
		}
		if err != nil && !strings.Contains(err.Error(), `"`+subject+`"`) {
			t.Errorf("%s: %v; want the refused subject %q named", what, err, subject)
		}
	}

	client := NewClient(nc, "no")
	err = within("Forget without a deadline (DefaultForgetTimeout)", func() error {
		_, err := client.Forget(context.Background(), "alice")
		return err
	})
	refusedNow("Forget", client.Subject("forget", "alice"), err)

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	err = within("Publish with a minute's deadline", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := NewPublisher(js, "no").Publish(ctx, Turn{ID: "t1", UserID: "alice", UserMessage: "hello", Timestamp: time.Now()})
		return err
	})
	refusedNow("Publish", TurnSubject("no", "alice"), err)
	refusalWaitsLeft(t, nc)
}

// TestRefusedAmongAnswered: of requests at once on one tracked connection,
// each refused one ends at its own refusal (two share each subject), and
// none answered or timing out is ended by another subject's.
func TestRefusedAmongAnswered(t *testing.T) {
	url := refusalServer(t)
	responder, err := nats.Connect(url, nats.UserInfo("r", "p"))
	if err != nil {
		t.Fatal(err)
	}
	defer responder.Close()
	// Slow answers, so that the refusals are reported while they wait.
	if _, err := responder.Subscribe("ok.stats.*", func(m *nats.Msg) {
		time.Sleep(300 * time.Millisecond)
		_ = m.Respond([]byte(`{"user_id":"x"}`))
	}); err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{"ok.search.*", "ok.turns.*"} { // never answer
		if _, err := responder.SubscribeSync(subject); err != nil {
			t.Fatal(err)
		}
	}
	if err := responder.Flush(); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, nats.UserInfo("u", "p"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}), TrackViolations())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	refused, answered := NewClient(nc, "no"), NewClient(nc, "ok")

	const n = 10
	const deadline = 20 * time.Second
	var wg sync.WaitGroup
	refusedErrs, answeredErrs := make([]error, n), make([]error, n)
	took := make([]time.Duration, n)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var silentErr, silentTurnErr error
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, silentErr = answered.Search(ctx, SearchRequest{UserID: "silent", Query: "x"})
	})
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, silentTurnErr = NewPublisher(js, "ok").Publish(ctx, Turn{ID: "t1", UserID: "silent", UserMessage: "hello", Timestamp: time.Now()})
	})
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			_, refusedErrs[i] = refused.Stats(ctx, fmt.Sprintf("user%d", i/2))
			took[i] = time.Since(start)
		})
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			_, answeredErrs[i] = answered.Stats(ctx, fmt.Sprintf("user%d", i))
		})
	}
	wg.Wait()
	for i := range n {
		if !errors.Is(refusedErrs[i], ErrRequestRefused) || errors.Is(refusedErrs[i], context.DeadlineExceeded) {
			t.Errorf("refused request %d: %v after %v; want ErrRequestRefused at once", i, refusedErrs[i], took[i])
		} else if took[i] > deadline/2 {
			t.Errorf("refused request %d took %v", i, took[i])
		}
		if answeredErrs[i] != nil {
			t.Errorf("answered request %d: %v", i, answeredErrs[i])
		}
	}
	// A request no one answers times out: context.DeadlineExceeded
	// (errors.Is), not nats.ErrTimeout, and no refusal.
	if !errors.Is(silentErr, context.DeadlineExceeded) || errors.Is(silentErr, nats.ErrPermissionViolation) {
		t.Errorf("a request not answered: %v; want a plain timeout (context.DeadlineExceeded)", silentErr)
	}
	if !errors.Is(silentTurnErr, context.DeadlineExceeded) || errors.Is(silentTurnErr, nats.ErrPermissionViolation) {
		t.Errorf("a turn not acknowledged: %v; want a plain timeout (context.DeadlineExceeded), as Publish's doc says", silentTurnErr)
	}
	refusalWaitsLeft(t, nc)
}

// TestRefusedUntrackedWaits: without TrackViolations the client is not
// told of a refusal while it waits: the request waits out its deadline,
// and only then reads the connection's last error, as documented.
func TestRefusedUntrackedWaits(t *testing.T) {
	reported := make(chan struct{})
	var once sync.Once
	nc, err := nats.Connect(refusalServer(t), nats.UserInfo("u", "p"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			once.Do(func() { close(reported) })
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// The deadline passes once the refusal has been reported and the
	// request has gone on waiting past a round trip to the server after
	// it: a fixed second let a refusal delivered later, on a loaded
	// machine, find a plain timeout.
	end := make(chan struct{})
	var endOnce sync.Once
	endNow := func() { endOnce.Do(func() { close(end) }) }
	t.Cleanup(endNow)
	ctx := deadlineAt{Context: context.Background(), done: end, at: time.Now().Add(time.Hour)}
	result := make(chan error, 1)
	go func() {
		_, err := NewClient(nc, "no").Stats(ctx, "alice")
		result <- err
	}()
	select {
	case <-reported:
	case <-time.After(time.Minute):
		t.Fatal("no refusal reported a minute after the request")
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-result:
		t.Fatalf("refused on a connection without TrackViolations: %v before its deadline; want it to wait", err)
	default:
	}
	endNow()
	if err := <-result; !errors.Is(err, ErrRequestRefused) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("refused on a connection without TrackViolations: %v; want the timeout, told as refused", err)
	}
}

// deadlineAt is a context whose deadline, said to be at, passes when done
// is closed.
type deadlineAt struct {
	context.Context
	done <-chan struct{}
	at   time.Time
}

func (c deadlineAt) Deadline() (time.Time, bool) { return c.at, true }
func (c deadlineAt) Done() <-chan struct{}       { return c.done }
func (c deadlineAt) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// TestNoRespondersNamesSubject: a request no memoryd answers wraps
// nats.ErrNoResponders and names the whole subject, the user token
// included, which protocol.md tells a frontend to check.
func TestNoRespondersNamesSubject(t *testing.T) {
	nc, err := nats.Connect(refusalServer(t), nats.UserInfo("u", "p"), TrackViolations())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := NewClient(nc, "ok")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reply, err := c.Enrich(ctx, EnrichRequest{UserID: "alice@example.com", Message: "hi"})
	subject := c.Subject("enrich", "alice@example.com")
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("enrich with no memoryd: %v; want nats.ErrNoResponders", err)
	}
	if !strings.Contains(err.Error(), subject) {
		t.Errorf("enrich with no memoryd: %q; want the subject %s named", err, subject)
	}
	if !reply.Degraded {
		t.Errorf("enrich with no memoryd: reply %+v; want it degraded", reply)
	}
}
