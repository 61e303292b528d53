package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/chunker"
)

// TestDocSet: the question set is well formed (unique ids, at least 40
// questions, every document asked about) and every question's section is a
// section of its document with text in it, as the chunker reads it.
func TestDocSet(t *testing.T) {
	docs, qs, err := loadDocSet("testdata/docs")
	if err != nil {
		t.Fatal(err)
	}
	// The documents are read at the versions memoryd builds with, which
	// any machine that built this module has in its module cache: a
	// dependency's upgrade moves them, and the questions must be checked
	// against the new documents.
	for _, d := range docs {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", d.Module).Output()
		if err != nil {
			t.Fatalf("go list -m %s: %v", d.Module, err)
		}
		if v := strings.TrimSpace(string(out)); v != d.Version {
			t.Errorf("%s: corpus.json reads %s at %s, go.mod requires %s: check the questions against its documents at %s and update corpus.json", d.Source, d.Module, d.Version, v, v)
		}
	}
	if len(qs) < 40 {
		t.Fatalf("%d questions, want at least 40", len(qs))
	}
	sections := map[string]map[string]bool{}
	for _, d := range docs {
		text, err := readDoc(d)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := chunker.Split(text, chunker.Config{})
		if err != nil {
			t.Fatalf("%s: %v", d.Source, err)
		}
		sections[d.Source] = map[string]bool{}
		for _, c := range cs {
			if len(c.Headings) > 0 {
				sections[d.Source][c.Headings[len(c.Headings)-1]] = true
			}
		}
	}
	ids, asked := map[string]bool{}, map[string]int{}
	for _, q := range qs {
		if ids[q.ID] {
			t.Errorf("id %s twice", q.ID)
		}
		ids[q.ID] = true
		if strings.TrimSpace(q.Question) == "" {
			t.Errorf("%s: no question", q.ID)
		}
		secs, ok := sections[q.Source]
		if !ok {
			t.Errorf("%s: source %q is not in the corpus", q.ID, q.Source)
			continue
		}
		if !secs[q.Section] {
			t.Errorf("%s: %q has no section %q with text", q.ID, q.Source, q.Section)
		}
		asked[q.Source]++
	}
	for _, d := range docs {
		if asked[d.Source] == 0 {
			t.Errorf("no question about %s", d.Source)
		}
	}
}
