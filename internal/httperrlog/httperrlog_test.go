package httperrlog

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
)

func TestLinesOfNetHTTP(t *testing.T) {
	for _, tc := range []struct {
		line, msg, level string
		hint             bool
	}{
		{"http: Accept error: accept tcp 127.0.0.1:9090: accept4: too many open files; retrying in 5ms", MsgAccept, "WARN", true},
		{"http: Accept error: accept tcp 127.0.0.1:9090: accept4: connection aborted; retrying in 5ms", MsgAccept, "WARN", false},
		{"http: TLS handshake error from 127.0.0.1:5000: EOF", MsgServer, "WARN", false},
		{"http: panic serving 127.0.0.1:5000: boom\ngoroutine 7 [running]:", MsgServer, "ERROR", false},
	} {
		var out bytes.Buffer
		New(slog.New(slog.NewJSONHandler(&out, nil))).Print(tc.line)
		var rec map[string]any
		if err := json.Unmarshal(out.Bytes(), &rec); err != nil {
			t.Fatalf("%q: not one JSON line: %q", tc.line, out.String())
		}
		if rec["msg"] != tc.msg || rec["level"] != tc.level {
			t.Errorf("%q: msg %v level %v, want %q %s", tc.line, rec["msg"], rec["level"], tc.msg, tc.level)
		}
		if _, ok := rec["hint"]; ok != tc.hint {
			t.Errorf("%q: hint present %v, want %v", tc.line, ok, tc.hint)
		}
	}
}
