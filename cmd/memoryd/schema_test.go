package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSchemasMatchGoTypes: the committed docs/schemas are exactly what the Go
// wire types generate. After changing a wire type, run
// `go run ./cmd/memoryd schemas`.
func TestSchemasMatchGoTypes(t *testing.T) {
	t.Parallel()
	files, err := renderSchemas()
	if err != nil {
		t.Fatal(err)
	}
	dir := "../../docs/schemas"
	committed, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(committed) != len(files) {
		t.Errorf("%d committed schemas, %d generated", len(committed), len(files))
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("docs/schemas/%s is stale or missing (%v): run `go run ./cmd/memoryd schemas`", name, err)
		}
	}
}

func TestTurnSchemaContract(t *testing.T) {
	t.Parallel()
	var s struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	files, err := renderSchemas()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(files["turn_event.json"], &s); err != nil {
		t.Fatal(err)
	}
	slices.Sort(s.Required)
	if want := []string{"id", "timestamp", "user_id", "user_message"}; !slices.Equal(s.Required, want) {
		t.Fatalf("turn event required = %v, want %v (the contract)", s.Required, want)
	}
	for _, f := range []string{"conversation_id", "assistant_response", "memory", "metadata"} {
		if _, ok := s.Properties[f]; !ok {
			t.Errorf("turn event schema lacks %s", f)
		}
	}
}

// TestSchemasWriteOnlyIntoTheRepository: `memoryd schemas` writes to
// docs/schemas of the memoryd checkout it runs in (from any directory inside
// it), to --out when given, and elsewhere refuses without creating anything.
// Not parallel: it changes the working directory.
func TestSchemasWriteOnlyIntoTheRepository(t *testing.T) {
	schemas := func(args ...string) (string, int) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), &app{stdout: &out, stderr: &errOut}, append([]string{"schemas"}, args...))
		return out.String() + errOut.String(), code
	}
	entries := func(dir string) []string {
		t.Helper()
		des, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, de := range des {
			names = append(names, de.Name())
		}
		return names
	}
	want := len(wireSchemas())

	// An unrelated directory, and one inside another module: an error that
	// names --out, and nothing written.
	for _, gomod := range []string{"", "module example.com/frontend\n\ngo 1.26.0\n"} {
		dir := t.TempDir()
		if gomod != "" {
			if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Chdir(dir)
		out, code := schemas()
		if code != 1 || !strings.Contains(out, "--out DIR") {
			t.Errorf("schemas in %s (go.mod %q): exit %d, %q; want 1 and a pointer to --out", dir, gomod, code, out)
		}
		left := 0 // go.mod, when the case has one
		if gomod != "" {
			left = 1
		}
		if names := entries(dir); len(names) != left {
			t.Errorf("schemas in %s without --out left %v", dir, names)
		}
		// --out writes exactly there, creating it.
		if out, code := schemas("--out", "out/schemas"); code != 0 {
			t.Fatalf("schemas --out: exit %d: %s", code, out)
		}
		if n := len(entries(filepath.Join(dir, "out", "schemas"))); n != want {
			t.Errorf("schemas --out wrote %d files, want %d", n, want)
		}
	}

	// Anywhere inside a memoryd checkout: its docs/schemas.
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte(moduleLine+"\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(root, "cmd", "memoryd")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	if out, code := schemas(); code != 0 {
		t.Fatalf("schemas inside the checkout: exit %d: %s", code, out)
	}
	if n := len(entries(filepath.Join(root, "docs", "schemas"))); n != want {
		t.Errorf("schemas wrote %d files to the checkout's docs/schemas, want %d", n, want)
	}
	if names := entries(sub); len(names) != 0 {
		t.Errorf("schemas wrote %v into the current directory", names)
	}
}
