package events

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
)

// Export and import of a user's memory (issue 16 item 7): memory.export and
// memory.import. The format is JSON lines (docs/protocol.md, "export" and
// "import"): a header line ExportHeader, then one line per fact, history
// entry, clear and context item, deterministic, so that the same memory
// always exports to the same bytes.

// ExportHeader is the first line of every export (and of every import
// request's lines).
const ExportHeader = `{"type":"memoryd.export","version":1}`

// MaxCursorBytes bounds an export request's cursor.
const MaxCursorBytes = 128

// MaxImportRequestBytes bounds an import request's lines, header included,
// as JSON: well under NATS's default 1 MiB max payload. Client.Import
// splits larger exports into requests this size.
const MaxImportRequestBytes = 768 << 10

// ExportRequest asks for a page of the user's export (memory.export).
type ExportRequest struct {
	UserID string `json:"user_id"`
	// Cursor continues an export: a previous reply's Next. Absent starts at
	// the header.
	Cursor string `json:"cursor,omitempty"`
}

// ExportReply is a page of an export: Lines holds whole lines, each ending
// in a newline, and the pages' Lines concatenated are the export. Next,
// sent as Cursor, asks for the next page; it is absent on the last page.
// Every page of one export is cut from the memory as it was at the first
// page. A cursor is valid while its copy of the export is kept (an hour
// after its last page, docs/protocol.md "export"); after, the next page is
// a 409 and the export starts again.
type ExportReply struct {
	Lines string `json:"lines"`
	Next  string `json:"next,omitempty"`
}

// ImportRequest merges lines of an export into the user's memory
// (memory.import). Lines are the export's lines as JSON objects, the
// header first: each request is an import of its own, atomic, so a large
// export goes in several requests, each starting with the header, and
// merging makes them add up to the whole.
type ImportRequest struct {
	UserID string            `json:"user_id"`
	Lines  []json.RawMessage `json:"lines,omitempty"`
	// MemoryID, when set, is the memory_id an earlier request of the same
	// import was answered with: the request is then refused (409,
	// ErrForgottenDuringImport) when the user was forgotten since, which
	// deleted what the earlier requests wrote, rather than write the rest
	// of the export into the memory the forget began.
	MemoryID string `json:"memory_id,omitempty"`
}

// ImportReply counts, by line type, the rows the import wrote or changed;
// lines the memory already held count nothing (importing twice imports
// once). MemoryID names the user's memory the lines went into (opaque; a
// forget begins a new one), for the import's next requests.
type ImportReply struct {
	Imported map[string]int64 `json:"imported"`
	MemoryID string           `json:"memory_id,omitempty"`
}

// MaxMemoryIDBytes bounds an ImportRequest's MemoryID: longer, it is no
// id an import reply gave (a 400).
const MaxMemoryIDBytes = 16

// ErrForgottenDuringImport is wrapped by Client.Import's error when the
// user was forgotten between two of its requests: the forget deleted what
// the earlier ones wrote, and nothing more was sent. The memory holds none
// of the export; import it again to restore it into the new memory.
var ErrForgottenDuringImport = errors.New("the user was forgotten during the import: what its earlier requests wrote went with the forget, and the rest was not imported")

// ExportPage returns one page of the user's export.
func (c *Client) ExportPage(ctx context.Context, req ExportRequest) (ExportReply, error) {
	var reply ExportReply
	err := c.call(ctx, "export", req.UserID, req, &reply)
	return reply, err
}

// Export writes the user's whole export to w, page by page: the memory
// as it was at the first page. Without a deadline in ctx each page waits
// DefaultExportWait (or the client's WithRequestTimeout): the
// first page of a large memory, which memoryd reads and copies whole, takes
// seconds (9-10 s for 94 MB). A page refused part-way (its copy gone, or
// the user forgotten) is a *ServiceError with Code 409: export again.
//
// On any error, w already holds the pages before it: a prefix of the
// export that reads as a whole one (the format has no trailer, and
// CheckImport passes it). Keep what w holds only when Export returns nil:
// write to a buffer or a temporary file, not straight to the user's
// download, and start again from the first page on a 409 (memoryd export
// does both, up to 3 times; see the example).
func (c *Client) Export(ctx context.Context, userID string, w io.Writer) error {
	req := ExportRequest{UserID: userID}
	for {
		page, err := c.ExportPage(ctx, req)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(w, page.Lines); err != nil {
			return fmt.Errorf("memoryd export: write: %w", err)
		}
		if page.Next == "" {
			return nil
		}
		req.Cursor = page.Next
	}
}

// Import merges an export read from r into the user's memory, in requests
// of at most MaxImportRequestBytes (less when the connection's max_payload,
// read before each line, is lower), each starting with the header and each
// atomic, and returns the counts summed. On an error, the requests before
// it are imported (importing the whole again is safe: it imports once); a
// line refused is named by its line number in r. CheckImport first, on an
// input that can be read twice (a file), refuses a truncated or garbled one
// before any request is sent. A forget of the user between two requests
// (which deleted what the earlier ones wrote) ends it with
// ErrForgottenDuringImport, the rest unsent: the requests after the first
// carry the memory_id of its reply.
func (c *Client) Import(ctx context.Context, userID string, r io.Reader) (ImportReply, error) {
	total := ImportReply{Imported: map[string]int64{}}
	var (
		lines []json.RawMessage
		size  int
		first int // the file line of lines[1]
	)
	send := func() error {
		if len(lines) <= 1 {
			return nil
		}
		var reply ImportReply
		err := c.importRequest(ctx, userID, ImportRequest{UserID: userID, Lines: lines, MemoryID: total.MemoryID}, &reply)
		var svc *ServiceError
		if errors.As(err, &svc) && svc.Code == 409 && total.MemoryID != "" {
			total.Imported = map[string]int64{} // the forget deleted them
			return ErrForgottenDuringImport
		}
		if err != nil {
			return fileLine(err, first)
		}
		for k, v := range reply.Imported {
			total.Imported[k] += v
		}
		// The first reply's, kept for every later request (a server of
		// an earlier release names none, and none is sent).
		if total.MemoryID == "" {
			total.MemoryID = reply.MemoryID
		}
		lines, size = lines[:1], len(ExportHeader)
		return nil
	}
	err := scanImport(r, func(num int, line []byte) error {
		if num == 1 {
			lines, size = []json.RawMessage{bytes.Clone(line)}, len(line)
			return nil
		}
		// A JSON array holds the lines, one comma apart; with the request's
		// other bytes well inside the limit's headroom.
		// A line no request under the server's max_payload can hold,
		// with the header and the request's other bytes: named, not sent
		// (the NATS client would refuse it unnamed). Lines over
		// MaxImportRequestBytes never reach here (scanImport).
		if p := int(c.nc.MaxPayload()); p > 0 && len(lines[0])+len(line)+1+1024 > p {
			return &InputError{Line: num, Problem: fmt.Sprintf("%d bytes: no request under the NATS server's max_payload of %d bytes can hold it (raise max_payload)", len(line), p)}
		}
		if size+len(line)+1 > c.importRequestBytes()-1024 {
			if err := send(); err != nil {
				return err
			}
		}
		if len(lines) == 1 {
			first = num
		}
		lines, size = append(lines, bytes.Clone(line)), size+len(line)+1
		return nil
	})
	if err != nil {
		return total, err
	}
	if len(lines) == 1 {
		// The header alone: an empty memory; sent so that the header is
		// checked all the same.
		var reply ImportReply
		err := c.call(ctx, "import", userID, ImportRequest{UserID: userID, Lines: lines}, &reply)
		if err == nil {
			total = reply
		}
		return total, err
	}
	return total, send()
}

// importAttempts bounds the sends of one import request, and importPause
// is the pause before the second (doubled before each later one).
const (
	importAttempts = 3
	importPause    = time.Second
)

// importRequest sends one request of an Import, and sends it again after a
// temporary error (a 500: the store did not answer within its bound, under
// load) or a timeout, up to importAttempts in all: each request is atomic
// and imports once however often it is sent, and a heavy user's restore is
// tens of requests, each with its chance of meeting a busy store (a
// heavy-user walk: 1 request of 90 took past 5 s, and the restore failed
// each time it was run again). A reply to a resent request counts only
// what it imported itself: what the lost one imported is not counted.
func (c *Client) importRequest(ctx context.Context, userID string, req ImportRequest, reply *ImportReply) error {
	pause := importPause
	for attempt := 1; ; attempt++ {
		err := c.call(ctx, "import", userID, req, reply)
		var svc *ServiceError
		resend := (errors.As(err, &svc) && svc.Temporary()) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
		if err == nil || !resend || attempt == importAttempts || ctx.Err() != nil {
			return err
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return err
		}
		pause *= 2
	}
}

// importRequestBytes bounds an import request: MaxImportRequestBytes, or
// the server's max_payload when lower (a server set to 64 KB refused every
// request of a 100 KB export; a restore walk).
func (c *Client) importRequestBytes() int {
	if p := int(c.nc.MaxPayload()); p > 0 && p < MaxImportRequestBytes {
		return p
	}
	return MaxImportRequestBytes
}

// CheckImport reads an export through and makes the checks Import makes
// before sending a line (the header is JSON, every line is JSON and UTF-8
// and fits a request, the input is not empty), sending nothing: an
// *InputError names the first line that fails. A file cut short in the
// middle of a line (a copy interrupted) fails here, where Import would have
// committed the requests before the cut. It cannot tell a file cut at a
// line's end: the format has no trailer.
func CheckImport(r io.Reader) error {
	return CheckImportWith(r, func(int, []byte) error { return nil })
}

// CheckImportWith is CheckImport calling line for each non-empty line that
// passed its checks (the header as line 1, trimmed, without a byte order
// mark), as memoryd would check it: memoryd's own checks, where the
// client links them, refuse a file with a bad line in a later request
// before its first request is committed. It stops at the first error,
// CheckImport's (*InputError) or line's.
func CheckImportWith(r io.Reader, line func(num int, b []byte) error) error {
	return scanImport(r, line)
}

// scanImport calls line for each non-empty line of an export (the header
// as line 1, trimmed), after the local checks; it stops at the first error,
// its own (*InputError) or line's.
func scanImport(r io.Reader, line func(num int, b []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, MaxImportRequestBytes)
	num := 0
	for sc.Scan() {
		num++
		b := bytes.TrimSpace(sc.Bytes())
		if num == 1 {
			// A file saved by an editor that writes a byte order mark
			// (Windows Notepad) starts with one: it is no part of the
			// header, which it failed as "not a memoryd export".
			b = bytes.TrimPrefix(b, []byte("\ufeff"))
			if !json.Valid(b) {
				return &InputError{Line: 1, Problem: "not a memoryd export: the first line must be " + ExportHeader}
			}
			if err := line(num, b); err != nil {
				return err
			}
			continue
		}
		if len(b) == 0 {
			continue
		}
		if !json.Valid(b) {
			return &InputError{Line: num, Problem: "not a JSON object"}
		}
		if !utf8.Valid(b) {
			return &InputError{Line: num, Problem: "not valid UTF-8"}
		}
		if err := line(num, b); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &InputError{Line: num + 1, Problem: fmt.Sprintf("over %d bytes", MaxImportRequestBytes)}
		}
		return fmt.Errorf("memoryd import: read: %w", err)
	}
	if num == 0 {
		return &InputError{Problem: "empty input: expected " + ExportHeader + " first"}
	}
	return nil
}

// InputError is Import refusing its input before sending the part of it
// that holds the fault: the first line is not the export header, a line
// is not JSON or is longer than a request, the input is empty. The
// service's own refusal of a line is a *ServiceError with Code 400; both
// are bad input, not a failure of the service.
type InputError struct {
	// Line is the input's line number, from 1; 0 when the input is empty.
	Line    int
	Problem string
}

func (e *InputError) Error() string {
	if e.Line == 0 {
		return "memoryd import: " + e.Problem
	}
	return fmt.Sprintf("memoryd import: line %d: %s", e.Line, e.Problem)
}

// fileLine rewrites a service error naming "line N" of a request (whose
// line 1 is the header and line 2 the file's line first) to the file's
// line number.
func fileLine(err error, first int) error {
	var se *ServiceError
	if !errors.As(err, &se) {
		return err
	}
	rest, ok := strings.CutPrefix(se.Description, "line ")
	if !ok {
		return err
	}
	numText, tail, ok := strings.Cut(rest, ":")
	n, convErr := strconv.Atoi(numText)
	if !ok || convErr != nil {
		return err
	}
	if n > 1 {
		n = first + n - 2
	}
	return &ServiceError{Code: se.Code, Description: fmt.Sprintf("line %d:%s", n, tail)}
}
