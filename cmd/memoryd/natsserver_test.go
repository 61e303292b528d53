package main

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"testing"
	"time"
)

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// privateNATS runs the test's own nats-server (never the shared one) on a
// free loopback port with the arguments argsFor returns, waits until it
// accepts connections, and returns its URL. It is killed when the test ends;
// the test is skipped when no nats-server binary is installed.
func privateNATS(t *testing.T, argsFor func(port int) []string) string {
	t.Helper()
	bin := natsServerBin()
	if bin == "" {
		t.Skip("nats-server binary not installed")
	}
	port := freePort(t)
	srv := exec.Command(bin, argsFor(port)...)
	var logs bytes.Buffer
	srv.Stderr = &logs
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(10 * time.Second)
	for tick := time.NewTicker(20 * time.Millisecond); ; <-tick.C {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "nats://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("private nats-server did not start: %s", logs.String())
		}
	}
}
