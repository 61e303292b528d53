package agenttools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// answered wraps a session's input and output so that the end of the
// input waits for the answers to the requests read before it: the SDK ends
// a session when its input ends and drops the requests it has read but not
// answered, so a client that wrote its requests and closed stdin (a script,
// `printf … | memoryd mcp`) got only some of its answers. The wait is
// bounded by limit, and ends when the session closes.
//
// It also answers, itself, an input line that is no JSON-RPC message (not
// JSON: -32700; JSON without "jsonrpc": "2.0", or that the SDK cannot read
// as a message or batch: -32600), which the SDK does not see: the SDK's
// decoder ends the whole session at such a line, and the answers still
// due with it (MCP walk: one "garbage" line after a tools/call left stdout
// empty and the process exiting 1). MCP's stdio framing is one message a
// line.
type answered struct {
	in    io.Reader
	out   io.Writer
	limit time.Duration

	mu      sync.Mutex
	pending map[string]bool // ids of requests read and not yet answered
	changed chan struct{}   // closed and replaced when pending shrinks
	outLine []byte          // the output's unfinished last line

	// The input, read by Read alone: inLine is its unfinished last line,
	// fwd the checked lines not yet passed on, eof its end seen, err a
	// read error to report once fwd is passed on.
	buf    []byte
	inLine []byte
	fwd    []byte
	eof    bool
	err    error
	filter bool // lines are checked (off past a line over maxCheckedLine)

	// writeMu keeps this reader's answers and the SDK's messages whole
	// lines apart (the SDK writes each message with one Write).
	writeMu sync.Mutex
	// stall bounds how long out may take none of a write; broken, under
	// writeMu, is why out takes no more writes (a write stalled, or the
	// session closed during one).
	stall      time.Duration
	broken     error
	stalledOut atomic.Bool // broken is errStalled, read without writeMu

	closeOnce sync.Once
	closeErr  error
	closed    chan struct{} // closed by Close

	dropOnce sync.Once
	dropped  chan struct{} // closed by drop
}

// maxCheckedLine bounds the input line answered holds to check: the SDK's
// own bound on a message (mcp.DefaultMaxLineLength). Past it the input is
// passed on unchecked, and the SDK ends the session as it would.
const maxCheckedLine = mcp.DefaultMaxLineLength

// DefaultWriteStall is how long a stdio session's output may take none of
// a message being written (the client reads none of it: the pipe is full)
// before the session ends. It bounds progress, not the whole message: a
// client reading a large answer slowly but steadily keeps its session.
const DefaultWriteStall = time.Minute

// writeChunk is the piece of a message written to the output at once, the
// unit of its progress for the write stall: a pipe's write of up to 4 KiB
// (PIPE_BUF) waits for room for all of it.
const writeChunk = 4 << 10

// errStalled ends a session whose client stopped reading its output.
var errStalled = errors.New("agenttools: the client read none of its output for too long (its stdout pipe is full): session ended")

// errClosedOutput fails the writes of a closed session.
var errClosedOutput = errors.New("agenttools: the session ended during a write to its output")

func newAnswered(in io.Reader, out io.Writer, limit, stall time.Duration) *answered {
	return &answered{in: in, out: out, limit: limit, stall: stall, pending: map[string]bool{}, changed: make(chan struct{}),
		buf: make([]byte, 32<<10), filter: true, closed: make(chan struct{}), dropped: make(chan struct{})}
}

func (a *answered) Read(p []byte) (int, error) {
	for len(a.fwd) == 0 {
		switch {
		case a.err != nil:
			return 0, a.err
		case a.eof:
			return 0, a.drain()
		}
		n, err := a.in.Read(a.buf)
		a.take(a.buf[:n], err == io.EOF)
		if err == io.EOF {
			a.eof = true
		} else if err != nil {
			a.err = err
		}
	}
	n := copy(p, a.fwd)
	a.fwd = a.fwd[n:]
	return n, nil
}

// take reads input data: its complete lines (and at the end, the last
// one) are checked, passed on to fwd or answered, and the requests passed
// on noted as pending.
func (a *answered) take(data []byte, end bool) {
	if !a.filter {
		a.fwd = append(a.fwd, data...)
		a.note(data)
		return
	}
	a.inLine = append(a.inLine, data...)
	for {
		i := bytes.IndexByte(a.inLine, '\n')
		if i < 0 {
			break
		}
		a.line(a.inLine[:i+1])
		a.inLine = a.inLine[i+1:]
	}
	if end && len(a.inLine) > 0 {
		a.line(append(a.inLine, '\n'))
		a.inLine = nil
	}
	if len(a.inLine) > maxCheckedLine {
		a.filter = false
		a.fwd = append(a.fwd, a.inLine...)
		a.inLine = nil
	}
}

// line checks one input line (with its newline): a JSON-RPC message, or
// a blank line, is passed on; anything else is answered with its error.
func (a *answered) line(l []byte) {
	t := bytes.TrimSpace(l)
	if len(t) == 0 {
		return
	}
	if !json.Valid(t) {
		a.answer(nil, -32700, "Parse error: the line is not JSON (MCP over stdio is one JSON-RPC message a line)")
		return
	}
	if t[0] == '{' {
		var head struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
		}
		if json.Unmarshal(t, &head) != nil || head.JSONRPC != "2.0" {
			a.answer(head.ID, -32600, `Invalid Request: "jsonrpc" must be "2.0"`)
			return
		}
	}
	// JSON the SDK cannot read as a message (a number, an empty batch, an
	// object without method or id, an id of another type) would end its
	// session as a line not JSON does.
	if !sdkReads(t) {
		a.answer(nil, -32600, "Invalid Request: the line is no JSON-RPC request, notification or response")
		return
	}
	// Trimmed: the SDK's decoder ends the session at white space after a
	// message other than its line break.
	l = append(t[:len(t):len(t)], '\n')
	a.fwd = append(a.fwd, l...)
	a.note(l)
}

// sdkReads reports whether the SDK reads t, valid JSON, as a message or
// a batch of them, as its stdio transport does (mcp.ioConn's readBatch).
func sdkReads(t []byte) bool {
	if t[0] != '[' {
		_, err := jsonrpc.DecodeMessage(t)
		return err == nil
	}
	var batch []json.RawMessage
	if json.Unmarshal(t, &batch) != nil || len(batch) == 0 {
		return false
	}
	for _, m := range batch {
		if _, err := jsonrpc.DecodeMessage(m); err != nil {
			return false
		}
	}
	return true
}

// note records the requests of data's complete lines as pending.
func (a *answered) note(data []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	scanMessages(data, func(id string, request bool) {
		if request {
			a.pending[id] = true
		}
	})
}

// answer writes a JSON-RPC error response for a line the SDK is not given.
func (a *answered) answer(id json.RawMessage, code int, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	var resp rpcErrorResponse
	resp.JSONRPC, resp.ID, resp.Error.Code, resp.Error.Message = "2.0", id, code, msg
	b, err := json.Marshal(resp)
	if err != nil {
		return
	}
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	_, _ = a.write(append(b, '\n'))
}

type rpcErrorResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// drain waits until every request read is answered, then returns io.EOF:
// within limit, or until the session closes. A stop (ServeIO's context
// done) does not end it: ServeIO closes the session once the calls it cut
// are answered, which the SDK drops once it has seen the input's end.
func (a *answered) drain() error {
	ctx, cancel := context.WithTimeout(context.Background(), a.limit)
	defer cancel()
	a.settle(ctx)
	return io.EOF
}

// settle waits until every request read is answered, ctx is done or the
// session is closed, and reports whether every request was answered.
func (a *answered) settle(ctx context.Context) bool {
	for {
		a.mu.Lock()
		left, changed := len(a.pending), a.changed
		a.mu.Unlock()
		if left == 0 {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		case <-a.closed:
			return false
		}
	}
}

// unanswered counts the requests read and not yet answered.
func (a *answered) unanswered() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.pending)
}

func (a *answered) Write(p []byte) (int, error) {
	a.writeMu.Lock()
	n, err := a.write(p)
	a.writeMu.Unlock()
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

// write writes p to the output, under writeMu, in pieces of writeChunk,
// and gives up when no piece has been taken for stall, or when the session
// closes or is stopped (drop): a client that stopped reading (its end of
// the pipe full, the agent hung or busy elsewhere) blocked the write for
// good, and with it the session, its stop (SIGTERM: the process never
// exited) and the end of its input. Bounding the whole write instead ended
// the session of a client reading steadily but slower than the message's
// size per stall. The write given up on is left to block, on a copy of p;
// out takes no more writes, and the session ends with the error.
func (a *answered) write(p []byte) (int, error) {
	if a.broken != nil {
		return 0, a.broken
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	took := make(chan struct{}, 1) // a piece was taken
	b := bytes.Clone(p)
	go func() {
		n := 0
		for n < len(b) {
			m, err := a.out.Write(b[n:min(n+writeChunk, len(b))])
			n += m
			if err != nil {
				done <- result{n, err}
				return
			}
			select {
			case took <- struct{}{}:
			default:
			}
		}
		done <- result{n, nil}
	}()
	t := time.NewTimer(a.stall)
	defer t.Stop()
	for {
		select {
		case r := <-done:
			return a.wrote(r.n, r.err)
		case <-took:
			t.Reset(a.stall)
			continue
		case <-t.C:
			select {
			case r := <-done: // the last piece, taken as the stall ran out
				return a.wrote(r.n, r.err)
			default:
			}
			a.broken = errStalled
			a.stalledOut.Store(true)
		case <-a.closed:
			a.broken = errClosedOutput
		case <-a.dropped:
			a.broken = errClosedOutput
		}
		return 0, a.broken
	}
}

// wrote ends write with its goroutine's result. A failed write may have
// left part of a line on the output, so out takes no more writes: the next
// message would follow the broken line.
func (a *answered) wrote(n int, err error) (int, error) {
	if err != nil {
		a.broken = err
	}
	return n, err
}

// stalled reports whether the output stalled (write gave up on it).
func (a *answered) stalled() bool { return a.stalledOut.Load() }

// drop gives up on the writes blocked now and fails those after: a
// stopped session closes only once its calls' answers are written, and
// the SDK closes the output (Close) only after that.
func (a *answered) drop() {
	a.dropOnce.Do(func() { close(a.dropped) })
}

// Close closes the input when it is a Closer (a blocked read of stdin ends
// with it), once: the SDK closes the reader and the writer, here one value.
// The output is left to its owner.
func (a *answered) Close() error {
	a.closeOnce.Do(func() {
		close(a.closed)
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
