package enricher

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/memoryd/memoryd/events"
)

func badRequest(format string, args ...any) error {
	return &events.ServiceError{Code: 400, Description: fmt.Sprintf(format, args...)}
}

// decode parses one JSON object into dst. Unknown fields are ignored, so
// frontends may send more than this version reads; wrong types, malformed
// JSON and trailing data are bad requests.
func decode(data []byte, dst any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return badRequest("empty request: expected a JSON object")
	}
	err := decodeOnce(data, dst)
	// A whole number written with a fraction or an exponent ("3.0", "1e1",
	// as some serialisers write every number) is the integer JSON Schema
	// takes it for: the literal of the integer field the error names is
	// written plainly and the request decoded again, once per such field.
	// Only on this error, so the common request pays nothing; the other
	// bytes stay as sent (a document's metadata is kept as given).
	for range maxWholeNumberFields {
		var typeErr *json.UnmarshalTypeError
		if !errors.As(err, &typeErr) || !isIntType(typeErr.Type) {
			break
		}
		plain, ok := plainWholeNumbers(data, wireField(typeErr.Field))
		if !ok {
			break
		}
		data = plain
		err = decodeOnce(data, dst)
	}
	if err != nil {
		var svc *events.ServiceError
		if errors.As(err, &svc) {
			return err
		}
		var timeErr *time.ParseError
		if errors.As(err, &timeErr) || errors.Is(err, errNotTime) {
			// encoding/json does not say which field held the bad time.
			if f := badTimeField(data); f != "" {
				return badRequest("malformed request: %s: must be RFC 3339, e.g. 2026-11-21T10:00:00Z", f)
			}
		}
		return badRequest("malformed request: %s", jsonReason(err))
	}
	if name, first, second := events.RepeatedKey(data, jsonFields(reflect.TypeOf(dst))); name != "" {
		// encoding/json keeps the last where other parsers read the
		// first or the exact spelling: {"memory":false,"Memory":true}
		// was read with memory, where a gateway saw the opt-out.
		return badRequest("malformed request: %s %s", name, events.GivenTwice(first, second))
	}
	return nil
}

// requestFields caches jsonFields by type.
var requestFields sync.Map // reflect.Type -> []string

// jsonFields returns the JSON names of the fields encoding/json decodes
// into t (a struct or a pointer to one), those of embedded structs
// included.
func jsonFields(t reflect.Type) []string {
	if v, ok := requestFields.Load(t); ok {
		return v.([]string)
	}
	var names []string
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			name, _, _ := strings.Cut(tag, ",")
			switch {
			case name == "-":
			case f.Anonymous && name == "":
				walk(f.Type)
			case !f.IsExported():
			case name != "":
				names = append(names, name)
			default:
				names = append(names, f.Name)
			}
		}
	}
	walk(t)
	slices.Sort(names)
	names = slices.Compact(names)
	requestFields.Store(t, names)
	return names
}

// maxWholeNumberFields bounds decode's retries: more integer fields than
// any request has.
const maxWholeNumberFields = 16

// decodeOnce decodes data into dst; trailing data is a 400.
func decodeOnce(data []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(dst); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("malformed request: trailing data after the JSON object")
	}
	return nil
}

func isIntType(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// plainWholeNumbers rewrites, in data, the numbers at path (object keys
// joined by ".", array indices left out, as encoding/json names a field)
// that have a fraction or an exponent but an integer value within int64
// ("3.0", "1e1", "-2.50e1") as plain integers, leaving every other byte as
// it is; ok is false when there is none. A fraction (2.5) is kept, and
// still refused by the integer field; so is an exponent of more than two
// digits (1e400, 1e-999999999), never a value an integer field takes.
func plainWholeNumbers(data []byte, path string) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		object bool
		key    string // the current key, in an object
		atKey  bool   // in an object, the next string is a key
	}
	var stack []frame
	var out []byte
	last := 0 // bytes of data already copied to out
	here := func() string {
		var keys []string
		for _, f := range stack {
			if f.object {
				keys = append(keys, f.key)
			}
		}
		return strings.Join(keys, ".")
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, false
		}
		top := len(stack) - 1
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if top >= 0 && stack[top].object {
					stack[top].atKey = true // the value is this container
				}
				stack = append(stack, frame{object: t == '{', atKey: t == '{'})
			default:
				stack = stack[:top]
			}
			continue
		case string:
			if top >= 0 && stack[top].object && stack[top].atKey {
				stack[top].key, stack[top].atKey = t, false
				continue
			}
		case json.Number:
			if strings.EqualFold(here(), path) { // as encoding/json matches keys
				if plain, ok := wholeNumber(string(t)); ok {
					end := int(dec.InputOffset())
					start := end - len(t)
					out = append(append(out, data[last:start]...), plain...)
					last = end
				}
			}
		}
		if top >= 0 && stack[top].object {
			stack[top].atKey = true
		}
	}
	if last == 0 || len(stack) > 0 {
		return nil, false // nothing to rewrite, or data is cut short
	}
	return append(out, data[last:]...), true
}

// wholeNumber returns a JSON number literal with a fraction or an exponent
// as a plain integer, when its value is one within int64.
func wholeNumber(lit string) (string, bool) {
	if !strings.ContainsAny(lit, ".eE") {
		return "", false
	}
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		exp := strings.TrimLeft(lit[i+1:], "+-")
		if len(exp) > 2 {
			return "", false
		}
	}
	r, ok := new(big.Rat).SetString(lit)
	if !ok || !r.IsInt() || !r.Num().IsInt64() {
		return "", false
	}
	return strconv.FormatInt(r.Num().Int64(), 10), true
}

// decodeWrite is decode for requests whose text is stored: invalid UTF-8 is
// refused rather than silently replaced, so what is stored is what was sent.
func decodeWrite(data []byte, dst any) error {
	if !utf8.Valid(data) {
		return badRequest("request is not valid UTF-8")
	}
	return decode(data, dst)
}

// jsonReason shortens encoding/json errors to what a frontend author needs.
func jsonReason(err error) string {
	var (
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
		timeErr   *time.ParseError
	)
	switch {
	case errors.As(err, &typeErr) && typeErr.Field == "":
		return "expected a JSON object, not " + typeErr.Value
	case errors.As(err, &typeErr):
		return fmt.Sprintf("field %q must be %s, not %s", wireField(typeErr.Field), jsonType(typeErr.Type), typeErr.Value)
	case errors.As(err, &timeErr) || errors.Is(err, errNotTime):
		return "times (at, since, until, after.source_at) must be RFC 3339, e.g. 2026-11-21T10:00:00Z"
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("invalid JSON at byte %d: %s", syntaxErr.Offset, syntaxErr.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated JSON"
	}
	return err.Error()
}

// wireField is the JSON path of a field as a frontend wrote it:
// encoding/json names an embedded struct by its Go type in the path
// ("EnrichRequest.user_id" for the request types sentTime wraps), and
// every JSON name of the protocol is lower case.
func wireField(path string) string {
	parts := strings.Split(path, ".")
	kept := parts[:0]
	for _, p := range parts {
		if p == "" || p[0] < 'A' || p[0] > 'Z' {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, ".")
}

// jsonType names a Go type the way a JSON author would: by its JSON
// shape, never by its Go name ("[]json.RawMessage", "events.ContextCursor"
// mean nothing to a frontend written in another language).
func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[time.Time]() {
		return "an RFC 3339 time string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "a JSON object"
	}
	return "a JSON value of another type"
}

// sentTime is a request time that remembers whether it was sent.
// encoding/json leaves a time.Time zero both when its field is absent and
// when it holds Go's zero time, "0001-01-01T00:00:00Z": what a serialiser
// without omitzero writes for a time left unset. Absent (or null) means
// "not given" (now, an open bound); the zero time sent is a year 1 out of
// range, not silently the same.
type sentTime struct {
	t    time.Time
	sent bool
	raw  string // as sent, for its offset (events.CheckTime)
}

func (s *sentTime) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	if len(data) == 0 || data[0] != '"' {
		// time.Time's own error for a number or an object names Go's
		// method; the frontend needs the format.
		return errNotTime
	}
	if err := s.t.UnmarshalJSON(data); err != nil {
		return err
	}
	s.sent, s.raw = true, string(data)
	return nil
}

// badTimeField names the request's first time field (at, since, until;
// matched in any case, as encoding/json does) that sentTime refuses, or "".
func badTimeField(data []byte) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) != nil {
		return ""
	}
	for _, name := range []string{"at", "since", "until"} {
		for k, v := range fields {
			var t sentTime
			if strings.EqualFold(k, name) && t.UnmarshalJSON(v) != nil {
				return name
			}
		}
	}
	return ""
}

// errNotTime is a request time sent as another JSON type than a string.
var errNotTime = errors.New("a time must be a JSON string")

// checkTime refuses a time sent outside the years 1970..9999 or with an
// offset out of RFC 3339's range, which Go's parser takes ("+24:00",
// "+01:60"); absent is not checked.
func checkTime(field string, t sentTime) error {
	if !t.sent {
		return nil
	}
	if err := events.CheckTime(t.t, t.raw); err != nil {
		return badRequest("%s: %v", field, err)
	}
	return nil
}

// checkRange checks an optional range [since, until): each bound a time
// checkTime accepts, and since before until when both are set.
func checkRange(since, until sentTime) error {
	if err := checkTime("since", since); err != nil {
		return err
	}
	if err := checkTime("until", until); err != nil {
		return err
	}
	if since.sent && until.sent && !since.t.Before(until.t) {
		return badRequest("since %s is not before until %s", since.t.Format(time.RFC3339Nano), until.t.Format(time.RFC3339Nano))
	}
	return nil
}

// checkUser refuses a request whose user_id is missing or does not map to
// the user token of the subject it was sent on: subject permissions are
// what restricts a frontend's users, so the body must not name another.
// Every endpoint of a user's subject checks its user here, so this is
// also where a NUL in user_id is refused: Postgres text cannot hold one,
// and the request would otherwise fail as "memory store unavailable".
func checkUser(token, userID string) error {
	if strings.TrimSpace(userID) == "" {
		return badRequest("user_id is required")
	}
	if err := checkText("user_id", userID, events.MaxUserIDBytes); err != nil {
		return err
	}
	if strings.ContainsRune(userID, utf8.RuneError) {
		return badRequest("user_id %s", events.ReplacementInUserID)
	}
	if want := events.UserToken(userID); want != token {
		return badRequest("user_id maps to subject token %q, but the request was sent to token %q", want, token)
	}
	return nil
}

// checkKey checks the user and a fact key, returning the key trimmed.
func checkKey(token, userID, key string) (string, error) {
	if err := checkUser(token, userID); err != nil {
		return "", err
	}
	key = strings.TrimSpace(key)
	if key == "" {
		return "", badRequest("key is required")
	}
	return key, checkText("key", key, events.MaxFactKeyBytes)
}

// checkText bounds text that is stored (Postgres text cannot hold NUL).
func checkText(field, s string, limit int) error {
	if len(s) > limit {
		return badRequest("%s is %d bytes, over the %d byte limit", field, len(s), limit)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return badRequest("%s contains a NUL character", field)
	}
	return nil
}

// decodeUser decodes a request that names only the user, checking it
// against the subject's token.
func decodeUser(token string, data []byte) (events.UserRequest, error) {
	var req events.UserRequest
	if err := decode(data, &req); err != nil {
		return req, err
	}
	return req, checkUser(token, req.UserID)
}
