package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/memoryd/memoryd/chunker"
)

// The knowledge-base question set (testdata/docs): hand-written questions
// over a public document set, each naming the section that answers it. It
// was written before any retrieval over documents existed, so that nothing
// is tuned on it.

// docSource is one document of the set: a file of a Go module, at the
// version memoryd's go.sum pins, read from the module cache.
type docSource struct {
	Module  string `json:"module"`
	Version string `json:"version"`
	File    string `json:"file"`
	// Source is the document's name in questions and citations.
	Source string `json:"source"`
}

// docQuestion is one question and the section (the last heading of its
// heading path) that answers it. questions.jsonl names the section as
// written in the document; loadDocSet makes it the title the chunker gives
// it (sectionTitle).
type docQuestion struct {
	ID       string `json:"id"`
	Question string `json:"question"`
	Source   string `json:"source"`
	Section  string `json:"section"`
}

// loadDocSet reads the corpus and the questions from dir.
func loadDocSet(dir string) ([]docSource, []docQuestion, error) {
	b, err := os.ReadFile(filepath.Join(dir, "corpus.json"))
	if err != nil {
		return nil, nil, err
	}
	var corpus struct {
		Documents []docSource `json:"documents"`
	}
	if err := json.Unmarshal(b, &corpus); err != nil {
		return nil, nil, fmt.Errorf("corpus.json: %w", err)
	}
	f, err := os.Open(filepath.Join(dir, "questions.jsonl"))
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	var qs []docQuestion
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var q docQuestion
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&q); err != nil {
			return nil, nil, fmt.Errorf("questions.jsonl:%d: %w", n, err)
		}
		if q.Section, err = sectionTitle(q.Section); err != nil {
			return nil, nil, fmt.Errorf("questions.jsonl:%d: %w", n, err)
		}
		qs = append(qs, q)
	}
	return corpus.Documents, qs, sc.Err()
}

// sectionTitle returns heading, a heading's text as written in a document,
// as the chunker titles it in a heading path: without its links, badges,
// tags and emphasis ("__Single fetch__" is "Single fetch",
// "[pgxmock](https://…)" "pgxmock"). The questions name their sections as
// the documents write them, so that the chunker's way of titling them
// (changed by commit 0ec9086) does not unmake the question set.
func sectionTitle(heading string) (string, error) {
	cs, err := chunker.Split("# "+heading+"\n\ntext\n", chunker.Config{})
	if err != nil {
		return "", fmt.Errorf("section %q: %w", heading, err)
	}
	if len(cs) == 0 || len(cs[0].Headings) != 1 {
		return "", fmt.Errorf("section %q is not one heading", heading)
	}
	return cs[0].Headings[0], nil
}

// readDoc returns a document's text, downloading its module into the
// module cache first if it is not there (go mod download: the module proxy).
func readDoc(d docSource) (string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", d.Module+"@"+d.Version).Output()
	if err != nil {
		// -json reports a module's failure on stdout, the command's own on
		// stderr (offline, GOPROXY=off).
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s%s", err, bytes.TrimSpace(out), bytes.TrimSpace(ee.Stderr))
		}
		return "", fmt.Errorf("go mod download %s@%s: %w", d.Module, d.Version, err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: no directory (%v)", d.Module, d.Version, err)
	}
	b, err := os.ReadFile(filepath.Join(m.Dir, filepath.FromSlash(d.File)))
	return string(b), err
}
