package ranking_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRankingIsPure checks that the package imports the standard library
// alone: no store, no database driver, no NATS.
func TestRankingIsPure(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/memoryd/memoryd/ranking" {
			t.Errorf("ranking depends on %s", p)
		}
	}
}
