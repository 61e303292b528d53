package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestMain lets tests run this test binary as the memoryd binary (a real
// process that can be SIGKILLed) without a separate build.
func TestMain(m *testing.M) {
	if os.Getenv("MEMORYD_TEST_EXEC") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// startServe starts `memoryd serve` as a child process.
func startServe(t *testing.T, dbURL, prefix, stream string, extra ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	args := append([]string{"serve", "--database-url", dbURL, "--nats-url", eventstest.URL(), "--prefix", prefix, "--stream", stream,
		"--log-format", "json", "--workers", "8", "--batch-size", "50", "--job-timeout", "2s", "--ack-wait", "2s"}, extra...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "MEMORYD_TEST_EXEC=1")
	var logs bytes.Buffer
	cmd.Stderr, cmd.Stdout = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, &logs
}

// TestScaleOutSurvivesSIGKILL runs three serve processes on one stream and
// database, publishes 3,000 turns, SIGKILLs one process half way, and checks
// that every turn was processed exactly once in effect.
func TestScaleOutSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	t.Parallel()
	ctx := context.Background()
	_, dbURL := storetest.Schema(t)
	s := storetest.Open(t, dbURL) // migrated before the processes race to do it
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.EnsureStream(ctx, js, events.StreamConfig{Prefix: prefix, Stream: stream}); err != nil {
		t.Fatal(err)
	}
	var procs []*exec.Cmd
	var logs []*bytes.Buffer
	for range 3 {
		p, l := startServe(t, dbURL, prefix, stream)
		procs, logs = append(procs, p), append(logs, l)
	}

	const users, perUser = 60, 50
	pub := events.NewPublisher(js, prefix)
	var wg sync.WaitGroup
	errs := make(chan error, users)
	for u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perUser {
				user := fmt.Sprintf("u%02d", u)
				_, err := pub.Publish(ctx, events.Turn{ID: fmt.Sprintf("%s-%d", user, i), UserID: user,
					UserMessage: fmt.Sprintf("message %d: my favorite color is c%d", i, i), AssistantResponse: "ok",
					Timestamp: time.Date(2026, 11, 21, 0, 0, i, 0, time.UTC)})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	const total = users * perUser

	deadline := time.Now().Add(3 * time.Minute)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	waitStats := func(what string, cond func(processed int64) bool) {
		t.Helper()
		for ; ; <-tick.C {
			st, err := s.Stats(ctx, "")
			if err == nil && cond(st.TurnsProcessed) {
				return
			}
			if time.Now().After(deadline) {
				for i, l := range logs {
					t.Logf("process %d log tail:\n%s", i, tail(l.String(), 2000))
				}
				t.Fatalf("timed out waiting for %s: %+v %v", what, st, err)
			}
		}
	}
	waitStats("a third processed", func(n int64) bool { return n >= total/3 })
	if err := procs[0].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = procs[0].Wait()
	waitStats("all processed", func(n int64) bool { return n >= total })

	st, err := s.Stats(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if st.TurnsReceived != total || st.TurnsProcessed != total || st.TurnsFailed != 0 || st.ContextItems != total {
		t.Fatalf("stats = %+v; want %d turns processed once, %d context items", st, total, total)
	}
	for u := range users {
		var v string
		err := s.Pool().QueryRow(ctx, `SELECT value FROM facts WHERE user_id = $1 AND key = 'favorite_color'`, fmt.Sprintf("u%02d", u)).Scan(&v)
		if err != nil || v != fmt.Sprintf("c%d", perUser-1) {
			t.Fatalf("u%02d favorite_color = %q, %v", u, v, err)
		}
	}
	// The survivors shut down cleanly on SIGTERM.
	for _, p := range procs[1:] {
		_ = p.Process.Signal(syscall.SIGTERM)
		if err := p.Wait(); err != nil {
			t.Errorf("serve exited with %v after SIGTERM", err)
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
