package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
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
