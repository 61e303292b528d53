package systest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
)

// refusalWait bounds a request the server refuses: it only times out, so
// the bound is how long the test waits, generous for a busy machine (the
// server reports the violation within milliseconds).
const refusalWait = 5 * time.Second

// TestGoClientTellsEveryRefusal runs bob's Go frontend against a
// nats-server with the documented permissions of docs/protocol.md (bob's,
// alice's and memoryd's) and shows that, connected with FrontendInbox,
// every request and turn the server refuses it is told as refused, however
// many run at once on the one connection, and nothing else is. nats.go
// keeps only a connection's last violation: a review saw 10 of 30
// concurrent refused requests told and the others shown as plain
// timeouts, which Publish's doc tells a frontend to send again for ever.
func TestGoClientTellsEveryRefusal(t *testing.T) {
	t.Parallel()
	light(t)
	var frontend, memoryd string
	for _, b := range permDocBlocks(t) {
		switch {
		case b.kind == "frontend" && b.file == "docs/protocol.md" && frontend == "":
			frontend = b.text
		case b.kind == "memoryd" && memoryd == "":
			memoryd = b.text
		}
	}
	if frontend == "" || memoryd == "" {
		t.Fatal("docs/protocol.md has no marked frontend permissions block, or the docs no memoryd block")
	}
	bobBlock := strings.ReplaceAll(frontend, "alice", "bob")
	m := permInbox.FindStringSubmatch(bobBlock)
	if m == nil {
		t.Fatalf("the frontend block grants no inbox:\n%s", frontend)
	}
	bobName, ok := strings.CutPrefix(m[1], "_INBOX_")
	if !ok {
		t.Fatalf("the frontend block's inbox %q is not a frontend inbox (_INBOX_<name>)", m[1])
	}
	dir := t.TempDir()
	url := permStartNATS(t, dir, permConf(t, dir, memoryd,
		permUser{"alice_frontend", "alice-pw", frontend}, permUser{"bob_frontend", "bob-pw", bobBlock}))

	// The frontend's own handler, passed before FrontendInbox as its doc
	// says: it still sees every violation.
	bobErrs := &permErrors{}
	bob, err := nats.Connect(url, nats.UserInfo("bob_frontend", "bob-pw"), nats.ErrorHandler(bobErrs.handler),
		events.FrontendInbox(bobName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bob.Close)
	bobJS, err := jetstream.New(bob)
	if err != nil {
		t.Fatal(err)
	}
	client, publisher := events.NewClient(bob, ""), events.NewPublisher(bobJS, "")

	t.Run("concurrent", func(t *testing.T) {
		// Requests and turns of other users than bob, all at once on bob's
		// connection; two requests share each subject.
		const requests, turns = 30, 10
		errs := make([]error, requests+turns)
		subjects := make([]string, requests+turns)
		var wg sync.WaitGroup
		for i := range requests {
			user := fmt.Sprintf("alice%d", i/2)
			subjects[i] = client.Subject("stats", user)
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), refusalWait)
				defer cancel()
				_, errs[i] = client.Stats(ctx, user)
			})
		}
		for i := requests; i < requests+turns; i++ {
			user := fmt.Sprintf("carol%d", i)
			subjects[i] = events.TurnSubject(events.DefaultPrefix, user)
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), refusalWait)
				defer cancel()
				_, errs[i] = publisher.Publish(ctx, events.Turn{ID: fmt.Sprintf("t%d", i), UserID: user,
					UserMessage: "hello", Timestamp: time.Now()})
			})
		}
		wg.Wait()
		told := 0
		for i, err := range errs {
			if errors.Is(err, events.ErrRequestRefused) && !errors.Is(err, events.ErrReplyRefused) && strings.Contains(err.Error(), `"`+subjects[i]+`"`) {
				told++
				continue
			}
			t.Errorf("refused %s: %v; want it told as refused (events.ErrRequestRefused), naming the subject", subjects[i], err)
		}
		if told != len(errs) {
			t.Errorf("%d of %d refused requests and turns told as refused (violations %d)", told, len(errs), len(bobErrs.all()))
		}
		bobErrs.waitRefused(t, "Publish", subjects)
	})

	t.Run("forget not granted", func(t *testing.T) {
		// The documented frontend credential has no memory.forget: bob's
		// Forget, without a deadline, waited DefaultForgetTimeout (2
		// minutes) though the violation was reported at once (found by a
		// Go frontend walk). It ends at the refusal, as nats.js's does.
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			_, err := client.Forget(context.Background(), "bob")
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, events.ErrRequestRefused) || errors.Is(err, context.DeadlineExceeded) ||
				!strings.Contains(err.Error(), `"`+client.Subject("forget", "bob")+`"`) {
				t.Errorf("bob's Forget, not granted: %v after %v; want events.ErrRequestRefused at once, naming the subject", err, time.Since(start))
			}
		case <-time.After(refusalWait):
			t.Fatalf("bob's Forget, not granted: still waiting after %v, the refusal reported", refusalWait)
		}
	})

	t.Run("unrelated", func(t *testing.T) {
		// A request that times out for another reason (memoryd's user takes
		// bob's stats and never answers), after violations of other
		// subjects were reported on the connection, is a plain timeout:
		// Publish's doc calls a refusal final.
		md, err := nats.Connect(url, nats.UserInfo("memoryd", "memoryd-pw"))
		if err != nil {
			t.Fatal(err)
		}
		defer md.Close()
		silent, err := md.SubscribeSync(client.Subject("stats", "bob"))
		if err != nil {
			t.Fatal(err)
		}
		if err := md.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := bob.Publish(client.Subject("stats", "alice"), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := bob.SubscribeSync(client.Subject("stats", "bob")); err != nil {
			t.Fatal(err)
		}
		bobErrs.waitRefused(t, "Subscription", []string{client.Subject("stats", "bob")})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = client.Stats(ctx, "bob")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrPermissionViolation) {
			t.Errorf("bob's own request timing out after violations of other subjects: %v; want a plain timeout", err)
		}
		if _, err := silent.NextMsg(refusalWait); err != nil {
			t.Errorf("bob's request did not reach memoryd's user, so it did not test a timeout: %v", err)
		}
	})

	t.Run("inbox then subject", func(t *testing.T) {
		// bob's credential without its inbox prefix: the reply's inbox is
		// refused, then, while the request waits, another subject.
		wrongErrs := &permErrors{}
		wrong, err := nats.Connect(url, nats.UserInfo("bob_frontend", "bob-pw"), nats.ErrorHandler(wrongErrs.handler),
			events.TrackViolations())
		if err != nil {
			t.Fatal(err)
		}
		defer wrong.Close()
		wc := events.NewClient(wrong, "")
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), refusalWait)
			defer cancel()
			_, err := wc.Stats(ctx, "bob")
			done <- err
		}()
		waitViolation(t, wrongErrs, `Subscription to "`+nats.InboxPrefix)
		if err := wrong.Publish(wc.Subject("stats", "alice"), nil); err != nil {
			t.Fatal(err)
		}
		wrongErrs.waitRefused(t, "Publish", []string{wc.Subject("stats", "alice")})
		if err := wrong.LastError(); err == nil || !strings.Contains(err.Error(), wc.Subject("stats", "alice")) {
			t.Fatalf("the connection's last error is %v; the test needs the other subject's violation last", err)
		}
		if err := <-done; !errors.Is(err, events.ErrReplyRefused) || errors.Is(err, events.ErrRequestRefused) {
			t.Errorf("bob's Go client without its inbox prefix, another subject refused after: %v; want the reply refused", err)
		}
	})
}

// waitViolation waits until errs holds a violation containing words.
func waitViolation(t *testing.T, errs *permErrors, words string) {
	t.Helper()
	permWait(t, "a violation "+words, func() bool {
		for _, e := range errs.all() {
			if strings.Contains(e, words) {
				return true
			}
		}
		return false
	})
}
