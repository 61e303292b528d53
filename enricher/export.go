package enricher

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// Exporter is what memory.export and memory.import need: a user's memory
// as JSON lines, out and in (store.Export, store.Import). *store.Store has
// it; a Config.Store without it answers these endpoints 501.
type Exporter interface {
	Export(ctx context.Context, userID string, w io.Writer) error
	ImportInto(ctx context.Context, userID, token, memory string, r io.Reader) (store.Imported, string, error)
}

// exports answers memory.export and memory.import.
type exports struct {
	store Exporter // nil: not enabled
	// maxPageBytes bounds a page's lines as JSON text: the connection's
	// max payload less the reply's other bytes. A function, read at each
	// page: the server's max_payload may change on a reconnect.
	maxPageBytes func() int
}

func (s *Service) exports() exports {
	e, _ := s.cfg.Store.(Exporter)
	return exports{store: e, maxPageBytes: func() int { return s.maxReply() - exportEnvelope }}
}

// exportEnvelope bounds a page's bytes other than its lines:
// {"lines":"","next":"<line>.<digest>"}.
const exportEnvelope = 128

func (e exports) enabled() error {
	if e.store == nil {
		return &events.ServiceError{Code: 501, Description: "export and import are not enabled on this memoryd"}
	}
	return nil
}

// export answers one page. Each page reads the whole export again from one
// snapshot and cuts the page out of it by line; the cursor holds the next
// line's number and a digest of the export it was cut from, so that a
// memory that changed between pages is a 409 (start again), never a
// stitched export. The cost is a full read per page: an export is an
// occasional admin act, and most users' memory fits one page.
func (e exports) export(token string, data []byte) (call, error) {
	var req events.ExportRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	if err := checkUser(token, req.UserID); err != nil {
		return nil, err
	}
	if len(req.Cursor) > events.MaxCursorBytes {
		return nil, badRequest("cursor is %d bytes, over the %d byte limit", len(req.Cursor), events.MaxCursorBytes)
	}
	if err := e.enabled(); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		var buf bytes.Buffer
		if err := e.store.Export(ctx, req.UserID, &buf); err != nil {
			return nil, err
		}
		all := buf.Bytes()
		sum := sha256.Sum256(all)
		digest := hex.EncodeToString(sum[:12])
		start, offset := 0, 0 // the page starts at lines[start][offset:]
		if req.Cursor != "" {
			pos, d, ok := strings.Cut(req.Cursor, ".")
			// "<line>+<offset>": the rest of a line split across pages.
			n, off, split := strings.Cut(pos, "+")
			line, err := strconv.Atoi(n)
			if split && err == nil {
				offset, err = strconv.Atoi(off)
				ok = ok && offset > 0
			}
			// Line 0, the header, is only ever resumed inside (a
			// max_payload too small for it whole).
			if !ok || err != nil || line < 0 || (line == 0 && !split) || d != digest {
				return nil, &events.ServiceError{Code: 409, Description: "the memory changed since this export began (or the cursor is not one memoryd gave): export again from the start"}
			}
			start = line
		}
		lines := bytes.SplitAfter(all, []byte("\n"))
		if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
			lines = lines[:len(lines)-1]
		}
		if start > len(lines) || offset > 0 && (start == len(lines) || offset >= len(lines[start])) {
			return nil, &events.ServiceError{Code: 409, Description: "the cursor is past the end of the export: export again from the start"}
		}
		var page []byte
		maxPage := e.maxPageBytes()
		end, size := start, 0
		for ; end < len(lines); end++ {
			line := lines[end]
			if end == start {
				line = line[offset:]
			}
			if size += escapedLen(line); size <= maxPage {
				page = append(page, line...)
				continue
			}
			if end > start {
				break // whole lines a page, at least one
			}
			// A line too long for any page alone (text mostly of control
			// characters, or a low max_payload) is split: the page ends
			// inside it and the next starts where it ended, so that the
			// pages concatenated are still the export.
			cut := fitEscaped(line, maxPage)
			return events.ExportReply{
				Lines: string(line[:cut]),
				Next:  strconv.Itoa(start) + "+" + strconv.Itoa(offset+cut) + "." + digest,
			}, nil
		}
		reply := events.ExportReply{Lines: string(page)}
		if end < len(lines) {
			reply.Next = strconv.Itoa(end) + "." + digest
		}
		return reply, nil
	}, nil
}

// escapedLen bounds the bytes b takes inside a JSON string as the reply's
// encoder writes it (without HTML escaping): quotes, backslashes and the
// usual control characters take 2, other control characters 6, bytes of
// multi-byte runes at most 2 (U+2028 and U+2029 are escaped: 6 bytes for
// 3; an export is valid UTF-8, Postgres text), the rest 1. Counting beats
// encoding each line only to measure it.
func escapedLen[T string | []byte](b T) int {
	n := 0
	for i := 0; i < len(b); i++ {
		n += escapedByte(b[i])
	}
	return n
}

func escapedByte(c byte) int {
	switch {
	case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
		return 2
	case c < 0x20:
		return 6
	case c >= 0x80:
		return 2
	default:
		return 1
	}
}

// fitEscaped is the length of the longest start of b, ending on a rune
// boundary, whose escapedLen is at most limit; at least one rune, so that
// a split line always advances.
func fitEscaped(b []byte, limit int) int {
	n, end := 0, 0
	for i := 0; i < len(b); {
		_, w := utf8.DecodeRune(b[i:])
		for _, c := range b[i : i+w] {
			n += escapedByte(c)
		}
		if n > limit && end > 0 {
			break
		}
		i += w
		end = i
	}
	return end
}

// importEnvelopeBytes is what an import request may hold beyond its lines'
// bound (events.MaxImportRequestBytes).
const importEnvelopeBytes = 64 << 10

// linesAsText reports whether an import request's lines field is a string.
func linesAsText(data []byte) bool {
	var probe struct {
		Lines json.RawMessage `json:"lines"`
	}
	return json.Unmarshal(data, &probe) == nil && len(probe.Lines) > 0 && probe.Lines[0] == '"'
}

// importLines answers memory.import: the request's lines, the header
// first, merged into the user's memory in one transaction (store.Import).
func (e exports) importLines(token string, data []byte) (call, error) {
	// The lines' bound, and room for the request's other fields and the
	// array around the lines.
	if limit := events.MaxImportRequestBytes + importEnvelopeBytes; len(data) > limit {
		return nil, badRequest("request is %d bytes, over the %d byte limit of an import request (%d bytes of lines and the rest): send the export in several requests, each starting with the header",
			len(data), limit, events.MaxImportRequestBytes)
	}
	var req events.ImportRequest
	if err := decodeWrite(data, &req); err != nil {
		if linesAsText(data) {
			// The likely mistake: export's "lines" (one string) sent back
			// as it came.
			return nil, badRequest("malformed request: lines must be an array of the export's lines, each parsed as a JSON object, not one string: split the export's lines at each newline and parse each")
		}
		return nil, err
	}
	if err := checkUser(token, req.UserID); err != nil {
		return nil, err
	}
	if len(req.Lines) == 0 {
		return nil, badRequest("lines is required: the export's lines as JSON objects, the header %s first", events.ExportHeader)
	}
	if len(req.MemoryID) > events.MaxMemoryIDBytes {
		return nil, badRequest("memory_id is %d bytes, over the %d byte limit: send the memory_id an earlier import reply gave, or none", len(req.MemoryID), events.MaxMemoryIDBytes)
	}
	if err := e.enabled(); err != nil {
		return nil, err
	}
	var in bytes.Buffer
	for _, l := range req.Lines {
		// Compact: a line sent pretty-printed must stay one line.
		if err := json.Compact(&in, l); err != nil {
			return nil, badRequest("lines: %s", jsonReason(err))
		}
		in.WriteByte('\n')
	}
	return func(ctx context.Context) (any, error) {
		counts, memory, err := e.store.ImportInto(ctx, req.UserID, token, req.MemoryID, &in)
		var ie *store.ImportError
		switch {
		case errors.As(err, &ie):
			return nil, badRequest("line %d: %v; nothing of this request was imported", ie.Line, ie.Err)
		case errors.Is(err, store.ErrImportTooLarge):
			return nil, badRequest("%v", err)
		case errors.Is(err, store.ErrMemoryForgotten):
			return nil, &events.ServiceError{Code: 409, Description: "the user was forgotten since memory_id " + req.MemoryID +
				" (what this import's earlier requests wrote went with it): nothing of this request was imported; import the whole export again to restore it"}
		case err != nil:
			return nil, err
		}
		return events.ImportReply{Imported: counts, MemoryID: memory}, nil
	}, nil
}
