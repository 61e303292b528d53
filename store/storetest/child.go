package storetest

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// StartChild runs the test binary again as a child process running only
// the test named run, with env (KEY=VALUE) added to its environment, for a
// test of what Postgres does when a client dies: closing a connection in
// the test's own process is not the same, since pgx then sends a cancel
// request of its own. The child prints "backend <pid>" (PrintBackend) on
// its standard output before its statement; StartChild returns that pid and
// a function that kills the child with SIGKILL and waits for it, which the
// test's cleanup also runs.
func StartChild(t testing.TB, run string, env ...string) (pid int, kill func()) {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^"+run+"$")
	child.Env = append(os.Environ(), env...)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	kill = func() {
		if killed {
			return
		}
		killed = true
		if err := child.Process.Kill(); err != nil {
			t.Error(err)
		}
		_ = child.Wait()
	}
	t.Cleanup(kill)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "backend "); ok {
			pid, _ = strconv.Atoi(p)
			break
		}
	}
	if pid == 0 {
		t.Fatalf("the child printed no backend pid (%v)", sc.Err())
	}
	return pid, kill
}

// PrintBackend is the child's side of StartChild: it prints the backend
// pid of conn for the parent.
func PrintBackend(conn *pgx.Conn) {
	os.Stdout.WriteString("backend " + strconv.Itoa(int(conn.PgConn().PID())) + "\n")
}

// SkipBefore14 skips a test of client_connection_check_interval on a
// server older than Postgres 14, which has no such setting.
func SkipBefore14(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var version int
	if err := admin.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version < 140000 {
		t.Skipf("Postgres %d has no client_connection_check_interval", version)
	}
}
