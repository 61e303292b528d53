package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
)

// wireSchemas names every wire type: the turn event, and each endpoint's
// request and reply (file names match the endpoints' micro metadata).
func wireSchemas() map[string]any {
	return map[string]any{
		"turn_event":          events.Turn{},
		"enrich.request":      enricher.EnrichRequest{},
		"enrich.reply":        enricher.EnrichReply{},
		"search.request":      enricher.SearchRequest{},
		"search.reply":        enricher.SearchReply{},
		"store.request":       enricher.StoreRequest{},
		"store.reply":         enricher.StoreReply{},
		"clear.request":       enricher.ClearRequest{},
		"clear.reply":         enricher.DeletedReply{},
		"facts_set.request":   enricher.SetFactRequest{},
		"facts_set.reply":     enricher.SetFactReply{},
		"facts_get.request":   enricher.FactRequest{},
		"facts_get.reply":     enricher.Fact{},
		"facts_clear.request": enricher.FactRequest{},
		"facts_clear.reply":   enricher.DeletedReply{},
		"facts_list.request":  enricher.UserRequest{},
		"facts_list.reply":    enricher.FactsReply{},
		"stats.request":       enricher.UserRequest{},
		"stats.reply":         enricher.StatsReply{},
		"forget.request":      enricher.UserRequest{},
		"forget.reply":        enricher.ForgetReply{},
	}
}

// optionalFields are fields without omitempty that the contract still lets
// a sender leave out.
var optionalFields = map[string][]string{"turn_event": {"assistant_response"}}

// schemaFor builds a JSON Schema (draft 2020-12) from a Go type's JSON
// encoding: fields without omitempty/omitzero are required, unknown
// properties are allowed (receivers ignore them).
func schemaFor(name string, v any) map[string]any {
	s := typeSchema(reflect.TypeOf(v), optionalFields[name])
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	s["$id"] = enricher.SchemaBase + name + ".json"
	s["title"] = "memoryd " + name
	return s
}

var timeType = reflect.TypeFor[time.Time]()

func typeSchema(t reflect.Type, optional []string) map[string]any {
	nullable := false
	if t.Kind() == reflect.Pointer {
		t, nullable = t.Elem(), true
	}
	var s map[string]any
	switch {
	case t == timeType:
		s = map[string]any{"type": "string", "format": "date-time"}
	case t == reflect.TypeFor[json.RawMessage]():
		s = map[string]any{"type": "object"}
		nullable = true
	case t.Kind() == reflect.String:
		s = map[string]any{"type": "string"}
	case t.Kind() == reflect.Bool:
		s = map[string]any{"type": "boolean"}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		s = map[string]any{"type": "integer"}
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		s = map[string]any{"type": "number"}
	case t.Kind() == reflect.Slice:
		s = map[string]any{"type": "array", "items": typeSchema(t.Elem(), nil)}
	case t.Kind() == reflect.Map:
		s = map[string]any{"type": "object", "additionalProperties": typeSchema(t.Elem(), nil)}
	case t.Kind() == reflect.Struct:
		props := map[string]any{}
		var required []string
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if !f.IsExported() || tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if name == "" {
				name = f.Name
			}
			props[name] = typeSchema(f.Type, nil)
			if why := f.Tag.Get("deprecated"); why != "" {
				p := props[name].(map[string]any)
				p["deprecated"], p["description"] = true, "Deprecated: "+why
			}
			if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") && !slices.Contains(optional, name) {
				required = append(required, name)
			}
		}
		s = map[string]any{"type": "object", "properties": props, "additionalProperties": true}
		if len(required) > 0 {
			s["required"] = required
		}
	default:
		panic(fmt.Sprintf("schema: unsupported type %s", t))
	}
	if nullable {
		s["type"] = []any{s["type"], "null"}
	}
	return s
}

// renderSchemas returns every schema file's content by file name.
func renderSchemas() (map[string][]byte, error) {
	out := map[string][]byte{}
	for name, v := range wireSchemas() {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		if err := enc.Encode(schemaFor(name, v)); err != nil {
			return nil, err
		}
		out[name+".json"] = buf.Bytes()
	}
	return out, nil
}

func runSchemas(_ context.Context, a *app, args []string) error {
	var dir string
	f := newFlags("schemas", "Usage: memoryd schemas [--out DIR]\n\nWrites the JSON Schemas of the turn event and of every request and reply, generated from the Go types.")
	f.String(&dir, "out", "docs/schemas", "directory to write to")
	if err := f.Parse(args); err != nil {
		return err
	}
	files, err := renderSchemas()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(a.stdout, "%d schemas written to %s\n", len(files), dir)
	return nil
}
