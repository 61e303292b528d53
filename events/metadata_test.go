package events_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events"
)

const metaTurn = `{"id":"e1","user_id":"alice","user_message":"hi","timestamp":"2026-11-21T10:00:00Z","metadata":`

// TestDecodeKeepsMetadataNumbers: numbers in metadata come out of Decode as
// the literal sent, not rounded through a float64.
func TestDecodeKeepsMetadataNumbers(t *testing.T) {
	t.Parallel()
	for _, lit := range []string{
		"1234567890123456789",
		"-9223372036854775809",
		"123456789012345678901234567890",
		"0.1000000000000000055511151231257827",
		"3.14159265358979323846264338327950288419716939937510",
		"1.50",
		"1e308",
		"2.5E-324",
		"0",
	} {
		turn, err := events.Decode([]byte(metaTurn + `{"n":` + lit + `,"a":[` + lit + `]}}`))
		if err != nil {
			t.Fatalf("%s: %v", lit, err)
		}
		if got, want := string(turn.Metadata), `{"a":[`+lit+`],"n":`+lit+`}`; got != want {
			t.Errorf("metadata = %s, want %s", got, want)
		}
	}
}

// TestDecodeMetadataNumberLimits: a number Postgres could not store, or that
// a short exponent would blow up when read back, is refused with the reason.
func TestDecodeMetadataNumberLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ lit, reason string }{
		{"1e309", "exponent out of range"},
		{"1e131072", "exponent out of range"},
		{"-1E+99999999999999999999", "exponent out of range"},
		{"1e-325", "exponent out of range"},
		{"1e-1000000000", "exponent out of range"},
		{"1." + strings.Repeat("1", 16100) + "e-300", "digits after the decimal point"},
	} {
		_, err := events.Decode([]byte(metaTurn + `{"n":` + tc.lit + `}}`))
		var ve *events.ValidationError
		if !errors.As(err, &ve) || ve.Field != "metadata" || !strings.Contains(ve.Reason, tc.reason) {
			t.Errorf("%.30s: err = %v, want a metadata error saying %q", tc.lit, err, tc.reason)
		}
	}
}
