// Package events defines memoryd's wire contract: for conversation turns the
// Turn payload, the subject and user-token rules, validation, and a small
// JetStream publisher; for the request-reply service the request and reply
// types and a Client (wire.go, client.go). Go frontends import it (see the
// package's example for a frontend's whole set-up).
//
// A frontend's binary links, for it, nats.go (its jetstream and micro
// packages too) with nats.go's own dependencies (nkeys, nuid,
// klauspost/compress, golang.org/x/crypto and golang.org/x/sys), and
// OpenTelemetry's trace API (go.opentelemetry.io/otel and otel/trace, with
// cespare/xxhash/v2, which otel's attributes use), to carry a trace
// context in requests and turns; it does nothing unless the program sets
// up tracing. It links nothing of memoryd's server: no pgx, River,
// OpenTelemetry SDK or exporter (TestFrontendDependencies). The
// frontend's module graph (go list -m all) still lists those, as memoryd's
// go.mod requires them; go version -m on the binary shows what is built in.
//
// A frontend publishes one Turn per finished conversation turn to
// "<prefix>.turns.<user-token>" (prefix "memory" by default) with the header
// Nats-Msg-Id set to "<user-token>:<id>" (MsgID), so that JetStream drops a
// re-publish inside the stream's duplicate window. The stream (MEMORY_TURNS by default) is the
// source of truth: memoryd's Postgres memory is derived from it and can be
// rebuilt from it.
package events

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits on a turn event. They keep one event well inside NATS's default 1 MiB
// max payload and keep a single extraction bounded. An event over a limit is
// rejected as a whole (dead-lettered), never truncated.
const (
	// MaxEventBytes is the largest encoded event accepted.
	MaxEventBytes = 512 << 10
	// MaxIDBytes bounds the event id.
	MaxIDBytes = 128
	// MaxUserIDBytes bounds user_id.
	MaxUserIDBytes = 256
	// MaxConversationIDBytes bounds conversation_id.
	MaxConversationIDBytes = 256
	// MaxScopeBytes bounds scope, on a turn and in a request.
	MaxScopeBytes = 128
	// MaxUserMessageBytes bounds user_message.
	MaxUserMessageBytes = 64 << 10
	// MaxAssistantResponseBytes bounds assistant_response.
	MaxAssistantResponseBytes = 256 << 10
	// MaxMetadataBytes bounds the encoded metadata object.
	MaxMetadataBytes = 16 << 10
	// MaxMetadataDepth bounds the nesting of metadata.
	MaxMetadataDepth = 16
)

// maxOffset bounds a timestamp's UTC offset: RFC 3339's hours run 00..23.
const maxOffset = 24 * 3600

// Turn is one finished conversation turn, as published by a frontend.
//
// ID, UserID, UserMessage and Timestamp are required. Unknown JSON fields are
// ignored so that frontends may send more than memoryd reads.
type Turn struct {
	// ID identifies the event among the user's events (two users may use
	// the same id); with the user it is the idempotency key of ingestion, and
	// part of the Nats-Msg-Id header (MsgID).
	ID string `json:"id"`
	// UserID owns the memory extracted from the turn.
	UserID string `json:"user_id"`
	// ConversationID groups turns of one conversation; optional.
	ConversationID string `json:"conversation_id,omitempty"`
	// UserMessage is what the user said; required, non-empty.
	UserMessage string `json:"user_message"`
	// AssistantResponse is the model's reply; may be empty.
	AssistantResponse string `json:"assistant_response"`
	// Timestamp is when the turn happened (RFC 3339). Facts are ordered by
	// it, and relative dates in the turn are anchored to it.
	Timestamp time.Time `json:"timestamp"`
	// Memory false means the user opted out: memoryd acknowledges the event
	// and stores nothing. Absent means true.
	Memory *bool `json:"memory,omitempty"`
	// Metadata is an arbitrary JSON object kept with the turn.
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// Scope is an optional label of the turn (a conversation, agent or app
	// id, at most MaxScopeBytes): the context items extracted from the turn
	// carry it, and enrich, search and context.list given a scope read only
	// the items of that scope. Facts are user-wide and carry none. Absent or
	// "" is no scope.
	Scope string `json:"scope,omitempty"`
}

// MemoryEnabled reports whether the frontend allows memoryd to remember the
// turn (the "memory" field is absent or true).
func (t *Turn) MemoryEnabled() bool { return t.Memory == nil || *t.Memory }

// ErrInvalid is wrapped by every validation error; check with errors.Is.
var ErrInvalid = errors.New("invalid turn event")

// ValidationError says which field of an event is bad and why.
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return "invalid turn event: " + e.Reason
	}
	return fmt.Sprintf("invalid turn event: %s: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalid) true for every ValidationError.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Decode parses and validates an encoded turn event. Invalid UTF-8 anywhere in
// the payload is rejected rather than silently replaced, so that what is stored
// is exactly what was sent.
func Decode(data []byte) (Turn, error) {
	var t Turn
	if len(data) > MaxEventBytes {
		return t, invalid("", "event is %d bytes, over the %d byte limit", len(data), MaxEventBytes)
	}
	if !utf8.Valid(data) {
		return t, invalid("", "payload is not valid UTF-8")
	}
	// The timestamp is decoded on its own (turnJSON), so that its text's
	// offset can be checked and the zero time sent told from none.
	var w turnJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&w); err != nil {
		// Well-formed JSON with a field of the wrong type or a bad time
		// names that field, as any other invalid field does.
		var (
			typeErr *json.UnmarshalTypeError
			timeErr *time.ParseError
		)
		switch {
		// Timestamp is the event's only time: time.Time's decoder reports
		// a non-string as a plain error of its own.
		case errors.As(err, &timeErr) || strings.HasPrefix(err.Error(), "Time.UnmarshalJSON"):
			return Turn{}, invalid("timestamp", "must be RFC 3339, e.g. 2026-11-21T10:00:00Z")
		case errors.As(err, &typeErr) && typeErr.Field != "" && !strings.Contains(strings.TrimPrefix(typeErr.Field, "Turn."), "."):
			// The path names the embedded Turn by its Go type.
			return Turn{}, invalid(strings.TrimPrefix(typeErr.Field, "Turn."), "must be %s, not %s", typeErr.Type, typeErr.Value)
		}
		return Turn{}, invalid("", "malformed JSON: %s", jsonReason(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		// Not dec.More, which is false at a stray "}" or "]".
		return Turn{}, invalid("", "trailing data after the JSON object")
	}
	if err := repeatedField(data); err != nil {
		return Turn{}, err
	}
	t = w.Turn
	t.Timestamp = w.Timestamp.t
	if err := t.validate(w.Timestamp); err != nil {
		return Turn{}, err
	}
	if len(t.Metadata) > 0 {
		// Re-encode so that escapes JSON allows but Postgres jsonb refuses
		// (a lone UTF-16 surrogate such as \ud800) become U+FFFD, as they
		// already do in the string fields. Numbers keep their literal.
		v, err := decodeMetadata(t.Metadata)
		if err != nil {
			return Turn{}, err
		}
		canon, err := json.Marshal(v)
		if err != nil {
			return Turn{}, invalid("metadata", "cannot be re-encoded")
		}
		t.Metadata = canon
	}
	return t, nil
}

// turnFields are the JSON names of Turn's fields.
var turnFields = sync.OnceValue(func() []string {
	var names []string
	typ := reflect.TypeFor[Turn]()
	for i := range typ.NumField() {
		if name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
})

// TurnFields returns the JSON names of a turn event's fields, those a
// ValidationError's Field names (a new slice each call).
func TurnFields() []string { return append([]string(nil), turnFields()...) }

// repeatedField refuses an event naming one of Turn's fields twice, in
// any case: encoding/json matches keys case-insensitively and takes the
// last, where most parsers read keys exactly, so {"memory":false,
// "Memory":true} was remembered by memoryd and read as opted out by
// everyone else (and an id sent as "id" and "ID" was recorded under
// another id than its Nats-Msg-Id). data is a JSON object Decode read.
func repeatedField(data []byte) error {
	if name, first, second := RepeatedKey(data, turnFields()); name != "" {
		return invalid(name, "%s", GivenTwice(first, second))
	}
	return nil
}

// GivenTwice is the reason a field is refused for when its keys first and
// second (as sent, RepeatedKey's) both name it: every refusal of it says
// so alike, after the field's canonical name.
func GivenTwice(first, second string) string {
	return fmt.Sprintf("is given twice (as %q and %q): keys that differ only in case name the same field", first, second)
}

// RepeatedKey finds, among the keys of the JSON object data (its top
// level), two that name one of fields, compared as encoding/json compares
// them (case-insensitively, escapes decoded), and returns the field and
// the two keys as sent; "" when none is named twice or data is no JSON
// object. Requests and turns are refused on it, since encoding/json keeps
// the last of the two where other parsers read the first, or the exact
// spelling alone. data is expected to be valid JSON (decoded already): it
// is scanned, not validated, at a fraction of a decode's cost.
func RepeatedKey(data []byte, fields []string) (field, first, second string) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return "", "", ""
	}
	i++
	var seen map[string]string
	for {
		i = skipSpace(data, i)
		if i >= len(data) || data[i] != '"' {
			return "", "", "" // '}' or not JSON
		}
		end := stringEnd(data, i)
		if end < 0 {
			return "", "", ""
		}
		raw := data[i:end]
		key := string(raw[1 : len(raw)-1])
		if bytes.IndexByte(raw, '\\') >= 0 {
			if json.Unmarshal(raw, &key) != nil {
				return "", "", ""
			}
		}
		for _, name := range fields {
			if strings.EqualFold(key, name) { // as encoding/json folds
				if f, ok := seen[name]; ok {
					return name, f, key
				}
				if seen == nil {
					seen = map[string]string{}
				}
				seen[name] = key
			}
		}
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return "", "", ""
		}
		if i = valueEnd(data, skipSpace(data, i+1)); i < 0 {
			return "", "", ""
		}
		i = skipSpace(data, i)
		if i >= len(data) || data[i] != ',' {
			return "", "", ""
		}
		i++
	}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the JSON string starting at data[i]
// (a '"'), or -1.
func stringEnd(data []byte, i int) int {
	for j := i + 1; j < len(data); {
		k := bytes.IndexAny(data[j:], `"\\`)
		if k < 0 {
			return -1
		}
		j += k
		if data[j] == '"' {
			return j + 1
		}
		j += 2 // an escape: its next byte is never the closing quote
	}
	return -1
}

// valueEnd returns the index after the JSON value starting at data[i], or
// -1.
func valueEnd(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return stringEnd(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				if i = stringEnd(data, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	for i < len(data) && !strings.ContainsRune(",}] \t\n\r", rune(data[i])) {
		i++
	}
	return i
}

// turnJSON is how Decode reads a Turn: its timestamp with the text sent.
// The outer field hides the embedded Turn's, having the same JSON name.
type turnJSON struct {
	Turn
	Timestamp turnTime `json:"timestamp"`
}

// turnTime is a timestamp as time.Time decodes it, with its text and
// whether it was sent (null is not).
type turnTime struct {
	t    time.Time
	raw  string
	sent bool
}

func (tt *turnTime) UnmarshalJSON(data []byte) error {
	if err := tt.t.UnmarshalJSON(data); err != nil {
		return err
	}
	tt.raw, tt.sent = string(data), string(data) != "null"
	return nil
}

// CheckTime reports a time out of the range the protocol takes: a year
// outside 1970..9999 in UTC, or a UTC offset outside RFC 3339's. raw is
// the time as sent (see CheckTimeOffset), which alone shows a minute of
// 60; "" for a time made in Go, whose zone is checked instead. The year is
// UTC's since times are stored and exported in UTC:
// "1970-01-01T00:00:00+01:00" is 1969 there, which an import refused.
func CheckTime(t time.Time, raw string) error {
	if y := t.UTC().Year(); y < 1970 || y > 9999 {
		return fmt.Errorf("year %d (UTC) is out of range (1970..9999)", y)
	}
	if raw != "" {
		return CheckTimeOffset(raw)
	}
	if _, off := t.Zone(); off <= -maxOffset || off >= maxOffset {
		return fmt.Errorf("UTC offset %s is out of range (RFC 3339 hours are 00..23)", t.Format("-07:00"))
	}
	return nil
}

// CheckTimeOffset reports an RFC 3339 time's UTC offset out of range: its
// hours must be 00..23 and its minutes 00..59, where Go's time parser also
// takes an hour of 24 and a minute of 60 ("+24:00", "+01:60"). s is the
// time as sent, JSON quotes allowed; one ending in "Z" (or in no offset)
// is nil.
func CheckTimeOffset(s string) error {
	s = strings.TrimSuffix(s, `"`)
	if len(s) < 6 {
		return nil
	}
	off := s[len(s)-6:]
	digits := func(d string) bool { return d[0] >= '0' && d[0] <= '9' && d[1] >= '0' && d[1] <= '9' }
	if (off[0] != '+' && off[0] != '-') || off[3] != ':' || !digits(off[1:3]) || !digits(off[4:6]) {
		return nil
	}
	// Two digits each: compared as text, as numbers.
	switch {
	case off[1:3] >= "24":
		return fmt.Errorf("UTC offset %s is out of range (RFC 3339 hours are 00..23)", off)
	case off[4:6] >= "60":
		return fmt.Errorf("UTC offset %s is out of range (RFC 3339 minutes are 00..59)", off)
	}
	return nil
}

// jsonReason shortens encoding/json errors to what a frontend author needs.
func jsonReason(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field == "" {
		// The whole body (an array, a string): not the Go type's name.
		return fmt.Sprintf("the event must be a JSON object, not %s", typeErr.Value)
	}
	if errors.As(err, &typeErr) {
		return fmt.Sprintf("field %q must be %s, not %s", typeErr.Field, typeErr.Type, typeErr.Value)
	}
	var timeErr *time.ParseError
	if errors.As(err, &timeErr) {
		return "timestamp must be RFC 3339, e.g. 2026-11-21T10:00:00Z"
	}
	return err.Error()
}

// Validate checks required fields, encodings and limits. A zero Timestamp
// is taken for one not set: "is required".
func (t *Turn) Validate() error { return t.validate(turnTime{}) }

// CheckUserID applies a turn's user_id rules to a user id given elsewhere
// (a proxy's trusted header): present, at most MaxUserIDBytes, UTF-8, no
// NUL. The error is a *ValidationError naming the field.
func CheckUserID(userID string) error {
	if err := checkField("user_id", userID, MaxUserIDBytes, true); err != nil {
		return err
	}
	return checkReplacement(userID)
}

// ReplacementInUserID is why a user id holding U+FFFD is refused: JSON
// decoders (Go's, and what a JavaScript string becomes in UTF-8) read
// invalid UTF-8 and an unpaired surrogate escape ("\ud800", half of an
// emoji cut in two) as U+FFFD without an error, so two frontends' different
// ids would be one user, and a request with invalid bytes would read that
// user's memory.
const ReplacementInUserID = "holds U+FFFD, the replacement character: invalid UTF-8 or an unpaired surrogate escape such as \\ud800 was sent, which could not be told from another user id"

// checkReplacement refuses a user id holding U+FFFD (ReplacementInUserID).
func checkReplacement(userID string) error {
	if strings.ContainsRune(userID, utf8.RuneError) {
		return invalid("user_id", ReplacementInUserID)
	}
	return nil
}

// checkField is a turn's rules for one text field.
func checkField(field, value string, max int, required bool) error {
	if required && strings.TrimSpace(value) == "" {
		return invalid(field, "is required")
	}
	if len(value) > max {
		return invalid(field, "is %d bytes, over the %d byte limit", len(value), max)
	}
	if !utf8.ValidString(value) {
		return invalid(field, "is not valid UTF-8")
	}
	if strings.IndexByte(value, 0) >= 0 {
		// Postgres text cannot hold NUL; rejecting here keeps ingestion
		// from failing half way.
		return invalid(field, "contains a NUL byte")
	}
	return nil
}

// validate is Validate of a decoded turn, sent its timestamp as sent: a
// zero Timestamp sent as such ("0001-01-01T00:00:00Z", what a serialiser
// writes for a time left unset) is year 1, out of range, not absent, and
// the offset is checked in the text, which alone shows a minute of 60.
func (t *Turn) validate(sent turnTime) error {
	checks := []struct {
		field    string
		value    string
		max      int
		required bool
	}{
		{"id", t.ID, MaxIDBytes, true},
		{"user_id", t.UserID, MaxUserIDBytes, true},
		{"conversation_id", t.ConversationID, MaxConversationIDBytes, false},
		{"scope", t.Scope, MaxScopeBytes, false},
		{"user_message", t.UserMessage, MaxUserMessageBytes, true},
		{"assistant_response", t.AssistantResponse, MaxAssistantResponseBytes, false},
	}
	for _, c := range checks {
		if err := checkField(c.field, c.value, c.max, c.required); err != nil {
			return err
		}
	}
	if err := checkReplacement(t.UserID); err != nil {
		return err
	}
	if t.Timestamp.IsZero() && !sent.sent {
		return invalid("timestamp", "is required (RFC 3339)")
	}
	if err := CheckTime(t.Timestamp, sent.raw); err != nil {
		return invalid("timestamp", "%v", err)
	}
	if len(t.Metadata) > 0 {
		if len(t.Metadata) > MaxMetadataBytes {
			return invalid("metadata", "is %d bytes, over the %d byte limit", len(t.Metadata), MaxMetadataBytes)
		}
		if err := checkMetadata(t.Metadata); err != nil {
			return err
		}
	}
	return nil
}

func checkMetadata(raw json.RawMessage) error {
	trimmed := bytes.TrimSpace(raw)
	if bytes.Equal(trimmed, []byte("null")) {
		return nil
	}
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return invalid("metadata", "must be a JSON object")
	}
	depth, maxDepth := 0, 0
	inString, escaped := false, false
	for _, b := range trimmed {
		switch {
		case escaped:
			escaped = false
		case inString && b == '\\':
			escaped = true
		case b == '"':
			inString = !inString
		case inString:
		case b == '{' || b == '[':
			depth++
			maxDepth = max(maxDepth, depth)
		case b == '}' || b == ']':
			depth--
		}
	}
	if maxDepth > MaxMetadataDepth {
		return invalid("metadata", "nests %d levels, over the limit of %d", maxDepth, MaxMetadataDepth)
	}
	if bytes.IndexByte(trimmed, 0) >= 0 || bytes.Contains(trimmed, []byte(`\u0000`)) {
		return invalid("metadata", "contains a NUL character")
	}
	_, err := decodeMetadata(trimmed)
	return err
}

// decodeMetadata decodes metadata with every number kept as its literal
// (json.Number), never rounded through float64, and checks the numbers.
func decodeMetadata(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, invalid("metadata", "malformed JSON")
	}
	// A map keeps the last of a key given twice, silently: refused, as a
	// turn's own field given twice is (other parsers keep the first).
	if path := repeatedMetadataKey(json.NewDecoder(bytes.NewReader(raw))); path != "" {
		return nil, invalid("metadata", "key %q is given twice: parsers keep one or the other", path)
	}
	if err := checkNumbers(v); err != nil {
		return nil, err
	}
	return v, nil
}

// repeatedMetadataKey reads one JSON value from dec (valid JSON, nested
// at most MaxMetadataDepth, checked before) and returns the path of the
// first object key given twice in it, at any depth ("a.b", "tags[2].id"),
// or "". Keys are compared exactly, escapes decoded: metadata keys are the
// frontend's own, case-sensitive.
func repeatedMetadataKey(dec *json.Decoder) string {
	var at []pathStep
	if !repeatedKeyAt(dec, &at) {
		return ""
	}
	var b strings.Builder
	for i, s := range at {
		switch {
		case s.key == nil:
			fmt.Fprintf(&b, "[%d]", s.index)
		case i > 0:
			b.WriteString("." + *s.key)
		default:
			b.WriteString(*s.key)
		}
	}
	return b.String()
}

// pathStep is one step of a metadata path: an object key or, key nil, an
// array index. The path is kept as steps and printed only once a key given
// twice is found, so the check costs linear time and memory (building
// every value's path would copy a long key once per element under it).
type pathStep struct {
	key   *string
	index int
}

// repeatedKeyAt reads one value from dec; true when it holds a key given
// twice, *at then being its path.
func repeatedKeyAt(dec *json.Decoder, at *[]pathStep) bool {
	tok, err := dec.Token()
	if err != nil {
		return false
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			key, ok := k.(string)
			if err != nil || !ok {
				return false
			}
			*at = append(*at, pathStep{key: &key})
			if seen[key] || repeatedKeyAt(dec, at) {
				return true
			}
			seen[key] = true
			*at = (*at)[:len(*at)-1]
		}
		_, _ = dec.Token() // the closing brace
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			*at = append(*at, pathStep{index: i})
			if repeatedKeyAt(dec, at) {
				return true
			}
			*at = (*at)[:len(*at)-1]
		}
		_, _ = dec.Token()
	}
	return false
}

// Limits on metadata numbers. Postgres keeps metadata as jsonb, whose
// numbers are exact decimals (numeric) with at most 16383 digits after the
// decimal point, printed in full: 1e300 reads back as 301 digits. Exponents
// are held to those of a double, so that a short literal can neither fail
// the insert nor grow into a huge one.
const (
	maxMetadataExponent = 308
	minMetadataExponent = -324
	maxMetadataScale    = 16383
)

func checkNumbers(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			if err := checkNumbers(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := checkNumbers(e); err != nil {
				return err
			}
		}
	case json.Number:
		return checkNumber(string(v))
	}
	return nil
}

// checkNumber checks one JSON number literal against the limits above.
func checkNumber(lit string) error {
	mantissa, exp := lit, 0
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		mantissa = lit[:i]
		e := strings.TrimPrefix(lit[i+1:], "+")
		// More than 4 significant digits is out of range whatever they are;
		// checking first keeps Atoi from overflowing.
		if len(strings.TrimLeft(strings.TrimPrefix(e, "-"), "0")) > 4 {
			return invalid("metadata", "number %.40s has an exponent out of range (%d to %d)", lit, minMetadataExponent, maxMetadataExponent)
		}
		exp, _ = strconv.Atoi(e)
	}
	if exp < minMetadataExponent || exp > maxMetadataExponent {
		return invalid("metadata", "number %.40s has an exponent out of range (%d to %d)", lit, minMetadataExponent, maxMetadataExponent)
	}
	frac := 0
	if i := strings.IndexByte(mantissa, '.'); i >= 0 {
		frac = len(mantissa) - i - 1
	}
	if frac-exp > maxMetadataScale {
		return invalid("metadata", "number %.40s has more than %d digits after the decimal point", lit, maxMetadataScale)
	}
	return nil
}

var plainToken = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// tokenEncoding is lowercase base32 without padding: every character is safe in
// a NATS subject token and in a shell word.
var tokenEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// UserToken maps a user id to the subject token that carries it.
//
// The rule, which every frontend must implement identically:
//   - a user id matching ^[A-Za-z0-9_-]{1,64}$ is its own token;
//   - any other id maps to "~" followed by the lowercase, unpadded base32 of the
//     SHA-256 of the id's UTF-8 bytes (53 characters in all).
//
// "~" cannot occur in a plain token, so a hashed token never equals a plain
// one, and SHA-256 makes two hashed ids sharing a token practically
// impossible: two different user ids never share a token.
func UserToken(userID string) string {
	if plainToken.MatchString(userID) {
		return userID
	}
	sum := sha256.Sum256([]byte(userID))
	return "~" + tokenEncoding.EncodeToString(sum[:])
}

// DefaultPrefix is the subject prefix used when none is configured.
const DefaultPrefix = "memory"

// DefaultStream is the name of the turn stream for the default prefix.
const DefaultStream = "MEMORY_TURNS"

// TurnSubject is the subject a turn for userID is published on.
func TurnSubject(prefix, userID string) string {
	return prefix + "." + "turns." + UserToken(userID)
}

// TurnSubjects is the wildcard subject the turn stream captures.
func TurnSubjects(prefix string) string { return prefix + ".turns.>" }

// TokenFromSubject returns the user token of a turn subject, or "" when the
// subject is not "<prefix>.turns.<token>".
func TokenFromSubject(prefix, subject string) string {
	rest, ok := strings.CutPrefix(subject, prefix+".turns.")
	if !ok || rest == "" || strings.Contains(rest, ".") {
		return ""
	}
	return rest
}

// CheckPrefix reports whether prefix can start memoryd's subjects: one or
// more dot-separated tokens, none empty, without whitespace or the
// wildcards '*' and '>'. A prefix that is not one fails only later, as a
// NATS "invalid subject" error naming neither the prefix nor its flag.
func CheckPrefix(prefix string) error {
	if prefix == "" {
		return errors.New("is empty")
	}
	for _, tok := range strings.Split(prefix, ".") {
		switch {
		case tok == "":
			return errors.New("has an empty token (a leading, trailing or doubled '.')")
		case strings.ContainsAny(tok, "*>") || strings.IndexFunc(tok, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
			return fmt.Errorf("token %q holds a wildcard, a space or a control character", tok)
		}
	}
	return nil
}

// CheckStream reports whether name can be a JetStream stream's name (and
// name its dead-letter stream, name + "_DEADLETTER"): not empty, at most
// 255 bytes, without whitespace, '.', '*', '>', or a path separator.
func CheckStream(name string) error {
	switch {
	case name == "":
		return errors.New("is empty")
	case len(name)+len("_DEADLETTER") > 255:
		return errors.New("is too long (at most 244 bytes)")
	case strings.ContainsAny(name, ".*>/\\") || strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return errors.New("holds '.', '*', '>', a path separator, a space or a control character")
	}
	return nil
}
