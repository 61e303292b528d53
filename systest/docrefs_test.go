package systest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
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

// docLink is a Markdown link to a section: [text](file.md#anchor) or
// [text](#anchor).
var docLink = regexp.MustCompile(`\]\(((?:[A-Za-z0-9_./-]+)?\.md)?#([^)\s]+)\)`)

// TestDocRefsAnchorsExist: every Markdown link to a section of README.md
// or docs/*.md (an anchor, #rolling-upgrades, in the same file or in
// another) names a heading of that file, by GitHub's anchor rule, so that
// a section renamed or moved is caught with the links left pointing at it.
func TestDocRefsAnchorsExist(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join("..", "README.md")}, files...)
	anchors := map[string]map[string]bool{} // cleaned path → anchors
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		doc, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := map[string]bool{}
		seen := map[string]int{}
		fenced := false
		for _, line := range strings.Split(string(doc), "\n") {
			if strings.HasPrefix(line, "```") {
				fenced = !fenced
			}
			if fenced || !strings.HasPrefix(line, "#") {
				continue
			}
			slug := githubAnchor(strings.TrimSpace(strings.TrimLeft(line, "#")))
			if n := seen[slug]; n > 0 {
				a[slug+"-"+strconv.Itoa(n)] = true
			} else {
				a[slug] = true
			}
			seen[slug]++
		}
		anchors[path] = a
		return a, nil
	}
	found := 0
	for _, f := range files {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fenced := false
		for i, line := range strings.Split(string(doc), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
			}
			if fenced {
				continue
			}
			for _, m := range docLink.FindAllStringSubmatch(line, -1) {
				target := f
				if m[1] != "" {
					target = filepath.Join(filepath.Dir(f), m[1])
				}
				a, err := anchorsOf(filepath.Clean(target))
				if err != nil {
					t.Errorf("%s:%d links to %s, which cannot be read: %v", f, i+1, m[1], err)
					continue
				}
				found++
				if !a[m[2]] {
					t.Errorf("%s:%d links to %s#%s: no heading of %s has that anchor", f, i+1, m[1], m[2], target)
				}
			}
		}
	}
	if found < 50 {
		t.Fatalf("found only %d links to sections: is the pattern broken?", found)
	}
}

// githubAnchor is the anchor GitHub gives a heading: lower case, spaces
// as hyphens, punctuation other than hyphens and underscores dropped.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
