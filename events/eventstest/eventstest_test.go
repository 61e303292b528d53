package eventstest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events/eventstest"
)

func TestPoll(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		trueAt    int // the call from which cond holds; 0 never
		limit     time.Duration
		wantOK    bool
		wantState string
	}{
		{"holds at once", 1, time.Minute, true, "call 1"},
		{"holds on the third call", 3, time.Minute, true, "call 3"},
		{"never holds", 0, 50 * time.Millisecond, false, "call "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			ok, state := eventstest.Poll(tt.limit, func() (bool, string) {
				calls++
				return tt.trueAt > 0 && calls >= tt.trueAt, fmt.Sprintf("call %d", calls)
			})
			if ok != tt.wantOK || !strings.HasPrefix(state, tt.wantState) {
				t.Errorf("Poll = %v, %q; want %v, %q...", ok, state, tt.wantOK, tt.wantState)
			}
			if tt.trueAt > 0 && calls != tt.trueAt {
				t.Errorf("cond called %d times, want %d (no call after it held)", calls, tt.trueAt)
			}
			if !tt.wantOK && calls < 2 {
				t.Errorf("cond called %d times before giving up, want it polled", calls)
			}
		})
	}
}

// fatalRecorder is a testing.TB whose Fatalf records the message and ends
// the goroutine, as the real one does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestEventuallyNamesWhatAndLastState(t *testing.T) {
	t.Parallel()
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		eventstest.Eventually(r, "the answer", 30*time.Millisecond, func() (bool, string) { return false, "still 41" })
	}()
	<-done
	if !strings.Contains(r.msg, "waiting for the answer") || !strings.Contains(r.msg, "last state: still 41") {
		t.Errorf("failure message %q does not name what was awaited and the last state", r.msg)
	}
}

// TestNamesDeletesTheTestsStreams: the streams a test made under its Names
// are gone when it ends, its forgets bucket (KV_<stream>_FORGETS) too.
// Before, the buckets stayed on the shared server, run after run.
func TestNamesDeletesTheTestsStreams(t *testing.T) {
	nc := eventstest.Conn(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var made []string
	t.Run("a test", func(t *testing.T) {
		prefix, stream := eventstest.Names(t, nc)
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".x"}}); err != nil {
			t.Fatal(err)
		}
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: stream + "_FORGETS"})
		if err != nil {
			t.Fatal(err)
		}
		made = []string{stream, "KV_" + kv.Bucket()}
	})
	for _, name := range made {
		if _, err := js.Stream(ctx, name); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("stream %s after the test that made it: %v, want not found", name, err)
		}
	}
	if len(made) == 0 {
		t.Fatal("the subtest made no stream")
	}
}
