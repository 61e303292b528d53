package store

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Export and import of one user's memory (issue 16 item 7) as JSON lines:
// a header line, then one line per row, by type in a fixed order (see
// sections), each type sorted by a stable natural key, so that the same
// memory always exports to the same bytes: export, forget, import and export
// again gives the first export back. Lines hold no user id and no database
// id: the user is the one Export and Import are called for, so an import
// can never write another user's memory. Turns and token usage are not
// exported: the turn stream is their source of truth.
//
// Adding a line type is one section (an exportSection value in sections,
// its line struct and three functions): the format's reader, writer and
// transaction come from here.

// The header, the first line of every export.
const (
	// ExportType is the header's "type".
	ExportType = "memoryd.export"
	// ExportVersion is the format version written and the only one read.
	ExportVersion = 1
)

// MaxImportBytes bounds one Import's input. Larger memory is imported in
// several parts (each a header and some of the lines): merging makes the
// parts add up to the whole.
const MaxImportBytes = 16 << 20

// exportTimeLayout writes times in RFC 3339 with microseconds (what
// Postgres keeps) in UTC, always the same width for the same instant.
const exportTimeLayout = "2006-01-02T15:04:05.000000Z07:00"

func exportTime(t time.Time) string { return t.UTC().Format(exportTimeLayout) }

// exportHeader is the first line.
type exportHeader struct {
	Type    string `json:"type"`
	Version int    `json:"version"`
}

// exportSection is one line type: how its rows are read for an export
// (sorted by their natural key), how a line of it is parsed and checked,
// and how an import's lines of it are written.
type exportSection struct {
	typ string
	// read passes the user's rows as lines to emit, in export order.
	read func(ctx context.Context, q *Store, userID string, emit func(line any) error) error
	// parse decodes and checks one line (unknown fields refused).
	parse lineParser
	// apply merges the import's lines of this type, in file order, into the
	// user's memory and returns how many rows it wrote or changed.
	apply func(ctx context.Context, q *Store, userID string, lines []any) (int64, error)
}

// sections are the line types in the order an export writes them.
var sections = []exportSection{
	{"fact", collected(readFacts), parseLine(checkFactLine), applyFacts},
	{"fact_item", collected(readFactItems), parseLine(checkFactItemLine), applyFactItems},
	{"fact_history", readHistory, parseLine(checkHistoryLine), applyHistory},
	{"fact_clear", collected(readFactClears), parseLine(checkFactClearLine), applyFactClears},
	{"fact_direct_clear", collected(readFactDirectClears), parseLine(checkFactClearLine), applyFactDirectClears},
	{"fact_value_clear", collected(readFactValueClears), parseLine(checkFactValueClearLine), applyFactValueClears},
	{"context", readContext, parseLine(checkContextLine), applyContext},
	{"context_clear", collected(readContextClears), parseLine(checkContextClearLine), applyContextClears},
}

// collected is the read of a section whose rows are read whole and sorted
// in Go (an order Postgres cannot give, or one not worth asking of it):
// those of a user's keys, items and clears, which do not grow with every
// turn. Context and history do, and are streamed in the order their query
// gives (SpoolExport holds a chunk of the export, not the memory).
func collected(read func(ctx context.Context, q *Store, userID string) ([]any, error)) func(context.Context, *Store, string, func(any) error) error {
	return func(ctx context.Context, q *Store, userID string, emit func(any) error) error {
		lines, err := read(ctx, q, userID)
		if err != nil {
			return err
		}
		for _, l := range lines {
			if err := emit(l); err != nil {
				return err
			}
		}
		return nil
	}
}

// applyOrder is the order an import writes the types in, whatever the
// order of its lines: clears first, so that they apply to the lines
// imported with them; history after every fact write (a line type that
// writes facts goes before it), since the history those writes add is
// dropped, just before the imported entries go in.
var applyOrder = []string{"fact_value_clear", "fact_direct_clear", "fact_clear", "context_clear", "fact", "fact_item", "fact_history", "context"}

func section(typ string) (exportSection, bool) {
	for _, s := range sections {
		if s.typ == typ {
			return s, true
		}
	}
	return exportSection{}, false
}

// Export writes the user's memory to w as JSON lines (see the top of this
// file), read from one snapshot. A user without memory exports the header
// alone.
func (s *Store) Export(ctx context.Context, userID string, w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false) // text as stored, not \u003c for "<"
	if err := enc.Encode(exportHeader{Type: ExportType, Version: ExportVersion}); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	err := s.snapshot(ctx, func(q *Store) error {
		for _, sec := range sections {
			if err := sec.read(ctx, q, userID, enc.Encode); err != nil {
				return fmt.Errorf("%s: %w", sec.typ, err)
			}
		}
		return nil
	})
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

// snapshot runs fn in a read-only repeatable-read transaction, so that all
// its reads see one snapshot, or in s's transaction when s has one.
func (s *Store) snapshot(ctx context.Context, fn func(q *Store) error) error {
	if _, ok := s.db.(pgx.Tx); ok {
		return fn(s)
	}
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		return fn(s.WithTx(tx))
	})
}

// ImportError is a line Import refused; nothing was written.
type ImportError struct {
	// Line is the 1-based line number in the input (the header is line 1).
	Line int
	Err  error
}

func (e *ImportError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *ImportError) Unwrap() error { return e.Err }

// ErrImportTooLarge is wrapped by Import's error for an input over
// MaxImportBytes.
var ErrImportTooLarge = errors.New("import too large")

// Imported counts, by line type, the rows an import wrote or changed; lines
// the memory already held (or that lost to newer memory) count nothing.
type Imported map[string]int64

// Import merges an export (see Export) into the user's memory, in one
// transaction, by the rules every write follows: a fact is kept when its
// source time is the latest (ties as UpsertFacts), clears are kept (the
// latest of two), apply to the memory already there and keep older lines
// out, a context item already held (same content hash) is not duplicated,
// and a history entry identical to one held is not added again, so
// importing twice is importing once. The input is read and checked whole
// first: a bad line (an *ImportError naming it) or an input over
// MaxImportBytes writes nothing. token is the user's subject token: the
// import holds the user's lock (see LockUsers), so a forget waits for it to
// commit and deletes it all, or comes first.
//
// It refuses a schema a newer memoryd migrated (Config.SchemaVersion),
// writing nothing. The import's own writes add no history of their own:
// the imported entries are the facts' history. They are one
// memory.imported change (see changes.go), when they wrote anything.
func (s *Store) Import(ctx context.Context, userID, token string, r io.Reader) (Imported, error) {
	counts, _, err := s.ImportInto(ctx, userID, token, "", r)
	return counts, err
}

// ErrMemoryForgotten is wrapped by ImportInto's error when the user's
// memory is no longer the one named: it was forgotten since.
var ErrMemoryForgotten = errors.New("the user's memory was forgotten since")

// ImportInto is Import into the memory named memory (a MemoryID an
// earlier request of the same import returned; "" any), returning the
// MemoryID of the memory it wrote into. A forget since that earlier request
// (whose writes it deleted) makes it ErrMemoryForgotten, writing nothing:
// an import sent in several requests stops there, rather than write the
// rest of the file into the memory the forget began.
func (s *Store) ImportInto(ctx context.Context, userID, token, memory string, r io.Reader) (Imported, string, error) {
	byType, err := readImport(r)
	if err != nil {
		return nil, "", fmt.Errorf("import: %w", err)
	}
	counts := Imported{}
	var current string
	err = s.InTx(ctx, func(_ pgx.Tx, q *Store) error {
		tombs, err := q.LockUsers(ctx, []string{token})
		if err != nil {
			return err
		}
		// Next, before any other lock (the order of the enricher's writes
		// and a forget, user lock first): a reset of every user in flight
		// commits first, or waits for this import (see resetLock).
		if err := q.lockResets(ctx); err != nil {
			return err
		}
		current = MemoryID(tombs[token])
		if memory != "" && memory != current {
			return ErrMemoryForgotten
		}
		if err := q.CheckSchema(ctx); err != nil {
			return err
		}
		// Exclusive, as for a clear: extraction's writes for the user wait,
		// and none interleaves with the merge.
		if err := q.lockClears(ctx, []string{userID}, true); err != nil {
			return err
		}
		// Before the clears below delete (and lock) any item (see
		// lockLanguageShared).
		if err := q.lockLanguageShared(ctx, userID); err != nil {
			return err
		}
		// One change for the import, not one per row it wrote.
		if err := q.quietly(ctx, func() error { return q.applyImport(ctx, userID, byType, counts) }); err != nil {
			return err
		}
		if err := q.recordImportSources(ctx, userID, byType); err != nil {
			return err
		}
		var total int64
		for _, n := range counts {
			total += n
		}
		if total == 0 {
			return nil
		}
		return q.recordChange(ctx, changeMemoryImported, total, userID)
	})
	if err != nil {
		return nil, "", fmt.Errorf("import: %w", err)
	}
	return counts, current, nil
}

// MemoryID names the memory a user's tombstone leaves (the zero Tombstone:
// never forgotten): each forget begins a new one. It is opaque to clients.
func MemoryID(t Tombstone) string {
	if t.ForgottenAt.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.ForgottenAt.UnixMicro(), 36)
}

// applyImport merges the lines of each type in applyOrder, counting what
// each type wrote in counts.
func (s *Store) applyImport(ctx context.Context, userID string, byType map[string][]any, counts Imported) error {
	for _, typ := range applyOrder {
		if typ == "fact_history" {
			// Every fact write is done: what they added to the history
			// goes before the imported entries come in.
			if err := dropOwnHistory(ctx, s, userID); err != nil {
				return err
			}
		}
		sec, _ := section(typ)
		n, err := sec.apply(ctx, s, userID, byType[typ])
		if err != nil {
			return fmt.Errorf("%s: %w", typ, err)
		}
		counts[typ] = n
		if typ == "fact" {
			if hook, ok := ctx.Value(importHookKey{}).(func()); ok {
				hook()
			}
		}
	}
	return nil
}

// recordImportSources records what the import wrote: for each imported
// fact, list item and context item, its event id and what it holds (see
// migration 036 and rebuilt). A reset keeps the rows that still hold it:
// whether a recorded turn of the user with that id stated them cannot be
// told (two users' frontends may both count 1, 2, ... at the same times),
// and what it keeps a replay at worst rebuilds again, where what it deleted
// would be lost for good.
//
// A fact line's record holds the line too (migration 067): one that lost
// to the user's own later statement of the key is written nowhere else,
// and a reset writes it back (reinstateImportedFacts). A record of before
// 067 gets it when the same line is imported again.
func (s *Store) recordImportSources(ctx context.Context, userID string, byType map[string][]any) error {
	var (
		ids, contents []string
		facts         []*string // NULL but for facts
	)
	add := func(id, content string, fact *string) {
		if id != "" {
			ids, contents, facts = append(ids, id), append(contents, content), append(facts, fact)
		}
	}
	jsonOf := func(v any) (*string, error) {
		line, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("record import sources: %w", err)
		}
		js := string(line)
		return &js, nil
	}
	lists := map[string]bool{}
	for _, l := range byType["fact_item"] {
		if f, ok := l.(*factItemLine); ok {
			lists[f.Key] = true
			js, err := jsonOf(importedFactLine{Key: f.Key, Value: f.Value, Present: &f.Present, SourceAt: f.sourceAt,
				ConversationID: f.ConversationID, Extractor: f.Extractor, Model: f.Model, PromptVersion: f.PromptVersion})
			if err != nil {
				return err
			}
			add(f.EventID, "i:"+f.Key+":"+itemIdentity(f.Value), js)
		}
	}
	for _, l := range byType["fact"] {
		if f, ok := l.(*factLine); ok {
			sum := md5.Sum([]byte(f.Value))
			// A list key's line is its items joined, derived from them:
			// the reset writes the items back, never it as one value
			// (TestResetWritesBackAListAnImportBrought).
			var js *string
			if !lists[f.Key] {
				var err error
				if js, err = jsonOf(importedFactLine{Key: f.Key, Value: f.Value, SourceAt: f.sourceAt, ConversationID: f.ConversationID,
					Extractor: f.Extractor, Model: f.Model, PromptVersion: f.PromptVersion, UpdatedAt: f.updatedAt}); err != nil {
					return err
				}
			}
			add(f.EventID, "f:"+f.Key+":"+hex.EncodeToString(sum[:]), js)
		}
	}
	for _, l := range byType["context"] {
		if c, ok := l.(*contextLine); ok {
			add(c.EventID, "c:"+hex.EncodeToString(ContentHash(userID, c.Question, c.Answer)), nil)
		}
	}
	if len(ids) == 0 {
		return s.dropClearedImportedFacts(ctx, userID, byType)
	}
	// One row per record (ON CONFLICT cannot touch a row twice in one
	// statement): of two lines of a key with one value and event id, the
	// later.
	if _, err := s.db.Exec(ctx, `
		INSERT INTO import_sources AS i (user_id, event_id, content, fact)
		SELECT DISTINCT ON (e, c) $1, e, c, f FROM unnest($2::text[], $3::text[], $4::jsonb[]) AS w(e, c, f)
		ORDER BY e, c, (f->>'source_at')::timestamptz DESC NULLS LAST
		ON CONFLICT (user_id, event_id, content) DO UPDATE SET fact = excluded.fact
		WHERE i.fact IS NULL AND excluded.fact IS NOT NULL`, userID, ids, contents, facts); err != nil {
		return fmt.Errorf("record import sources: %w", err)
	}
	return s.dropClearedImportedFacts(ctx, userID, byType)
}

// dropClearedImportedFacts takes out of the records of imported fact lines
// (import_sources.fact) those a clear keeps out: one the import's own
// clears or the memory's covered (applyFacts did not write it, and a value
// delete left a clear of the key at the value's time), and, by this
// import's clear lines, those of earlier imports. A reset drops the clears
// imports brought with those turns made (resetClears), and no replay
// makes them again: it wrote the line back, the key saying again what an
// import had cleared (TestResetKeepsAFactAnImportClearedCleared). The
// record itself stays (rebuilt). A line that a later turn's clear covers
// stays, as one that lost to a later statement does: the replay clears it
// again.
func (s *Store) dropClearedImportedFacts(ctx context.Context, userID string, byType map[string][]any) error {
	type value struct{ key, item string }
	keys, values := map[string]time.Time{}, map[value]time.Time{}
	var named []string
	for _, l := range typed[*factClearLine](byType["fact_clear"]) {
		if t, ok := keys[l.Key]; !ok || l.clearedAt.After(t) {
			keys[l.Key] = l.clearedAt
		}
		named = append(named, l.Key)
	}
	for _, l := range typed[*factValueClearLine](byType["fact_value_clear"]) {
		v := value{l.Key, l.Item}
		if t, ok := values[v]; !ok || l.clearedAt.After(t) {
			values[v] = l.clearedAt
		}
		named = append(named, l.Key)
	}
	for _, l := range typed[*factLine](byType["fact"]) {
		named = append(named, l.Key)
	}
	if len(named) == 0 {
		return nil
	}
	rows, err := s.db.Query(ctx, `SELECT i.event_id, i.content, i.fact->>'key', i.fact->>'value', (i.fact->>'source_at')::timestamptz,
			EXISTS (SELECT FROM fact_clears c WHERE c.user_id = i.user_id AND c.key = i.fact->>'key' AND c.cleared_at >= (i.fact->>'source_at')::timestamptz)
		FROM import_sources i WHERE i.user_id = $1 AND i.fact IS NOT NULL AND starts_with(i.content, 'f:') AND i.fact->>'key' = ANY($2)`, userID, named)
	if err != nil {
		return fmt.Errorf("record import sources: %w", err)
	}
	var (
		events, contents []string
		e, c, k, v       string
		at               time.Time
		cleared          bool
	)
	if _, err := pgx.ForEachRow(rows, []any{&e, &c, &k, &v, &at, &cleared}, func() error {
		kt, byKey := keys[k]
		vt, byValue := values[value{k, itemIdentity(v)}]
		if cleared || byKey && !kt.Before(at) || byValue && !vt.Before(at) {
			events, contents = append(events, e), append(contents, c)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("record import sources: %w", err)
	}
	if len(events) == 0 {
		return nil
	}
	if _, err := s.db.Exec(ctx, `UPDATE import_sources i SET fact = NULL FROM unnest($2::text[], $3::text[]) AS w(e, c)
		WHERE i.user_id = $1 AND i.event_id = w.e AND i.content = w.c`, userID, events, contents); err != nil {
		return fmt.Errorf("record import sources: %w", err)
	}
	return nil
}

// importedFactLine is an imported fact line, or list item line (Present
// set), as import_sources.fact holds it (migration 067), with its event
// id in the record's own column.
type importedFactLine struct {
	Key            string    `json:"key"`
	Value          string    `json:"value"`
	Present        *bool     `json:"present,omitempty"`
	SourceAt       time.Time `json:"source_at"`
	ConversationID string    `json:"conversation_id"`
	Extractor      string    `json:"extractor"`
	Model          string    `json:"model"`
	PromptVersion  string    `json:"prompt_version"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// importHookKey keys a test hook Import calls half-way, after writing facts.
type importHookKey struct{}

// readImport reads and checks every line, grouping them by type.
func readImport(r io.Reader) (map[string][]any, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxImportBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxImportBytes {
		return nil, fmt.Errorf("%w: over %d bytes; import it in parts, each with the header", ErrImportTooLarge, MaxImportBytes)
	}
	byType := map[string][]any{}
	n := 0
	for line := range bytes.Lines(data) {
		n++
		line = bytes.TrimRight(line, "\r\n")
		if n == 1 {
			if err := checkHeader(line); err != nil {
				return nil, &ImportError{Line: 1, Err: err}
			}
			continue
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue // a blank line, e.g. a final newline doubled
		}
		typ, l, err := parseImportLine(line)
		if err != nil {
			return nil, &ImportError{Line: n, Err: err}
		}
		byType[typ] = append(byType[typ], l)
	}
	if n == 0 {
		return nil, &ImportError{Line: 1, Err: errors.New(`empty input: expected the header {"type":"memoryd.export","version":1}`)}
	}
	return byType, nil
}

// parseImportLine decodes and checks a line after the header.
func parseImportLine(line []byte) (string, any, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return "", nil, fmt.Errorf("not a JSON object: %w", err)
	}
	sec, ok := section(head.Type)
	if !ok {
		return "", nil, fmt.Errorf("unknown type %q", head.Type)
	}
	l, err := sec.parse.parse(line)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", head.Type, err)
	}
	return head.Type, l, nil
}

// CheckImportLine makes the checks Import makes of one line of an export
// (n counts from the header as 1), writing nothing: a client checks a
// whole file with it before sending any of it, which otherwise goes in
// several requests, each committed alone. The error is Import's reason,
// without the line number.
func CheckImportLine(n int, line []byte) error {
	if n == 1 {
		return checkHeader(line)
	}
	if len(bytes.TrimSpace(line)) == 0 {
		return nil
	}
	_, _, err := parseImportLine(line)
	return err
}

// ImportLineFields returns the JSON names of the fields of an export line
// of type typ (a new slice each call), nil for a type Import does not know.
func ImportLineFields(typ string) []string {
	sec, ok := section(typ)
	if !ok {
		return nil
	}
	return slices.Clone(sec.parse.fields)
}

func checkHeader(line []byte) error {
	var h exportHeader
	if err := json.Unmarshal(line, &h); err != nil || h.Type != ExportType {
		return fmt.Errorf(`not a memoryd export: the first line must be {"type":%q,"version":%d}`, ExportType, ExportVersion)
	}
	if h.Version != ExportVersion {
		return fmt.Errorf("export version %d is not supported: this memoryd reads version %d", h.Version, ExportVersion)
	}
	return nil
}

// lineParser is a line type's decoder and the JSON names of its fields.
type lineParser struct {
	parse  func(data []byte) (any, error)
	fields []string
}

// parseLine decodes a line strictly into a T and checks it.
func parseLine[T any](check func(*T) error) lineParser {
	var fields []string
	t := reflect.TypeFor[T]()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			fields = append(fields, name)
		}
	}
	return lineParser{fields: fields, parse: func(data []byte) (any, error) {
		if !utf8.Valid(data) {
			return nil, errors.New("not valid UTF-8")
		}
		var l T
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return nil, err
		}
		if dec.More() {
			return nil, errors.New("trailing data after the JSON object")
		}
		if err := check(&l); err != nil {
			return nil, err
		}
		return &l, nil
	}}
}

// Limits of imported text, those the write paths apply (events' limits;
// store imports no sibling, so they are repeated here). A fact's value has
// a larger one: a list key's row holds all its items joined, longer than
// any one value written.
const (
	maxKeyBytes      = 256
	maxValueBytes    = 1 << 20
	maxQuestionBytes = 64 << 10
	maxAnswerBytes   = 256 << 10
	maxIDBytes       = 256
	maxScopeBytes    = 128
)

// text checks a text field: its length and no NUL (Postgres text cannot
// hold it); required ones must not be blank.
func text(field, s string, limit int, required bool) error {
	switch {
	case required && strings.TrimSpace(s) == "":
		return fmt.Errorf("%s is required", field)
	case len(s) > limit:
		return fmt.Errorf("%s is %d bytes, over the %d byte limit", field, len(s), limit)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%s contains a NUL character", field)
	}
	return nil
}

// factKey checks a fact key as text does, and that it has no white space
// at its ends: every write path trims the key it is given (facts.set,
// extraction), and so do the reads and clears (facts.get, facts.clear,
// facts.history), so an imported " city " could be neither read nor
// deleted, only listed.
func factKey(key string) error {
	if err := text("key", key, maxKeyBytes, true); err != nil {
		return err
	}
	if strings.TrimSpace(key) != key {
		return fmt.Errorf("key %q has white space at its ends, which facts.get and facts.clear trim: write it without", key)
	}
	return nil
}

// legacyEarliest is the earliest time an import takes (see parseTime).
var legacyEarliest = time.Date(1969, time.December, 31, 0, 0, 0, 0, time.UTC)

// parseTime reads a required RFC 3339 time.
func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, fmt.Errorf("%s is required", field)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q is not an RFC 3339 time", field, s)
	}
	// Years 1970..9999 in UTC, as ingest and the requests take them; and
	// the last day of 1969, which releases that checked the year in the
	// offset as sent stored ("1970-01-01T00:00:00+01:00"), so that their
	// exports import.
	if y := t.UTC().Year(); (y < 1970 && t.Before(legacyEarliest)) || y > 9999 {
		return time.Time{}, fmt.Errorf("%s: year %d is out of range", field, y)
	}
	// No write dates memory in the future (turns are clamped to the time
	// the stream stored them plus the worker's clock skew, 5 minutes by
	// default); an import must not either, or its values would outrank
	// every later turn and facts.set.
	if t.After(time.Now().Add(maxImportFuture)) {
		return time.Time{}, fmt.Errorf("%s %s is in the future", field, s)
	}
	return t, nil
}

// maxImportFuture is how far after now an imported time may be: the
// worker's default clock skew.
const maxImportFuture = 5 * time.Minute

func checkAll(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// ---- fact ----

type factLine struct {
	Type           string `json:"type"`
	Key            string `json:"key"`
	Value          string `json:"value"`
	SourceAt       string `json:"source_at"`
	EventID        string `json:"event_id"`
	ConversationID string `json:"conversation_id"`
	Extractor      string `json:"extractor"`
	Model          string `json:"model"`
	PromptVersion  string `json:"prompt_version"`
	UpdatedAt      string `json:"updated_at"`

	sourceAt, updatedAt time.Time
}

func checkFactLine(l *factLine) (err error) {
	if l.sourceAt, err = parseTime("source_at", l.SourceAt); err != nil {
		return err
	}
	if l.updatedAt, err = parseTime("updated_at", l.UpdatedAt); err != nil {
		return err
	}
	return checkAll(factKey(l.Key), text("value", l.Value, maxValueBytes, false),
		text("event_id", l.EventID, maxIDBytes, false), text("conversation_id", l.ConversationID, maxIDBytes, false),
		text("extractor", l.Extractor, maxIDBytes, false), text("model", l.Model, maxIDBytes, false),
		text("prompt_version", l.PromptVersion, maxIDBytes, false))
}

func readFacts(ctx context.Context, q *Store, userID string) ([]any, error) {
	rows, err := q.db.Query(ctx, `SELECT key, value, source_at, event_id, conversation_id, extractor, model, prompt_version, updated_at
		FROM facts WHERE user_id = $1`, userID)
	if err != nil {
		return nil, err
	}
	var (
		out    []*factLine
		l      factLine
		sa, ua time.Time
	)
	if _, err := pgx.ForEachRow(rows, []any{&l.Key, &l.Value, &sa, &l.EventID, &l.ConversationID, &l.Extractor, &l.Model, &l.PromptVersion, &ua}, func() error {
		c := l
		c.Type, c.SourceAt, c.UpdatedAt = "fact", exportTime(sa), exportTime(ua)
		out = append(out, &c)
		return nil
	}); err != nil {
		return nil, err
	}
	// Sorted in Go, by bytes: the order must not depend on the database's
	// collation.
	slices.SortFunc(out, func(a, b *factLine) int { return strings.Compare(a.Key, b.Key) })
	return anys(out), nil
}

func applyFacts(ctx context.Context, q *Store, userID string, lines []any) (int64, error) {
	ls := typed[*factLine](lines)
	// One line per key, the one that wins by the store's order (source
	// time, a direct write, event id, value: upsertSingles), since ON
	// CONFLICT cannot touch a row twice in one statement.
	direct := func(l *factLine) int {
		if l.Extractor == "direct" {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(ls, func(a, b *factLine) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), b.sourceAt.Compare(a.sourceAt), cmp.Compare(direct(b), direct(a)),
			strings.Compare(b.EventID, a.EventID), strings.Compare(b.Value, a.Value))
	})
	ls = slices.CompactFunc(ls, func(a, b *factLine) bool { return a.Key == b.Key })
	var (
		keys, values, events, convs, xs, ms, ps []string
		ats, ups                                []time.Time
	)
	for _, l := range ls {
		keys, values, events, convs = append(keys, l.Key), append(values, l.Value), append(events, l.EventID), append(convs, l.ConversationID)
		xs, ms, ps = append(xs, l.Extractor), append(ms, l.Model), append(ps, l.PromptVersion)
		ats, ups = append(ats, l.sourceAt), append(ups, l.updatedAt)
	}
	// A value deleted no earlier than stated (fact_value_clears) is not
	// written and clears its key at its time, as in UpsertFacts: the
	// clear keeps it out below, and the values before it go.
	ids := make([]string, len(ls))
	for i, l := range ls {
		ids[i] = itemIdentity(l.Value)
	}
	if _, err := q.db.Exec(ctx, `
		WITH covered AS (
			SELECT w.k, max(w.a) AS a FROM unnest($2::text[], $3::text[], $4::timestamptz[]) AS w(k, it, a)
			WHERE EXISTS (SELECT FROM fact_value_clears v WHERE v.user_id = $1 AND v.key = w.k AND v.item = w.it AND v.cleared_at >= w.a)
			GROUP BY w.k
		), gone AS (
			DELETE FROM facts f USING covered c WHERE f.user_id = $1 AND f.key = c.k AND f.source_at <= c.a
		)
		INSERT INTO fact_clears AS c (user_id, key, cleared_at)
		SELECT $1, k, a FROM covered
		ON CONFLICT (user_id, key) DO UPDATE SET cleared_at = greatest(c.cleared_at, excluded.cleared_at)`,
		userID, keys, ids, ats); err != nil {
		return 0, err
	}
	tag, err := q.db.Exec(ctx, `
		INSERT INTO facts AS f (user_id, key, value, source_at, event_id, conversation_id, extractor, model, prompt_version, updated_at)
		SELECT $1, k, v, a, e, cv, x, m, p, up
		FROM unnest($2::text[], $3::text[], $4::timestamptz[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::timestamptz[])
			AS w(k, v, a, e, cv, x, m, p, up)
		WHERE NOT EXISTS (SELECT FROM fact_clears c WHERE c.user_id = $1 AND c.key = w.k AND c.cleared_at >= w.a)
		ON CONFLICT (user_id, key) DO UPDATE
		SET value = excluded.value, source_at = excluded.source_at, event_id = excluded.event_id,
		    conversation_id = excluded.conversation_id, extractor = excluded.extractor, model = excluded.model,
		    prompt_version = excluded.prompt_version, source_seq = excluded.source_seq, updated_at = excluded.updated_at
		WHERE (f.source_at, f.extractor = 'direct', f.source_seq, f.event_id, f.value)
		    < (excluded.source_at, excluded.extractor = 'direct', excluded.source_seq, excluded.event_id, excluded.value)`,
		userID, keys, values, ats, events, convs, xs, ms, ps, ups)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// dropOwnHistory deletes the history the facts trigger wrote for this
// transaction's writes (the facts, the clears' deletes): the imported
// entries are the history. Import runs in a transaction of its own, never
// a savepoint, so its rows carry its transaction id.
func dropOwnHistory(ctx context.Context, q *Store, userID string) error {
	if _, err := q.db.Exec(ctx, `DELETE FROM fact_history WHERE user_id = $1 AND xmin = pg_current_xact_id()::xid`, userID); err != nil {
		return fmt.Errorf("drop the import's own history: %w", err)
	}
	return nil
}

// ---- fact_item ----

// factItemLine is one item of a list key (fact_items): its latest
// operation, present after an add, a tombstone after a remove. Tombstones
// are exported too: without them an older add of a removed item arriving
// after an import would bring it back. The item's identity is not a field:
// it is derived from the value (itemIdentity).
type factItemLine struct {
	Type           string `json:"type"`
	Key            string `json:"key"`
	Value          string `json:"value"`
	Present        bool   `json:"present"`
	SourceAt       string `json:"source_at"`
	EventID        string `json:"event_id"`
	ConversationID string `json:"conversation_id"`
	Extractor      string `json:"extractor"`
	Model          string `json:"model"`
	PromptVersion  string `json:"prompt_version"`

	sourceAt time.Time
}

func checkFactItemLine(l *factItemLine) (err error) {
	if l.sourceAt, err = parseTime("source_at", l.SourceAt); err != nil {
		return err
	}
	if err := checkAll(factKey(l.Key), text("value", l.Value, maxValueBytes, true),
		text("event_id", l.EventID, maxIDBytes, false), text("conversation_id", l.ConversationID, maxIDBytes, false),
		text("extractor", l.Extractor, maxIDBytes, false), text("model", l.Model, maxIDBytes, false),
		text("prompt_version", l.PromptVersion, maxIDBytes, false)); err != nil {
		return err
	}
	if itemIdentity(l.Value) == "" {
		return errors.New("value holds no item")
	}
	return nil
}

func readFactItems(ctx context.Context, q *Store, userID string) ([]any, error) {
	rows, err := q.db.Query(ctx, `SELECT key, value, present, source_at, event_id, conversation_id, extractor, model, prompt_version
		FROM fact_items WHERE user_id = $1`, userID)
	if err != nil {
		return nil, err
	}
	var (
		out []*factItemLine
		l   factItemLine
		sa  time.Time
	)
	if _, err := pgx.ForEachRow(rows, []any{&l.Key, &l.Value, &l.Present, &sa, &l.EventID, &l.ConversationID, &l.Extractor, &l.Model, &l.PromptVersion}, func() error {
		c := l
		c.Type, c.SourceAt = "fact_item", exportTime(sa)
		out = append(out, &c)
		return nil
	}); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *factItemLine) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(itemIdentity(a.Value), itemIdentity(b.Value)))
	})
	return anys(out), nil
}

// applyFactItems merges items by the store's own rule (each item's latest
// operation wins, store/factitems.go; an item stated no later than its
// key's clear is not written), then rebuilds the facts row of every list
// key it touched from the items, so a list merged with memory already
// there reads as the union; a list imported into an empty memory reads
// back as exported.
func applyFactItems(ctx context.Context, q *Store, userID string, lines []any) (int64, error) {
	ls := typed[*factItemLine](lines)
	writes := make([]FactWrite, len(ls))
	touched := map[userKey]bool{}
	for i, l := range ls {
		op := FactAdd
		if !l.Present {
			op = FactRemove
		}
		writes[i] = FactWrite{UserID: userID, Key: l.Key, Value: l.Value, SourceAt: l.sourceAt, EventID: l.EventID,
			ConversationID: l.ConversationID, Op: op, List: true,
			Provenance: Provenance{Extractor: l.Extractor, Model: l.Model, PromptVersion: l.PromptVersion}}
		touched[userKey{userID, l.Key}] = true
	}
	keys := sortedKeys(touched)
	if err := q.lockFactKeys(ctx, keys); err != nil {
		return 0, err
	}
	written, err := q.writeItems(ctx, keys, writes)
	if err != nil {
		return 0, err
	}
	rebuilt, err := q.materialise(ctx, keys, nil)
	return int64(written + rebuilt), err
}

// ---- fact_history ----

type historyLine struct {
	Type           string  `json:"type"`
	Key            string  `json:"key"`
	Op             string  `json:"op"`
	OldValue       *string `json:"old_value"`
	NewValue       *string `json:"new_value"`
	EventID        string  `json:"event_id"`
	ConversationID string  `json:"conversation_id"`
	SourceAt       *string `json:"source_at"`
	ChangedAt      string  `json:"changed_at"`

	id        int64
	sourceAt  *time.Time
	changedAt time.Time
}

func checkHistoryLine(l *historyLine) (err error) {
	if l.changedAt, err = parseTime("changed_at", l.ChangedAt); err != nil {
		return err
	}
	if l.SourceAt != nil {
		t, err := parseTime("source_at", *l.SourceAt)
		if err != nil {
			return err
		}
		l.sourceAt = &t
	}
	errs := []error{factKey(l.Key), text("op", l.Op, 32, true),
		text("event_id", l.EventID, maxIDBytes, false), text("conversation_id", l.ConversationID, maxIDBytes, false)}
	for _, v := range []*string{l.OldValue, l.NewValue} {
		if v != nil {
			errs = append(errs, text("value", *v, maxValueBytes, false))
		}
	}
	return checkAll(errs...)
}

func readHistory(ctx context.Context, q *Store, userID string, emit func(any) error) error {
	// By key, then in the order the changes were recorded; an import
	// inserts them in file order, so ids keep that order. COLLATE "C"
	// compares bytes, as Go's strings do: the order must not depend on the
	// database's collation.
	rows, err := q.db.Query(ctx, `SELECT id, key, op, old_value, new_value, event_id, conversation_id, source_at, changed_at
		FROM fact_history WHERE user_id = $1 ORDER BY key COLLATE "C", changed_at, id`, userID)
	if err != nil {
		return err
	}
	var (
		l  historyLine
		sa *time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&l.id, &l.Key, &l.Op, &l.OldValue, &l.NewValue, &l.EventID, &l.ConversationID, &sa, &l.changedAt}, func() error {
		c := l
		c.Type, c.ChangedAt, c.SourceAt = "fact_history", exportTime(l.changedAt), nil
		if sa != nil {
			s := exportTime(*sa)
			c.SourceAt = &s
		}
		return emit(&c)
	})
	return err
}

func applyHistory(ctx context.Context, q *Store, userID string, lines []any) (int64, error) {
	ls := typed[*historyLine](lines)
	// Identical lines are one entry.
	seen := map[string]bool{}
	var (
		keys, ops, events, convs []string
		olds, news               []*string
		sources                  []*time.Time
		changed                  []time.Time
	)
	for _, l := range ls {
		id, _ := json.Marshal(l)
		if seen[string(id)] {
			continue
		}
		seen[string(id)] = true
		keys, ops, events, convs = append(keys, l.Key), append(ops, l.Op), append(events, l.EventID), append(convs, l.ConversationID)
		olds, news, sources, changed = append(olds, l.OldValue), append(news, l.NewValue), append(sources, l.sourceAt), append(changed, l.changedAt)
	}
	tag, err := q.db.Exec(ctx, `
		INSERT INTO fact_history (user_id, key, op, old_value, new_value, event_id, conversation_id, source_at, changed_at)
		SELECT $1, k, o, ov, nv, e, cv, a, ch
		FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::timestamptz[], $9::timestamptz[])
			WITH ORDINALITY AS w(k, o, ov, nv, e, cv, a, ch, n)
		WHERE NOT EXISTS (SELECT FROM fact_history h
			WHERE h.user_id = $1 AND h.key = w.k AND h.op = w.o AND h.old_value IS NOT DISTINCT FROM w.ov
			  AND h.new_value IS NOT DISTINCT FROM w.nv AND h.event_id = w.e AND h.conversation_id = w.cv
			  AND h.source_at IS NOT DISTINCT FROM w.a AND h.changed_at = w.ch)
		ORDER BY n`,
		userID, keys, ops, olds, news, events, convs, sources, changed)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// ---- fact_clear ----

type factClearLine struct {
	Type      string `json:"type"`
	Key       string `json:"key"`
	ClearedAt string `json:"cleared_at"`

	clearedAt time.Time
}

func checkFactClearLine(l *factClearLine) (err error) {
	if l.clearedAt, err = parseTime("cleared_at", l.ClearedAt); err != nil {
		return err
	}
	return factKey(l.Key)
}

func readFactClears(ctx context.Context, q *Store, userID string) ([]any, error) {
	return readClears(ctx, q, userID, "fact_clears", "fact_clear")
}

// readFactDirectClears reads the clears of direct writes
// (fact_direct_clears): each is in fact_clears too, and an import keeps
// them apart so that a reset after it keeps them.
func readFactDirectClears(ctx context.Context, q *Store, userID string) ([]any, error) {
	return readClears(ctx, q, userID, "fact_direct_clears", "fact_direct_clear")
}

func readClears(ctx context.Context, q *Store, userID, table, typ string) ([]any, error) {
	rows, err := q.db.Query(ctx, `SELECT key, cleared_at FROM `+table+` WHERE user_id = $1`, userID)
	if err != nil {
		return nil, err
	}
	var (
		out []*factClearLine
		l   factClearLine
		at  time.Time
	)
	if _, err := pgx.ForEachRow(rows, []any{&l.Key, &at}, func() error {
		c := l
		c.Type, c.ClearedAt = typ, exportTime(at)
		out = append(out, &c)
		return nil
	}); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *factClearLine) int { return strings.Compare(a.Key, b.Key) })
	return anys(out), nil
}

// applyFactDirectClears records the clears of direct writes, the later of
// two kept; the clear itself (fact_clears, and what it covers) comes with
// the same key's fact_clear line, which an export always holds.
func applyFactDirectClears(ctx context.Context, q *Store, userID string, lines []any) (int64, error) {
	var (
		keys []string
		ats  []time.Time
	)
	for _, l := range typed[*factClearLine](lines) {
		keys, ats = append(keys, l.Key), append(ats, l.clearedAt)
	}
	tag, err := q.db.Exec(ctx, `
		INSERT INTO fact_direct_clears AS c (user_id, key, cleared_at)
		SELECT DISTINCT ON (k) $1, k, a FROM unnest($2::text[], $3::timestamptz[]) AS w(k, a) ORDER BY k, a DESC
		ON CONFLICT (user_id, key) DO UPDATE SET cleared_at = excluded.cleared_at
		WHERE c.cleared_at < excluded.cleared_at`, userID, keys, ats)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func applyFactClears(ctx context.Context, q *Store, userID string, lines []any) (int64, error) {
	latest := map[string]time.Time{}
	for _, l := range typed[*factClearLine](lines) {
		if t, ok := latest[l.Key]; !ok || l.clearedAt.After(t) {
			latest[l.Key] = l.clearedAt
		}
	}
	var (
		keys []string
		ats  []time.Time
	)
	for k, t := range latest {
		keys, ats = append(keys, k), append(ats, t)
	}
	tag, err := q.db.Exec(ctx, `
		INSERT INTO fact_clears AS c (user_id, key, cleared_at)
		SELECT $1, k, a FROM unnest($2::text[], $3::timestamptz[]) AS w(k, a)
		ON CONFLICT (user_id, key) DO UPDATE SET cleared_at = excluded.cleared_at
		WHERE c.cleared_at < excluded.cleared_at`, userID, keys, ats)
	if err != nil {
		return 0, err
	}
	if err := recordImportClears(ctx, q, userID, keys, make([]string, len(keys)), ats); err != nil {
		return 0, err
	}
	// The clears apply to the memory already there, as they did where they
	// were made: a value stated no later is gone. A list key's items are
	// dropped one by one and its row rebuilt from the rest (the row's own
	// source time is its newest item's, which a clear may not cover).
	rows, err := q.db.Query(ctx, `SELECT DISTINCT key FROM fact_items WHERE user_id = $1 AND key = ANY($2)`, userID, keys)
	if err != nil {
		return 0, err
	}
	listed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, err
	}
	if _, err := q.db.Exec(ctx, `DELETE FROM facts f USING fact_clears c
		WHERE f.user_id = $1 AND c.user_id = $1 AND c.key = f.key AND f.key = ANY($2) AND NOT f.key = ANY($3)
		  AND c.cleared_at >= f.source_at`, userID, keys, listed); err != nil {
		return 0, err
	}
	if len(listed) > 0 {
		lists := make(map[userKey]bool, len(listed))
		for _, k := range listed {
			lists[userKey{userID, k}] = true
		}
		lk := sortedKeys(lists)
		if err := q.lockFactKeys(ctx, lk); err != nil {
			return 0, err
		}
		if _, err := q.writeItems(ctx, lk, nil); err != nil { // drops the covered items
			return 0, err
		}
		if _, err := q.materialise(ctx, lk, nil); err != nil {
			return 0, err
		}
	}
	return tag.RowsAffected(), nil
}

// recordImportClears records the clears an import brought
// (fact_import_clears, migration 069: item "" for a clear of the key, else
// the value's identity), the later of two kept: a reset drops the clears
// turns made, which its replay makes again, and puts these back
// (resetClears), which no replay makes.
func recordImportClears(ctx context.Context, q *Store, userID string, keys, items []string, ats []time.Time) error {
	if _, err := q.db.Exec(ctx, `
		INSERT INTO fact_import_clears AS c (user_id, key, item, cleared_at)
		SELECT $1, k, it, a FROM unnest($2::text[], $3::text[], $4::timestamptz[]) AS w(k, it, a)
		ON CONFLICT (user_id, key, item) DO UPDATE SET cleared_at = excluded.cleared_at
		WHERE c.cleared_at < excluded.cleared_at`, userID, keys, items, ats); err != nil {
		return fmt.Errorf("record import clears: %w", err)
	}
	return nil
}

// ---- fact_value_clear ----

// factValueClearLine is a delete of one value of a single-valued key
// (fact_value_clears): Item is the value's identity (itemIdentity).
type factValueClearLine struct {
	Type      string `json:"type"`
	Key       string `json:"key"`
	Item      string `json:"item"`
	ClearedAt string `json:"cleared_at"`

	clearedAt time.Time
}

func checkFactValueClearLine(l *factValueClearLine) (err error) {
	if l.clearedAt, err = parseTime("cleared_at", l.ClearedAt); err != nil {
		return err
	}
	if err := checkAll(factKey(l.Key), text("item", l.Item, maxValueBytes, true)); err != nil {
		return err
	}
	// An export of a release before migration 051 holds identities
	// without NFKC: taken, in today's form.
	if id := legacyNormalize(l.Item); id != l.Item {
		return fmt.Errorf("item %.80q is not a value's identity (lowercase, single spaces): %.80q", l.Item, id)
	}
	l.Item = itemIdentity(l.Item)
	return nil
}

func readFactValueClears(ctx context.Context, q *Store, userID string) ([]any, error) {
	rows, err := q.db.Query(ctx, `SELECT key, item, cleared_at FROM fact_value_clears WHERE user_id = $1`, userID)
	if err != nil {
		return nil, err
	}
	var (
		out []*factValueClearLine
		l   factValueClearLine
		at  time.Time
	)
	if _, err := pgx.ForEachRow(rows, []any{&l.Key, &l.Item, &at}, func() error {
		c := l
		c.Type, c.ClearedAt = "fact_value_clear", exportTime(at)
		out = append(out, &c)
		return nil
	}); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *factValueClearLine) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.Item, b.Item))
	})
	return anys(out), nil
}

// applyFactValueClears keeps, for each value, the latest of its deletes
// held and imported.
func applyFactValueClears(ctx context.Context, q *Store, userID string, lines []any) (int64, error) {
	type value struct{ key, item string }
	latest := map[value]time.Time{}
	for _, l := range typed[*factValueClearLine](lines) {
		v := value{l.Key, l.Item}
		if t, ok := latest[v]; !ok || l.clearedAt.After(t) {
			latest[v] = l.clearedAt
		}
	}
	if len(latest) == 0 {
		return 0, nil
	}
	var (
		keys, items []string
		ats         []time.Time
	)
	for v, t := range latest {
		keys, items, ats = append(keys, v.key), append(items, v.item), append(ats, t)
	}
	tag, err := q.db.Exec(ctx, `
		INSERT INTO fact_value_clears AS c (user_id, key, item, cleared_at)
		SELECT $1, k, it, a FROM unnest($2::text[], $3::text[], $4::timestamptz[]) AS w(k, it, a)
		ON CONFLICT (user_id, key, item) DO UPDATE SET cleared_at = excluded.cleared_at
		WHERE c.cleared_at < excluded.cleared_at`, userID, keys, items, ats)
	if err != nil {
		return 0, err
	}
	if err := recordImportClears(ctx, q, userID, keys, items, ats); err != nil {
		return 0, err
	}
	// They apply to the memory already there, as a value delete does
	// (deleteValues): a value they name stated no later goes, and the key
	// is cleared at its time.
	rows, err := q.db.Query(ctx, `SELECT f.key, f.value, f.source_at, v.item, v.cleared_at
		FROM facts f JOIN fact_value_clears v ON v.user_id = f.user_id AND v.key = f.key
		WHERE f.user_id = $1 AND f.key = ANY($2)`, userID, keys)
	if err != nil {
		return 0, err
	}
	var (
		gone, goneValues []string
		goneAts          []time.Time
		k, v, item       string
		at, clearedAt    time.Time
	)
	if _, err := pgx.ForEachRow(rows, []any{&k, &v, &at, &item, &clearedAt}, func() error {
		if itemIdentity(v) == item && !clearedAt.Before(at) {
			gone, goneValues, goneAts = append(gone, k), append(goneValues, v), append(goneAts, at)
		}
		return nil
	}); err != nil {
		return 0, err
	}
	if len(gone) > 0 {
		if _, err := q.db.Exec(ctx, `
			WITH gone AS (
				DELETE FROM facts f USING unnest($2::text[], $3::text[], $4::timestamptz[]) AS g(k, v, a)
				WHERE f.user_id = $1 AND f.key = g.k AND f.value = g.v AND f.source_at = g.a
				RETURNING f.key, f.source_at
			)
			INSERT INTO fact_clears AS c (user_id, key, cleared_at)
			SELECT $1, key, source_at FROM gone
			ON CONFLICT (user_id, key) DO UPDATE SET cleared_at = greatest(c.cleared_at, excluded.cleared_at)`,
			userID, gone, goneValues, goneAts); err != nil {
			return 0, err
		}
	}
	return tag.RowsAffected(), nil
}

// ---- context ----

type contextLine struct {
	Type           string `json:"type"`
	Question       string `json:"question"`
	Answer         string `json:"answer"`
	CreatedAt      string `json:"created_at"`
	EventID        string `json:"event_id"`
	ConversationID string `json:"conversation_id"`
	Scope          string `json:"scope"`
	Extractor      string `json:"extractor"`
	Model          string `json:"model"`
	PromptVersion  string `json:"prompt_version"`

	createdAt time.Time
}

func checkContextLine(l *contextLine) (err error) {
	if l.createdAt, err = parseTime("created_at", l.CreatedAt); err != nil {
		return err
	}
	return checkAll(text("question", l.Question, maxQuestionBytes, true), text("answer", l.Answer, maxAnswerBytes, false),
		text("event_id", l.EventID, maxIDBytes, false), text("conversation_id", l.ConversationID, maxIDBytes, false),
		text("scope", l.Scope, maxScopeBytes, false),
		text("extractor", l.Extractor, maxIDBytes, false), text("model", l.Model, maxIDBytes, false),
		text("prompt_version", l.PromptVersion, maxIDBytes, false))
}

func readContext(ctx context.Context, q *Store, userID string, emit func(any) error) error {
	// Oldest first; a user holds a (question, answer) pair once. COLLATE
	// "C": by bytes, as readHistory.
	rows, err := q.db.Query(ctx, `SELECT question, answer, created_at, event_id, conversation_id, scope, extractor, model, prompt_version
		FROM context WHERE user_id = $1 ORDER BY created_at, question COLLATE "C", answer COLLATE "C"`, userID)
	if err != nil {
		return err
	}
	var l contextLine
	_, err = pgx.ForEachRow(rows, []any{&l.Question, &l.Answer, &l.createdAt, &l.EventID, &l.ConversationID, &l.Scope, &l.Extractor, &l.Model, &l.PromptVersion}, func() error {
		c := l
		c.Type, c.CreatedAt = "context", exportTime(l.createdAt)
		return emit(&c)
	})
	return err
}

func applyContext(ctx context.Context, q *Store, userID string, lines []any) (int64, error) {
	ls := typed[*contextLine](lines)
	size := len(ls)
	qs, as, events, convs, scopes := make([]string, size), make([]string, size), make([]string, size), make([]string, size), make([]string, size)
	xs, ms, ps := make([]string, size), make([]string, size), make([]string, size)
	ats := make([]time.Time, size)
	hashes, qhashes, lhashes, lqhashes := make([][]byte, size), make([][]byte, size), make([][]byte, size), make([][]byte, size)
	for i, l := range ls {
		k := keysOf(userID, l.Question, l.Answer)
		qs[i], as[i], events[i], convs[i], scopes[i] = l.Question, l.Answer, l.EventID, l.ConversationID, l.Scope
		xs[i], ms[i], ps[i], ats[i] = l.Extractor, l.Model, l.PromptVersion, l.createdAt
		hashes[i], qhashes[i], lhashes[i], lqhashes[i] = k.hash, k.question, k.legacyHash, k.legacyQuestion
	}
	// As InsertContext: a line a clear covers (by its pair or its
	// question) is not inserted, and of the lines of one pair left the
	// latest is (ON CONFLICT cannot touch a row twice in one statement),
	// the others' turns kept as turns that said it; an item held already
	// takes the later time. Not by its turn (the key InsertContext checks
	// too): an exported item of a cleared turn is one the clear kept (see
	// clearedTurn), not its turn extracted again.
	rows, err := q.db.Query(ctx, `
		WITH w AS (
			SELECT * FROM unnest($2::text[], $3::text[], $4::timestamptz[], $5::text[], $6::text[], $7::text[], $8::bytea[], $9::text[], $10::text[], $11::text[], $12::bytea[], $13::bytea[], $14::bytea[])
				WITH ORDINALITY AS w(qu, a, t, e, cv, sc, h, x, m, p, qh, lh, lqh, o)
			WHERE NOT EXISTS (SELECT FROM context_clears cl
				WHERE cl.user_id = $1 AND cl.hash IN ('\x'::bytea, w.h, w.qh, w.lh, w.lqh) AND cl.cleared_at >= w.t)
		)
		INSERT INTO context AS c (user_id, question, answer, created_at, event_id, conversation_id, scope, content_hash, extractor, model, prompt_version, said_in)
		SELECT DISTINCT ON (h) $1, qu, a, t, e, cv, sc, h, x, m, p, memoryd_said_in('{}', e, array_agg(e) OVER pair)
		FROM w WINDOW pair AS (PARTITION BY h ORDER BY t, o ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
		ORDER BY h, t DESC, o DESC
		ON CONFLICT (user_id, content_hash) DO UPDATE SET created_at = greatest(c.created_at, excluded.created_at),
			said_in = CASE WHEN c.created_at < excluded.created_at
				THEN memoryd_said_in(c.said_in, c.event_id, array_prepend(excluded.event_id, excluded.said_in)) ELSE c.said_in END,
			`+directWins+`
		-- A direct line makes a held pair the user's own, as a store of it
		-- does (StoreContext): a reset keeps it.
		WHERE c.created_at < excluded.created_at OR (excluded.extractor = 'direct' AND c.extractor <> 'direct')
		RETURNING c.id, c.xmax = 0`,
		userID, qs, as, ats, events, convs, scopes, hashes, xs, ms, ps, qhashes, lhashes, lqhashes)
	if err != nil {
		return 0, err
	}
	// The new items (xmax 0: inserted, not updated) get what every other
	// write path gives them in its transaction: the context hook, so that
	// with embedding on an imported item is embedded at once rather than by
	// the next sweep. An existing item only took a later time: its text,
	// and so its vector, is unchanged.
	var n int64
	var refs []ContextRef
	for rows.Next() {
		var id int64
		var inserted bool
		if err := rows.Scan(&id, &inserted); err != nil {
			rows.Close()
			return 0, err
		}
		n++
		if inserted {
			refs = append(refs, ContextRef{UserID: userID, ID: id})
		}
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if err := q.contextWritten(ctx, refs); err != nil {
		return 0, err
	}
	return n, nil
}

// ---- context_clear ----

// contextClearLine is a clear of context items. Hash is hex: empty for a
// clear of all the user's items, else the hash of the pair or question
// cleared, which covers the user id: imported into another user, such a
// clear matches none of their items.
type contextClearLine struct {
	Type      string `json:"type"`
	Hash      string `json:"hash"`
	ClearedAt string `json:"cleared_at"`

	hash      []byte
	clearedAt time.Time
}

func checkContextClearLine(l *contextClearLine) (err error) {
	if l.clearedAt, err = parseTime("cleared_at", l.ClearedAt); err != nil {
		return err
	}
	if l.hash, err = hex.DecodeString(l.Hash); err != nil || (len(l.hash) != 0 && len(l.hash) != 32) {
		return fmt.Errorf("hash %.80q is not empty or 64 hex digits", l.Hash)
	}
	return nil
}

func readContextClears(ctx context.Context, q *Store, userID string) ([]any, error) {
	rows, err := q.db.Query(ctx, `SELECT hash, cleared_at FROM context_clears WHERE user_id = $1`, userID)
	if err != nil {
		return nil, err
	}
	var (
		out []*contextClearLine
		h   []byte
		at  time.Time
	)
	if _, err := pgx.ForEachRow(rows, []any{&h, &at}, func() error {
		out = append(out, &contextClearLine{Type: "context_clear", Hash: hex.EncodeToString(h), ClearedAt: exportTime(at)})
		return nil
	}); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *contextClearLine) int { return strings.Compare(a.Hash, b.Hash) })
	return anys(out), nil
}

func applyContextClears(ctx context.Context, q *Store, userID string, lines []any) (int64, error) {
	latest := map[string]time.Time{}
	for _, l := range typed[*contextClearLine](lines) {
		if t, ok := latest[string(l.hash)]; !ok || l.clearedAt.After(t) {
			latest[string(l.hash)] = l.clearedAt
		}
	}
	if len(latest) == 0 {
		return 0, nil
	}
	var (
		hashes [][]byte
		ats    []time.Time
	)
	for h, t := range latest {
		hashes, ats = append(hashes, []byte(h)), append(ats, t)
	}
	tag, err := q.db.Exec(ctx, `
		INSERT INTO context_clears AS c (user_id, hash, cleared_at)
		SELECT $1, h, a FROM unnest($2::bytea[], $3::timestamptz[]) AS w(h, a)
		ON CONFLICT (user_id, hash) DO UPDATE SET cleared_at = greatest(c.cleared_at, excluded.cleared_at),
			-- An imported clear has no stream position: the turns it covers
			-- are judged by its time, so the local clear's own time, by
			-- which positioned turns are judged, rises to it too.
			own_at = CASE WHEN c.own_at IS NOT NULL THEN greatest(c.own_at, excluded.cleared_at) END
		WHERE c.cleared_at < excluded.cleared_at OR c.own_at < excluded.cleared_at`, userID, hashes, ats)
	if err != nil {
		return 0, err
	}
	// The clears apply to the items already there: those they cover (all,
	// the pair, or the question, as in DeleteContext) and not later go.
	// Matching a question needs normalize, so it is done here in Go.
	rows, err := q.db.Query(ctx, `SELECT id, question, answer, created_at FROM context WHERE user_id = $1`, userID)
	if err != nil {
		return 0, err
	}
	var (
		gone             []int64
		id               int64
		question, answer string
		at               time.Time
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &question, &answer, &at}, func() error {
		k := keysOf(userID, question, answer)
		for _, key := range [][]byte{{}, k.hash, k.question, k.legacyHash, k.legacyQuestion} {
			if t, ok := latest[string(key)]; ok && !t.Before(at) {
				gone = append(gone, id)
				break
			}
		}
		return nil
	}); err != nil {
		return 0, err
	}
	if len(gone) > 0 {
		// In id order (see lockItems).
		if err := q.lockItems(ctx, "UPDATE", `x.user_id = $1 AND x.id = ANY($2)`, userID, gone); err != nil {
			return 0, err
		}
		rows, err := q.db.Query(ctx, `DELETE FROM context WHERE user_id = $1 AND id = ANY($2) RETURNING content_hash`, userID, gone)
		if err != nil {
			return 0, err
		}
		hashes, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
		if err != nil {
			return 0, err
		}
		// What imports recorded of the pairs goes with them, as with a
		// clear's (DeleteContext): the record outliving the item kept, as
		// imported, the pair a turn of the user's stated again after the
		// clear (TestResetDeletesAPairFromATurnAfterTheImportedOneWasCleared).
		if err := q.dropImportedPairs(ctx, userID, hashes); err != nil {
			return 0, err
		}
	}
	return tag.RowsAffected(), nil
}

// anys and typed convert between a section's lines and their own type.
func anys[T any](ls []T) []any {
	out := make([]any, len(ls))
	for i, l := range ls {
		out[i] = l
	}
	return out
}

func typed[T any](ls []any) []T {
	out := make([]T, len(ls))
	for i, l := range ls {
		out[i] = l.(T)
	}
	return out
}
