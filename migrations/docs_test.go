package migrations

import (
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestEveryMigrationHasAnUpgradeSection checks that docs/operations.md has an
// "### Upgrading past migration NNN" heading for every migration from 036 on
// (those before share range headings): "Upgrading" tells operators to read
// the section of each migration between the old binary's schema and the new
// one's, and step 3 points to them by number. Migration 058's heading was
// lost when 059's and 060's notes were added above it, and 059 never had one.
func TestEveryMigrationHasAnUpgradeSection(t *testing.T) {
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	files, err := fs.Glob(FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	num := regexp.MustCompile(`^(\d{3})_`)
	for _, f := range files {
		m := num.FindStringSubmatch(f)
		if m == nil {
			t.Errorf("%s: not named NNN_description.sql", f)
			continue
		}
		v, _ := strconv.Atoi(m[1])
		if v < 36 {
			continue
		}
		heading := regexp.MustCompile(fmt.Sprintf(`(?m)^### Upgrading past migration %s$`, m[1]))
		if !heading.Match(doc) {
			t.Errorf("docs/operations.md has no \"### Upgrading past migration %s\" section (%s)", m[1], f)
		}
	}
}
