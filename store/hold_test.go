package store_test

import (
	"context"
	"testing"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// holdSetup returns two stores on one schema: two processes.
func holdSetup(t *testing.T) (a, b *store.Store) {
	t.Parallel()
	a = storetest.New(t)
	return a, storetest.Open(t, storetest.URL(t, a))
}

// hold takes name on s and reports whether it was granted.
func hold(t *testing.T, s *store.Store, name string, alone bool) (release func(), ok bool) {
	t.Helper()
	release, ok, err := s.Hold(context.Background(), name, alone)
	if err != nil {
		t.Fatalf("Hold(%q, alone %v): %v", name, alone, err)
	}
	if ok != (release != nil) {
		t.Fatalf("Hold(%q, alone %v) = release %v, ok %v", name, alone, release != nil, ok)
	}
	return release, ok
}

// refused fails the test when s is granted name alone.
func refused(t *testing.T, s *store.Store, name, why string) {
	t.Helper()
	if rb, ok := hold(t, s, name, true); ok {
		rb()
		t.Fatal(why)
	}
}

// Shared holds stand beside each other, in one process and in two; an
// alone hold stands beside none, in this process or another; a name is
// free again once every hold of it is released.
func TestHoldSharedAndAlone(t *testing.T) {
	a, b := holdSetup(t)
	steps := []struct {
		s      *store.Store
		who    string
		alone  bool
		wantOK bool
	}{
		{a, "a", false, true},
		{a, "a", false, true},  // shared again, same process
		{b, "b", true, false},  // a holds it shared
		{b, "b", false, true},  // shared beside a's
		{a, "a", true, false},  // this process holds it shared
		{nil, "", false, true}, // release everything so far
		{a, "a", true, true},
		{b, "b", false, false}, // a holds it alone
		{b, "b", true, false},
		{a, "a", true, false}, // alone once only, in this process too
		{a, "a", false, false},
		{nil, "", false, true},
		{b, "b", true, true},
	}
	var releases []func()
	t.Cleanup(func() {
		for _, r := range releases {
			r()
		}
	})
	for i, st := range steps {
		if st.s == nil {
			for _, r := range releases {
				r()
				r() // a second call does nothing
			}
			releases = nil
			continue
		}
		release, ok := hold(t, st.s, "forget.dave", st.alone)
		if ok != st.wantOK {
			t.Fatalf("step %d: %s holds alone=%v: ok %v, want %v", i, st.who, st.alone, ok, st.wantOK)
		}
		if ok {
			releases = append(releases, release)
		}
	}
	// Other names are others.
	release, ok := hold(t, a, "forget.erin", true)
	if !ok {
		t.Fatal("a cannot hold another name alone")
	}
	release()
}

// A process whose connection ends (killed, or its host gone) drops its
// holds: another takes the name alone. The process's next hold opens a
// connection again.
func TestHoldEndsWithItsConnection(t *testing.T) {
	a, b := holdSetup(t)
	release, ok := hold(t, a, "forget.dave", false)
	if !ok {
		t.Fatal("a cannot hold dave")
	}
	if _, ok := hold(t, b, "forget.dave", true); ok {
		t.Fatal("b holds dave alone beside a's hold")
	}
	// The backend holding the hold's advisory lock, ended as a dead
	// process's connection is (and gone before b tries: its locks are
	// released as it exits).
	terminateHolder(t, b, "forget.dave")
	rb, ok := hold(t, b, "forget.dave", true)
	if !ok {
		t.Fatal("b cannot hold dave alone after a's connection ended")
	}
	rb()
	// a's next hold: its connection, kept open for dave's hold, was closed
	// under it; the first statement on it fails, and it tries once more on
	// a new one.
	r2, ok := hold(t, a, "forget.erin", true)
	if !ok {
		t.Fatal("a cannot hold erin after its connection ended")
	}
	if _, ok := hold(t, b, "forget.erin", false); ok {
		t.Fatal("b holds erin beside a's alone hold on its new connection")
	}
	release() // dave's, on a connection that is gone: nothing to do
	r2()
	if _, ok := hold(t, b, "forget.erin", true); !ok {
		t.Fatal("b cannot hold erin alone after a released it")
	}
}

// The connection holds are taken on asks the server for TCP keepalives,
// so that a process whose host is gone drops its holds within about 25 s,
// not the system's 2 hours.
func TestHoldConnectionKeepsAlive(t *testing.T) {
	a, _ := holdSetup(t)
	var unix bool
	if err := a.Pool().QueryRow(context.Background(), `SELECT inet_server_addr() IS NULL`).Scan(&unix); err != nil {
		t.Fatal(err)
	}
	if unix {
		t.Skip("a Unix socket: Postgres keeps no TCP keepalives on it (each setting shows 0), and the kernel ends it with the process")
	}
	release, ok := hold(t, a, "forget.dave", false)
	if !ok {
		t.Fatal("cannot hold dave")
	}
	defer release()
	for name, want := range map[string]string{"tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "3"} {
		got, err := store.HoldSetting(context.Background(), a, name)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("the hold connection's %s is %s, want %s", name, got, want)
		}
	}
}

// A hold asked under a context that has ended is refused with its error,
// and leaves the process's other holds (other forgets still running) as
// they are: it dropped the connection, and every hold with it.
func TestHoldUnderAnEndedContextLeavesTheOthers(t *testing.T) {
	a, b := holdSetup(t)
	release, ok := hold(t, a, "forget.dave", false)
	if !ok {
		t.Fatal("a cannot hold dave")
	}
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := a.Hold(ctx, "forget.erin", false); err == nil {
		t.Fatal("a hold under a cancelled context succeeded")
	}
	refused(t, b, "forget.dave", "b holds dave alone beside a's hold, after a's hold of erin under a cancelled context")
}

// A shared hold of a name this process holds already is asked of Postgres
// again: on a connection whose backend ended (a restart, a failover, a
// role's idle_session_timeout), it is taken anew on another, not counted
// on a session that holds nothing. And the release of the hold whose
// connection ended does not end the later one (a retry of the forget) on
// the connection opened since.
func TestHoldSharedAgainAfterItsConnectionEnded(t *testing.T) {
	a, b := holdSetup(t)
	first, ok := hold(t, a, "forget.dave", false)
	if !ok {
		t.Fatal("a cannot hold dave")
	}
	defer first()
	terminateHolder(t, b, "forget.dave")
	second, ok := hold(t, a, "forget.dave", false)
	if !ok {
		t.Fatal("a cannot hold dave again")
	}
	defer second()
	refused(t, b, "forget.dave", "b holds dave alone beside a's second hold: it was counted on a session that ended")
	// And the first's release (its connection gone) leaves the second.
	first()
	refused(t, b, "forget.dave", "b holds dave alone after the first hold's release, beside the second")
	second()
	rb, ok := hold(t, b, "forget.dave", true)
	if !ok {
		t.Fatal("b cannot hold dave alone once both are released")
	}
	rb()
}

// terminateHolder ends, from s, the backend holding name's advisory lock,
// as a dead process's connection ends, and waits until it has exited.
func terminateHolder(t *testing.T, s *store.Store, name string) {
	t.Helper()
	var version int
	if err := s.Pool().QueryRow(context.Background(), `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version < 140000 {
		t.Skipf("Postgres %d: pg_terminate_backend cannot wait for the backend to exit before 14", version)
	}
	var n int
	if err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 30000)) FROM pg_locks
		WHERE locktype = 'advisory' AND objsubid = 1 AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND ((classid::bigint << 32) | objid::bigint) = hashtextextended('memoryd.hold.' || current_schema() || '.' || $1, 0)`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d backends held %s's advisory lock and exited, want 1", n, name)
	}
}
