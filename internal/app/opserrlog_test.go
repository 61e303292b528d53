package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/memoryd/memoryd/internal/httperrlog"
)

// emfileOnce is a listener whose first Accept fails as accept4 does when
// the process is out of file descriptors.
type emfileOnce struct {
	net.Listener
	once sync.Once
}

func (l *emfileOnce) Accept() (net.Conn, error) {
	var failed bool
	l.once.Do(func() { failed = true })
	if failed {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// A failed accept of the ops endpoint (serve under a small file-descriptor
// limit, its /metrics and /readyz scraped) is logged through memoryd's
// logger, in its format and with what to do, not by net/http's standard
// log as a plain-text line on stderr.
func TestOpsAcceptErrorIsLoggedInMemorydsFormat(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&out, nil))
	ops := startOps(&emfileOnce{Listener: inner}, OpsConfig{}, nil, newMetrics(), logger)
	defer func() { _ = ops.stop(context.Background()) }()

	// The server accepts again after its failed accept; the line is
	// written before it retries.
	resp, err := http.Get(fmt.Sprintf("http://%s/healthz", inner.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz after a failed accept: %s", resp.Status)
	}

	var found bool
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not memoryd's JSON: %q", line)
		}
		if rec["msg"] != httperrlog.MsgAccept {
			continue
		}
		found = true
		if rec["level"] != "WARN" {
			t.Errorf("level %v, want WARN", rec["level"])
		}
		if e, _ := rec["error"].(string); !strings.Contains(e, "too many open files") {
			t.Errorf("error %q does not name the cause", e)
		}
		if h, _ := rec["hint"].(string); !strings.Contains(h, "LimitNOFILE") {
			t.Errorf("hint %q does not say what to do", h)
		}
	}
	if !found {
		t.Fatalf("no %q line in memoryd's log; got:\n%s", httperrlog.MsgAccept, out.String())
	}
}
