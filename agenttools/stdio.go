package agenttools

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// answered wraps a session's input and output so that the end of the
// input waits for the answers to the requests read before it: the SDK ends
// a session when its input ends and drops the requests it has read but not
// answered, so a client that wrote its requests and closed stdin (a script,
// `printf … | memoryd mcp`) got only some of its answers. The wait is
// bounded by limit, and ends with ctx.
type answered struct {
	ctx   context.Context
	in    io.Reader
	out   io.Writer
	limit time.Duration

	mu      sync.Mutex
	pending map[string]bool // ids of requests read and not yet answered
	changed chan struct{}   // closed and replaced when pending shrinks
	inLine  []byte          // the input's unfinished last line
	outLine []byte          // the output's
	held    bool            // the input's end was seen with data: report it next Read

	closeOnce sync.Once
	closeErr  error
}

func newAnswered(ctx context.Context, in io.Reader, out io.Writer, limit time.Duration) *answered {
	return &answered{ctx: ctx, in: in, out: out, limit: limit, pending: map[string]bool{}, changed: make(chan struct{})}
}

func (a *answered) Read(p []byte) (int, error) {
	if a.held {
		return 0, a.drain()
	}
	n, err := a.in.Read(p)
	a.mu.Lock()
	a.inLine = scanMessages(append(a.inLine, p[:n]...), func(id string, request bool) {
		if request {
			a.pending[id] = true
		}
	})
	a.mu.Unlock()
	if err == io.EOF {
		if n > 0 {
			// The SDK must read these requests before anything waits for
			// their answers.
			a.held = true
			return n, nil
		}
		return 0, a.drain()
	}
	return n, err
}

// drain waits until every request read is answered, then returns io.EOF.
func (a *answered) drain() error {
	timer := time.NewTimer(a.limit)
	defer timer.Stop()
	for {
		a.mu.Lock()
		left, changed := len(a.pending), a.changed
		a.mu.Unlock()
		if left == 0 {
			return io.EOF
		}
		select {
		case <-changed:
		case <-timer.C:
			return io.EOF
		case <-a.ctx.Done():
			return io.EOF
		}
	}
}

func (a *answered) Write(p []byte) (int, error) {
	n, err := a.out.Write(p)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.outLine = scanMessages(append(a.outLine, p[:n]...), func(id string, request bool) {
		if !request && a.pending[id] {
			delete(a.pending, id)
			close(a.changed)
			a.changed = make(chan struct{})
		}
	})
	return n, err
}

// Close closes the input when it is a Closer (a blocked read of stdin ends
// with it), once: the SDK closes the reader and the writer, here one value.
// The output is left to its owner.
func (a *answered) Close() error {
	a.closeOnce.Do(func() {
		if c, ok := a.in.(io.Closer); ok {
			a.closeErr = c.Close()
		}
	})
	return a.closeErr
}

// scanMessages calls fn for each message with an id on the complete lines
// of buf (MCP's stdio framing is one JSON-RPC message, or batch, a line):
// request is whether it has a method (else it is a response). It returns
// the unfinished rest of buf.
func scanMessages(buf []byte, fn func(id string, request bool)) []byte {
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			// Kept apart from the caller's slice, which it reuses.
			return append([]byte(nil), buf...)
		}
		line := bytes.TrimSpace(buf[:i])
		buf = buf[i+1:]
		var msgs []rpcHead
		if len(line) > 0 && line[0] == '[' {
			_ = json.Unmarshal(line, &msgs)
		} else {
			var m rpcHead
			if json.Unmarshal(line, &m) == nil {
				msgs = []rpcHead{m}
			}
		}
		for _, m := range msgs {
			if len(m.ID) > 0 && string(m.ID) != "null" {
				var id bytes.Buffer
				if json.Compact(&id, m.ID) == nil {
					fn(id.String(), m.Method != "")
				}
			}
		}
	}
}

// rpcHead is what scanMessages reads of a JSON-RPC message.
type rpcHead struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}
