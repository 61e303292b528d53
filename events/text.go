package events

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrInvalidText is wrapped by a Client's refusal of a request holding a
// string (or raw JSON) that is not valid UTF-8; the text of a read
// (Enrich's message, a search's query) is sent instead with the bad bytes
// replaced (readText). The service refuses such text to be stored with a
// 400, but it never sees it: encoding/json would replace each bad byte
// with U+FFFD, and the request would succeed with text the caller did not
// send.
var ErrInvalidText = errors.New("is not valid UTF-8")

// readText is the text of a read (an enrich message, a search query) with
// each run of invalid UTF-8 replaced by one U+FFFD (encoding/json replaced
// each byte): the service separates words there, as at the bytes themselves,
// and a frontend that cut a message inside a character must still get its
// memory, not an error. Only what would be stored is refused (checkText).
func readText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// checkText returns an error wrapping ErrInvalidText, naming the first
// field (by its JSON name) of req that holds invalid UTF-8, or nil.
func checkText(req any) error {
	if path := invalidText(reflect.ValueOf(req), ""); path != "" {
		return &TextError{Field: path}
	}
	return nil
}

// TextError names the field of a request that is not valid UTF-8.
type TextError struct {
	// Field is the field's path by JSON names, e.g. "message" or
	// "lines[2]".
	Field string
}

func (e *TextError) Error() string { return e.Field + " " + ErrInvalidText.Error() }

// Unwrap makes errors.Is(err, ErrInvalidText) true.
func (e *TextError) Unwrap() error { return ErrInvalidText }

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// invalidText walks v as encoding/json would and returns the path of the
// first string holding invalid UTF-8, or "".
func invalidText(v reflect.Value, path string) string {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return ""
		}
		return invalidText(v.Elem(), path)
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			return orValue(path)
		}
	case reflect.Slice:
		if v.Type() == rawMessageType {
			if !utf8.Valid(v.Bytes()) {
				return orValue(path)
			}
			return ""
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return "" // []byte is sent as base64
		}
		fallthrough
	case reflect.Array:
		for i := range v.Len() {
			if p := invalidText(v.Index(i), orValue(path)+"["+strconv.Itoa(i)+"]"); p != "" {
				return p
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			k := it.Key()
			if k.Kind() == reflect.String && !utf8.ValidString(k.String()) {
				return orValue(path) + " key"
			}
			if p := invalidText(it.Value(), join(path, k.String())); p != "" {
				return p
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if f.Anonymous && f.Tag.Get("json") == "" {
				name = "" // embedded: its fields are the parent's
			}
			if p := invalidText(v.Field(i), join(path, name)); p != "" {
				return p
			}
		}
	}
	return ""
}

func join(path, name string) string {
	switch {
	case path == "":
		return name
	case name == "":
		return path
	}
	return path + "." + name
}

func orValue(path string) string {
	if path == "" {
		return "value"
	}
	return path
}
