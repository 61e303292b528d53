package events

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/events/eventstest"
)

// violationsServer runs a private nats-server whose user u (password p)
// may publish only under "ok." and subscribe only to the default inbox.
func violationsServer(t *testing.T) string {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte(`authorization { users: [
  { user: u, password: p, permissions: { publish: { allow: ["ok.>"] }, subscribe: { allow: ["_INBOX.>"] } } }
] }
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return eventstest.PrivateServer(t, func(port int) []string {
		return []string{"-c", conf, "-a", "127.0.0.1", "-p", strconv.Itoa(port)}
	})
}

// seenErrors is an error handler recording what it is passed.
type seenErrors struct {
	mu   sync.Mutex
	errs []string
}

func (s *seenErrors) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, err.Error())
}

func (s *seenErrors) has(words string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.errs {
		if strings.Contains(e, words) {
			return true
		}
	}
	return false
}

// TestTrackViolationsChainsAndForgets: the option keeps a connection's
// violations and still passes them to the handler set before it; a
// connection without it keeps none (its requests read LastError as
// before); and a tracked connection's violations go with it.
func TestTrackViolationsChainsAndForgets(t *testing.T) {
	url := violationsServer(t)
	seen := &seenErrors{}
	nc, err := nats.Connect(url, nats.UserInfo("u", "p"), nats.ErrorHandler(seen.handler), TrackViolations())
	if err != nil {
		t.Fatal(err)
	}
	plain, err := nats.Connect(url, nats.UserInfo("u", "p"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()

	start := markViolations(nc)
	defer start.done()
	for _, c := range []*nats.Conn{nc, plain} {
		if err := c.Publish("no.a", nil); err != nil {
			t.Fatal(err)
		}
	}
	eventstest.Eventually(t, "the user's handler to see the violation", 10*time.Second, func() (bool, string) {
		return seen.has(`Publish to "no.a"`), ""
	})
	l := violationsOf(nc, false)
	if l == nil {
		t.Fatal("no violations kept for the tracked connection")
	}
	if v, ok := l.publishAfter("no.a", start.seq); !ok || v != `Permissions Violation for Publish to "no.a"` {
		t.Errorf("the tracked connection's violation = %q, %v", v, ok)
	}
	later := markViolations(nc)
	defer later.done()
	if _, ok := l.publishAfter("no.a", later.seq); ok {
		t.Error("a violation reported before a mark is kept as after it")
	}
	eventstest.Eventually(t, "the untracked connection's violation", 10*time.Second, func() (bool, string) {
		err := plain.LastError()
		return err != nil && strings.Contains(err.Error(), "no.a"), fmt.Sprint(err)
	})
	if violationsOf(plain, false) != nil {
		t.Error("violations kept for a connection without TrackViolations")
	}

	key := weak.Make(nc)
	nc.Close()
	nc, l = nil, nil
	eventstest.Eventually(t, "a closed, dropped connection's violations to go", 10*time.Second, func() (bool, string) {
		runtime.GC()
		_, kept := violationLogs.Load(key)
		return !kept, ""
	})
}

// TestViolationLogKeepsWhileWaiting: a connection keeps the publishes
// refused while a request waits, up to violationsKept subjects (a subject
// refused again at its latest report), and none once no request waits;
// its inbox's refusal it keeps however many follow, until a reconnect.
func TestViolationLogKeepsWhileWaiting(t *testing.T) {
	nc, err := nats.Connect(violationsServer(t), nats.UserInfo("u", "p"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	report := func(words string) error { return fmt.Errorf("%w: %s", nats.ErrPermissionViolation, words) }
	publish := func(subject string) error { return report(`Permissions Violation for Publish to "` + subject + `"`) }
	l := violationsOf(nc, true)
	l.add(nc, publish("before"))
	m := markViolations(nc)
	l.add(nc, report(`Permissions Violation for Subscription to "_INBOX.abc.*"`))
	l.add(nc, publish("again"))
	for i := range 3 * violationsKept {
		l.add(nc, publish(fmt.Sprintf("s%d", i)))
		if i%10 == 0 {
			l.add(nc, publish("again"))
		}
	}
	if n := len(l.refusedPublishes); n > violationsKept || n < violationsKept/2 {
		t.Errorf("%d refused subjects kept, want %d at most, %d at least", n, violationsKept, violationsKept/2)
	}
	if _, ok := l.publishAfter("before", m.seq); ok {
		t.Error("a publish refused before the request was sent is kept as after it")
	}
	if _, ok := l.publishAfter("s0", m.seq); ok {
		t.Error("the oldest violation is still kept")
	}
	if v, ok := l.publishAfter(fmt.Sprintf("s%d", 3*violationsKept-1), m.seq); !ok || v != `Permissions Violation for Publish to "s`+strconv.Itoa(3*violationsKept-1)+`"` {
		t.Errorf("the latest violation = %q, %v; want it kept", v, ok)
	}
	if _, ok := l.publishAfter("again", m.seq); !ok {
		t.Error("a violation reported again and again is not kept")
	}
	m.done()
	if len(l.refusedPublishes) != 0 {
		t.Errorf("%d refused subjects kept once no request waits", len(l.refusedPublishes))
	}
	l.add(nc, publish("unwaited"))
	if len(l.refusedPublishes) != 0 {
		t.Error("a publish refused while no request waits is kept")
	}
	if v, ok := l.inboxRefused(nc.Stats().Reconnects); !ok || !strings.Contains(v, "_INBOX.abc") {
		t.Errorf("the inbox's refusal = %q, %v; want it kept", v, ok)
	}
	if _, ok := l.inboxRefused(nc.Stats().Reconnects + 1); ok {
		t.Error("the inbox's refusal is kept across a reconnect")
	}
}

// TestEveryRefusalWhileWaiting: a request is told its refusal however
// many other subjects are refused on its connection while it waits (here
// more than the 64 a first version of TrackViolations kept).
func TestEveryRefusalWhileWaiting(t *testing.T) {
	url := violationsServer(t)
	seen := &seenErrors{}
	nc, err := nats.Connect(url, nats.UserInfo("u", "p"), nats.ErrorHandler(seen.handler), TrackViolations())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const others = 200
	mark := markViolations(nc)
	defer mark.done()
	for i := range others + 1 {
		if err := nc.Publish(fmt.Sprintf("no.%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	eventstest.Eventually(t, "the handler to see every violation", 10*time.Second, func() (bool, string) {
		return seen.has(fmt.Sprintf(`Publish to "no.%d"`, others)), ""
	})
	if kind, v := refused(nc, "no.0", mark); kind != ErrRequestRefused || v != `Permissions Violation for Publish to "no.0"` {
		t.Errorf("the first of %d subjects refused while the request waited: %v (%q); want ErrRequestRefused", others+1, kind, v)
	}
	if kind, _ := refused(nc, "ok.0", mark); kind != nil {
		t.Errorf("a subject not refused: %v; want nil", kind)
	}
}
