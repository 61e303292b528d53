package systest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docRef is a reference to a section of the docs in Go source, in an error
// message or a comment: docs/protocol.md, "Reply subjects" (the quotes
// escaped inside a Go string).
var docRef = regexp.MustCompile(`docs/([a-z]+)\.md(?:, \\?"([^"\\]+)\\?"| \(([A-Z][^)]+)\))`)

// TestDocSectionReferencesExist: every section of the docs that Go source
// names (an error message telling a user where to read, a comment telling
// a maintainer) is a heading of that file, so a renamed or misremembered
// section is caught (the CLI once sent users to a "Permissions" section
// protocol.md does not have).
func TestDocSectionReferencesExist(t *testing.T) {
	t.Parallel()
	headings := map[string][]string{} // file → lower-case heading texts
	found := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range docRef.FindAllStringSubmatch(string(src), -1) {
			file := m[1]
			// A reference may wrap onto the next comment line.
			section := strings.Join(strings.Fields(strings.ReplaceAll(m[2]+m[3], "//", " ")), " ")
			hs, ok := headings[file]
			if !ok {
				doc, err := os.ReadFile(filepath.Join("..", "docs", file+".md"))
				if err != nil {
					t.Errorf("%s names docs/%s.md, which cannot be read: %v", path, file, err)
					headings[file] = nil
					continue
				}
				fenced := false
				for _, line := range strings.Split(string(doc), "\n") {
					if strings.HasPrefix(line, "```") {
						fenced = !fenced // a shell comment in a code block is no heading
					}
					if !fenced && strings.HasPrefix(line, "#") {
						hs = append(hs, strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#"))))
					}
				}
				headings[file] = hs
			}
			found++
			want := strings.ToLower(section)
			ok = false
			for _, h := range hs {
				// The heading, or its start before a parenthesis or a
				// colon ("Hybrid retrieval (with embeddings)").
				if h == want || strings.HasPrefix(h, want+" (") || strings.HasPrefix(h, want+":") {
					ok = true
					break
				}
			}
			if !ok {
				t.Errorf("%s names docs/%s.md, %q: no heading of that file is so", path, file, section)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("no reference to a docs section found: the pattern no longer matches the source")
	}
}
