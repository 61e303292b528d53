package agenttools

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// failingOnce fails its first write after taking part of it, then takes
// everything: an output that recovered from one error.
type failingOnce struct {
	bytes.Buffer
	failed bool
}

var errOutput = errors.New("output failed")

func (f *failingOnce) Write(p []byte) (int, error) {
	if !f.failed {
		f.failed = true
		n, _ := f.Buffer.Write(p[:len(p)/2])
		return n, errOutput
	}
	return f.Buffer.Write(p)
}

// TestWriteAfterAFailedWriteIsRefused: after a write to the output failed
// part way through a message, nothing more is written: a message after it
// would follow half a line, and the client would read neither.
func TestWriteAfterAFailedWriteIsRefused(t *testing.T) {
	t.Parallel()
	out := &failingOnce{}
	a := newAnswered(strings.NewReader(""), out, time.Minute, time.Minute)
	if _, err := a.write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n")); !errors.Is(err, errOutput) {
		t.Fatalf("first write: %v, want %v", err, errOutput)
	}
	before := out.Len()
	if _, err := a.write([]byte(`{"jsonrpc":"2.0","id":2,"result":{}}` + "\n")); !errors.Is(err, errOutput) {
		t.Errorf("write after the failed one: %v, want the failure again", err)
	}
	if out.Len() != before {
		t.Errorf("the output took %q after the failed write's half line", out.String()[before:])
	}
}
