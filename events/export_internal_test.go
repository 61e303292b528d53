package events

import (
	"errors"
	"testing"
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
