package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestFailureOfAWriteInDoubtSaysWhatToDo: a command's error that leaves
// a database write in doubt is printed with its command's hint, and
// with the generic one when the command gave none; never with both, and
// never bare "commit not confirmed: ...".
func TestFailureOfAWriteInDoubtSaysWhatToDo(t *testing.T) {
	t.Parallel()
	lost := fmt.Errorf("grant reader: %w: the connection was lost during the commit: %w", store.ErrCommitUnconfirmed, errors.New("unexpected EOF"))
	for _, tt := range []struct {
		name    string
		err     error
		want    string
		wantNot string
	}{
		{"no hint given", lost, unconfirmedHint, ""},
		{"the command's hint", ifUnconfirmed(lost, "granting it again is safe"), "(granting it again is safe)", unconfirmedHint},
		{"a hint given twice", ifUnconfirmed(ifUnconfirmed(lost, "first"), "second"), "(first)", "second"},
		{"not in doubt", ifUnconfirmed(errors.New("boom"), "granting it again is safe"), "boom", "granting"},
	} {
		got := failure(tt.err)
		if !strings.Contains(got, tt.want) || tt.wantNot != "" && strings.Contains(got, tt.wantNot) {
			t.Errorf("%s: %q; want %q in it, not %q", tt.name, got, tt.want, tt.wantNot)
		}
	}
}
