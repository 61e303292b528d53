package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestFileLine: a service error naming a line of an import request names
// the file's line: request line 1 is the header, line 2 the file's line
// first. Other errors pass unchanged.
func TestFileLine(t *testing.T) {
	t.Parallel()
	other := errors.New("line 3: not a service error")
	for _, c := range []struct {
		err   error
		first int
		want  string
	}{
		{&ServiceError{Code: 400, Description: "line 2: fact: key is required"}, 2, "line 2: fact: key is required"},
		{&ServiceError{Code: 400, Description: "line 5: bad"}, 1000, "line 1003: bad"},
		{&ServiceError{Code: 400, Description: "line 1: not a memoryd export"}, 1000, "line 1: not a memoryd export"},
		{&ServiceError{Code: 400, Description: "lines is required"}, 7, "lines is required"},
		{&ServiceError{Code: 500, Description: "line x: odd"}, 7, "line x: odd"},
		{other, 7, other.Error()},
	} {
		got := fileLine(c.err, c.first)
		var se *ServiceError
		if errors.As(got, &se) {
			if se.Description != c.want {
				t.Errorf("fileLine(%q, %d) = %q, want %q", c.err, c.first, se.Description, c.want)
			}
		} else if got.Error() != c.want {
			t.Errorf("fileLine(%q, %d) = %q, want %q", c.err, c.first, got, c.want)
		}
	}
}

// TestImportRequestIsSizedAsSent: an import request's lines go on the wire
// as they are, so the size Import counts is the size sent; HTML escaping
// (json.Marshal's default) would write each "<", ">" and "&" as six bytes.
func TestImportRequestIsSizedAsSent(t *testing.T) {
	line := json.RawMessage(`{"type":"context","question":"<b>a & b</b>","answer":"` + strings.Repeat("<>&", 1000) + `"}`)
	data, err := encodeRequest(ImportRequest{UserID: "u", Lines: []json.RawMessage{line}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, line) || len(data) > len(line)+64 {
		t.Errorf("request of %d bytes for a %d-byte line: %.80s", len(data), len(line), data)
	}
}

// A forget waits for the service's whole forget, documents and events
// included, when the caller gives no deadline, and an export page for
// memoryd's bound on it (the library waited 5 s, a review); the other
// requests the client default.
func TestDefaultTimeout(t *testing.T) {
	for _, tt := range []struct {
		endpoint string
		want     time.Duration
	}{
		{"forget", DefaultForgetTimeout},
		{"enrich", DefaultClientTimeout},
		{"stats", DefaultClientTimeout},
		{"export", DefaultExportWait},
	} {
		if got := defaultTimeout(tt.endpoint); got != tt.want {
			t.Errorf("defaultTimeout(%q) = %s, want %s", tt.endpoint, got, tt.want)
		}
		// WithRequestTimeout replaces the short default only: a client
		// made for a long export must not cut a forget short.
		// An export page waits it whatever it is: it bounds each page.
		want := tt.want
		if want == DefaultClientTimeout || tt.endpoint == "export" {
			want = time.Second
		}
		if got := (&Client{}).WithRequestTimeout(time.Second).requestTimeout(tt.endpoint); got != want {
			t.Errorf("WithRequestTimeout(1s): %q waits %s, want %s", tt.endpoint, got, want)
		}
		// A longer one than the endpoint's own applies to it too.
		if got := (&Client{}).WithRequestTimeout(time.Hour).requestTimeout(tt.endpoint); got != time.Hour {
			t.Errorf("WithRequestTimeout(1h): %q waits %s, want 1h", tt.endpoint, got)
		}
	}
}

// TestImportFileWithAByteOrderMark: a file an editor saved with a byte
// order mark (Windows Notepad) imports: the mark is no part of the header,
// which failed as "not a memoryd export" though it read the same.
func TestImportFileWithAByteOrderMark(t *testing.T) {
	t.Parallel()
	file := "\ufeff" + ExportHeader + "\r\n" + `{"type":"fact","key":"name","value":"Ana","source_at":"2026-11-01T10:00:00Z","updated_at":"2026-11-01T10:00:00Z"}` + "\r\n"
	if err := CheckImport(strings.NewReader(file)); err != nil {
		t.Fatalf("CheckImport: %v", err)
	}
	var header []byte
	if err := scanImport(strings.NewReader(file), func(num int, b []byte) error {
		if num == 1 {
			header = b
		}
		return nil
	}); err != nil || string(header) != ExportHeader {
		t.Fatalf("header sent %q (%v), want %q", header, err, ExportHeader)
	}
	if err := CheckImport(strings.NewReader("\ufeffmemoryd export\n")); err == nil {
		t.Error("a mark before a wrong header: no error")
	}
}
