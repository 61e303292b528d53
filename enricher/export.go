package enricher

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// Exporter is what memory.export and memory.import need: a user's memory
// as JSON lines, out and in (store.SpoolExport, store.ReadSpool,
// store.ImportInto; store.Export for a previous release's cursor). *store.Store has it; a Config.Store without it
// answers these endpoints 501.
type Exporter interface {
	SpoolExport(ctx context.Context, userID, token string, head int, spool func(head []byte, whole bool) bool) ([]byte, int64, string, error)
	ReadSpool(ctx context.Context, userID, token, id string, off int64, n int) ([]byte, int64, error)
	DeleteSpool(ctx context.Context, userID, id string) error
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
	logger       *slog.Logger
	builds       chan struct{} // see build
}

func (s *Service) exports() exports {
	e, _ := s.cfg.Store.(Exporter)
	return exports{store: e, maxPageBytes: func() int { return s.maxReply() - exportEnvelope }, logger: s.logger, builds: s.exportBuilds}
}

// build waits for the process's one slot for reading a whole export, and
// returns its release. An export's first page reads the whole memory and
// writes its copy on two of the pool's connections (and a previous
// release's cursor holds the whole export in memory: legacyPage), so
// exports of heavy users at once would take the pool from enrich, and
// before the copy was written in parts multiplied serve's peak (a
// heavy-user walk: one 64 MB export took its RSS from 78 MB to 386 MB,
// four at once to 1.22 GB); one at a time, the others wait within their
// request's bound.
func (e exports) build(ctx context.Context) (release func(), err error) {
	select {
	case e.builds <- struct{}{}:
		return func() { <-e.builds }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// exportEnvelope bounds a page's bytes other than its lines:
// {"lines":"","next":"<cursor>"}.
const exportEnvelope = 128

func (e exports) enabled() error {
	if e.store == nil {
		return &events.ServiceError{Code: 501, Description: "export and import are not enabled on this memoryd"}
	}
	return nil
}

// export answers one page. The first page reads the export from one
// snapshot; when it is longer than a page, it is saved whole (a spool) and
// the cursor names the copy and the byte the next page starts at, so that
// every page of one export is cut from that snapshot however the memory
// changes meanwhile, and a page reads only its own bytes.
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
		maxPage := e.maxPageBytes()
		if req.Cursor == "" {
			// The first page is cut once, where it decides the copy.
			end := 0
			release, err := e.build(ctx)
			if err != nil {
				return nil, err
			}
			defer release()
			// The first maxPage bytes hold the first page (its escaped
			// bytes are at least its bytes), cut as a later page is.
			head, _, spool, err := e.store.SpoolExport(ctx, req.UserID, token, maxPage, func(head []byte, whole bool) bool {
				end = pageEnd(head, whole, maxPage)
				return end < len(head) || !whole
			})
			if errors.Is(err, store.ErrSpoolGone) {
				// A forget overtook it between its snapshot and its copy.
				return nil, &events.ServiceError{Code: 409, Description: "the user was forgotten while this export began: export again from the start"}
			}
			if err != nil {
				return nil, err
			}
			reply := events.ExportReply{Lines: string(head[:end])}
			if spool != "" {
				reply.Next = spoolCursor(spool, int64(end))
			}
			return reply, nil
		}
		spool, off, ok := parseSpoolCursor(req.Cursor)
		if !ok {
			if line, lineOff, digest, legacy := parseLegacyCursor(req.Cursor); legacy {
				return e.legacyPage(ctx, req.UserID, line, lineOff, digest, maxPage)
			}
			return nil, &events.ServiceError{Code: 409, Description: "the cursor is not one this memoryd gave (altered, or from another release): export again from the start"}
		}
		// A page's escaped bytes are at least its bytes: maxPage bytes
		// hold the whole page.
		part, size, err := e.store.ReadSpool(ctx, req.UserID, token, spool, off, maxPage)
		if errors.Is(err, store.ErrSpoolGone) {
			return nil, &events.ServiceError{Code: 409, Description: fmt.Sprintf("this export's copy is gone (its last page was served, it was unread for %s, replaced by newer exports of the user, another user's, or the user was forgotten since): export again from the start", store.SpoolTTL)}
		}
		if err != nil {
			return nil, err
		}
		if off >= size {
			return nil, &events.ServiceError{Code: 409, Description: "the cursor is past the end of the export: export again from the start"}
		}
		end := pageEnd(part, off+int64(len(part)) == size, maxPage)
		reply := events.ExportReply{Lines: string(part[:end])}
		if next := off + int64(end); next < size {
			reply.Next = spoolCursor(spool, next)
		} else if err := e.store.DeleteSpool(ctx, req.UserID, spool); err != nil {
			// The last page: the copy of the user's memory goes now, not
			// an hour later. Should this fail, the reconcile job deletes
			// it then; the page is still the export's.
			e.logger.Warn("cannot delete an export's copy after its last page", "error", err)
		}
		return reply, nil
	}, nil
}

// spoolCursor is an export cursor: "s<offset>.<copy id>".
func spoolCursor(spool string, off int64) string {
	return "s" + strconv.FormatInt(off, 10) + "." + spool
}

func parseSpoolCursor(c string) (spool string, off int64, ok bool) {
	rest, found := strings.CutPrefix(c, "s")
	if !found {
		return "", 0, false
	}
	n, spool, found := strings.Cut(rest, ".")
	off, err := strconv.ParseInt(n, 10, 64)
	// An offset past the copy's end is refused by the page (ReadSpool
	// reads the size first), a 409.
	if !found || err != nil || off <= 0 || len(spool) != 32 {
		return "", 0, false
	}
	if _, err := hex.DecodeString(spool); err != nil {
		return "", 0, false
	}
	return spool, off, true
}

// pageEnd is the length of the page that starts b (part of an export, at
// a line's start or inside one a page split): whole lines, as many as fit
// in maxPage JSON-escaped, or, when the first line alone does not fit, as
// much of it as does (the page ends inside it, and the next starts where
// it ended, so that the pages concatenated are still the export). complete
// says b runs to the export's end; otherwise its last line may be cut
// short and is never taken whole.
func pageEnd(b []byte, complete bool, maxPage int) int {
	end, size := 0, 0
	for end < len(b) {
		n := bytes.IndexByte(b[end:], '\n') + 1
		whole := n > 0 || complete
		if n == 0 {
			n = len(b) - end
		}
		if size += escapedLen(b[end : end+n]); size <= maxPage && whole {
			end += n
			continue
		}
		if end == 0 {
			if !complete {
				// Not a rune cut where the part was read.
				b = wholeRunes(b)
			}
			return fitEscaped(b, maxPage)
		}
		break
	}
	return end
}

// wholeRunes is b without a rune cut short at its end.
func wholeRunes(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// escapedLen is the bytes b takes inside a JSON string as the reply's
// encoder writes it (encoding/json without HTML escaping), quotes not
// counted: quotes, backslashes and the control characters with a short
// escape (\b \f \n \r \t) take 2, other control characters 6 (\u00XX),
// U+2028 and U+2029 6, each byte of invalid UTF-8 6 (\ufffd), the rest
// as is. Exact, so that an export page of CJK text holds what fits, not
// half; counting beats encoding each line only to measure it.
func escapedLen[T string | []byte](b T) int {
	n := 0
	for i := 0; i < len(b); {
		if c := b[i]; c < utf8.RuneSelf {
			n += int(asciiEscaped[c])
			i++
			continue
		}
		size, esc := escapedStep(b, i)
		n += esc
		i += size
	}
	return n
}

// asciiEscaped is escapedLen of each ASCII byte: a table, as escapedLen
// runs over every enrich reply's text (enrichBound).
var asciiEscaped = func() (t [utf8.RuneSelf]uint8) {
	for c := range t {
		switch {
		case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
			t[c] = 2
		case c < 0x20:
			t[c] = 6
		default:
			t[c] = 1
		}
	}
	return t
}()

// escapedStep is the step encoding/json takes at b[i]: size is the bytes
// utf8.DecodeRune would read (1 for ASCII, a valid sequence, or 1 for a
// byte of an invalid one) and esc the bytes written for them. Decoded
// here rather than by utf8 so that it serves strings and byte slices
// alike without a conversion. escapedLen counts ASCII itself, inline.
func escapedStep[T string | []byte](b T, i int) (size, esc int) {
	c := b[i]
	lo, hi := byte(0x80), byte(0xBF) // the second byte's range
	switch {
	case c < utf8.RuneSelf:
		return 1, int(asciiEscaped[c])
	case c >= 0xC2 && c <= 0xDF:
		size = 2
	case c >= 0xE0 && c <= 0xEF:
		size = 3
		if c == 0xE0 { // not overlong
			lo = 0xA0
		} else if c == 0xED { // not a surrogate
			hi = 0x9F
		}
	case c >= 0xF0 && c <= 0xF4:
		size = 4
		if c == 0xF0 { // not overlong
			lo = 0x90
		} else if c == 0xF4 { // not over U+10FFFF
			hi = 0x8F
		}
	default:
		return 1, 6
	}
	if len(b)-i < size || b[i+1] < lo || b[i+1] > hi {
		return 1, 6
	}
	for j := i + 2; j < i+size; j++ {
		if b[j] < 0x80 || b[j] > 0xBF {
			return 1, 6
		}
	}
	if c == 0xE2 && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9) {
		return 3, 6 // U+2028, U+2029
	}
	return size, size
}

// fitEscaped is the length of the longest start of b, ending on a rune
// boundary, whose escapedLen is at most limit; at least one rune, so that
// a split line always advances.
func fitEscaped(b []byte, limit int) int {
	n, end := 0, 0
	for end < len(b) {
		size, esc := escapedStep(b, end)
		if n += esc; n > limit && end > 0 {
			break
		}
		end += size
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

// CheckImportLine makes memory.import's checks of one line of an export
// (n counts from the header as 1), writing nothing: a field named twice,
// in the same or another case (as a request's own fields are refused for,
// decodeWrite), then the store's decoding (unknown fields, limits). The
// error is the reason memory.import refuses the line for, without its
// number; `memoryd import` checks a whole file with it first, so that a bad
// line in a later request refuses the file before any is committed.
func CheckImportLine(n int, line []byte) error {
	if err := repeatedLineKey(line); err != nil {
		return err
	}
	return store.CheckImportLine(n, line)
}

// repeatedLineKey refuses an import line naming a field twice: the store
// decodes lines with encoding/json, which keeps the last, where any other
// reader of the export sees the first.
func repeatedLineKey(line []byte) error {
	var head struct {
		Type string `json:"type"`
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal(line, &keys) != nil || json.Unmarshal(line, &head) != nil {
		return nil // not an object: the store names the line
	}
	// The line type's fields, named as the format spells them; for a type
	// the store does not know (which it refuses anyway), the line's keys.
	fields := store.ImportLineFields(head.Type)
	if fields == nil {
		fields = slices.Collect(maps.Keys(keys))
	}
	if name, first, second := events.RepeatedKey(line, fields); name != "" {
		return fmt.Errorf("%s %s", name, events.GivenTwice(first, second))
	}
	return nil
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
	for i, l := range req.Lines {
		if err := repeatedLineKey(l); err != nil {
			return nil, badRequest("line %d: %v; nothing of this request was imported", i+1, err)
		}
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

// parseLegacyCursor reads a cursor of the release before migration 057,
// "<line>[+<offset>].<digest>": the export's line the page starts at (the
// bytes into it when a page split it) and a digest of the whole export.
// During a rolling upgrade an export begun on a previous-release serve
// sends it here for its next page. It can go once no serve of a release
// before 057 runs beside this one.
func parseLegacyCursor(c string) (line, off int, digest string, ok bool) {
	pos, digest, found := strings.Cut(c, ".")
	if !found || len(digest) != 24 {
		return 0, 0, "", false
	}
	if _, err := hex.DecodeString(digest); err != nil {
		return 0, 0, "", false
	}
	n, o, split := strings.Cut(pos, "+")
	line, err := strconv.Atoi(n)
	if err != nil || line < 0 {
		return 0, 0, "", false
	}
	if split {
		if off, err = strconv.Atoi(o); err != nil || off <= 0 {
			return 0, 0, "", false
		}
	} else if line == 0 {
		return 0, 0, "", false // the header is only ever resumed inside
	}
	return line, off, digest, true
}

// legacyPage serves a previous release's cursor as that release did: the
// export is read again from one snapshot and the page cut from it, a
// memory changed since (another digest) being a 409; its next cursor is
// of the same form, so that either release serves the page after it.
func (e exports) legacyPage(ctx context.Context, userID string, line, off int, digest string, maxPage int) (any, error) {
	release, err := e.build(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	// That release's cursors count lines of the whole export and its
	// digest: it is read whole, as that release did.
	var buf bytes.Buffer
	if err := e.store.Export(ctx, userID, &buf); err != nil {
		return nil, err
	}
	all := buf.Bytes()
	sum := sha256.Sum256(all)
	d := hex.EncodeToString(sum[:12])
	if d != digest {
		return nil, &events.ServiceError{Code: 409, Description: "the memory changed since this export began (or the cursor is not one memoryd gave): export again from the start"}
	}
	pos := 0
	for i := 0; i < line; i++ {
		n := bytes.IndexByte(all[pos:], '\n')
		if n < 0 {
			pos = -1
			break
		}
		pos += n + 1
	}
	if pos < 0 || pos+off >= len(all) || (off > 0 && bytes.IndexByte(all[pos:pos+off], '\n') >= 0) {
		return nil, &events.ServiceError{Code: 409, Description: "the cursor is past the end of the export: export again from the start"}
	}
	pos += off
	end := pos + pageEnd(all[pos:], true, maxPage)
	reply := events.ExportReply{Lines: string(all[pos:end])}
	if end < len(all) {
		lineStart := bytes.LastIndexByte(all[:end], '\n') + 1
		next := strconv.Itoa(bytes.Count(all[:end], []byte("\n")))
		if end > lineStart {
			next += "+" + strconv.Itoa(end-lineStart)
		}
		reply.Next = next + "." + d
	}
	return reply, nil
}
