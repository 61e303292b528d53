// Package secretfiletest writes credential files as the docs tell an
// operator to rotate them: whole, by writing another file and renaming it
// over the first, so that no reader sees half a key.
package secretfiletest

import (
	"os"
	"testing"
)

// Replace makes text the content of path, whole.
func Replace(t testing.TB, path, text string) {
	t.Helper()
	if err := os.WriteFile(path+".new", []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}
